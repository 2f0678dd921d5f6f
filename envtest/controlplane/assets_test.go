package controlplane

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The embedded copy must be the tools module itself, or restartbed would build other versions
// than the ones `make` pins. `make generate` rewrites the copy.
func TestEmbeddedToolsModuleIsCurrent(t *testing.T) {
	for embedded, file := range map[string]string{"tools.mod": "go.mod", "tools.sum": "go.sum"} {
		want, err := os.ReadFile(filepath.Join("..", "..", "hack", "tools", file))
		if err != nil {
			t.Fatalf("reading hack/tools/%s: %v", file, err)
		}
		got, err := os.ReadFile(embedded)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want, got) {
			t.Errorf("envtest/controlplane/%s differs from hack/tools/%s: run `make generate`", embedded, file)
		}
	}
}

func TestParseVersions(t *testing.T) {
	cases := []struct {
		name    string
		mod     string
		want    Versions
		wantErr string
	}{
		{
			name: "both",
			mod:  "module x\nrequire (\n\tk8s.io/kubernetes v1.35.4\n\tgo.etcd.io/etcd/server/v3 v3.6.5 // indirect\n)\n",
			want: Versions{Kubernetes: "v1.35.4", Etcd: "v3.6.5"},
		},
		{
			name:    "no etcd",
			mod:     "module x\nrequire k8s.io/kubernetes v1.35.4\n",
			wantErr: "must require both",
		},
		{
			name:    "garbage",
			mod:     "module x\nrequire (\n",
			wantErr: "tools.mod",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseVersions([]byte(tc.mod))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseVersions() error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parseVersions() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCurrentVersionsArePinned(t *testing.T) {
	if diff := cmp.Diff(Versions{Kubernetes: "v1.35.4", Etcd: "v3.6.5"}, CurrentVersions()); diff != "" {
		t.Errorf("CurrentVersions() (-want +got):\n%s", diff)
	}
}

// fakeAssets writes two executable files named like the control plane.
func fakeAssets(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{KubeAPIServerBinary, EtcdBinary} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFindOrder(t *testing.T) {
	key := CurrentVersions().Key()
	cases := []struct {
		name       string
		env        string // KUBEBUILDER_ASSETS, relative to the test's root; "-" for unset
		populate   []string
		wantDir    string
		wantSource string
		wantErr    string
	}{
		{
			name:       "environment first",
			env:        "prebuilt",
			populate:   []string{"prebuilt", "repo/bin/controlplane/" + key, "cache/controlplane/" + key},
			wantDir:    "prebuilt",
			wantSource: AssetsEnv,
		},
		{
			name:    "environment set but incomplete is an error",
			env:     "prebuilt",
			wantErr: "KUBEBUILDER_ASSETS=",
		},
		{
			name:       "repository bin before the cache",
			env:        "-",
			populate:   []string{"repo/bin/controlplane/" + key, "cache/controlplane/" + key},
			wantDir:    "repo/bin/controlplane/" + key,
			wantSource: "repository bin/",
		},
		{
			name:       "user cache",
			env:        "-",
			populate:   []string{"cache/controlplane/" + key},
			wantDir:    "cache/controlplane/" + key,
			wantSource: "user cache",
		},
		{
			name:     "another version in the cache is not used",
			env:      "-",
			populate: []string{"cache/controlplane/kube-apiserver-v1.34.0-etcd-v3.6.5-linux-amd64"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.MkdirAll(filepath.Join(root, "repo", "pkg"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "repo", "go.mod"), []byte("module github.com/restartbed/restartbed\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, p := range tc.populate {
				fakeAssets(t, filepath.Join(root, p))
			}
			if tc.env == "-" {
				t.Setenv(AssetsEnv, "")
			} else {
				t.Setenv(AssetsEnv, filepath.Join(root, tc.env))
			}
			opts := Options{CacheDir: filepath.Join(root, "cache"), SearchFrom: filepath.Join(root, "repo", "pkg")}
			if err := opts.complete(); err != nil {
				t.Fatal(err)
			}
			got, err := find(opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("find() error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := Assets{}
			if tc.wantDir != "" {
				want = Assets{Dir: filepath.Join(root, tc.wantDir), Source: tc.wantSource}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("find() (-want +got):\n%s", diff)
			}
		})
	}
}

// Parallel callers build once: the lock serialises them and the later ones find the result.
func TestBuildOnceBuildsOnce(t *testing.T) {
	cache := t.TempDir()
	dir := filepath.Join(cache, "thing")
	var builds atomic.Int32
	var progress syncBuffer
	opts := Options{Progress: &progress, CacheDir: cache, SearchFrom: cache}
	if err := opts.complete(); err != nil {
		t.Fatal(err)
	}
	build := func(_ Options, _, out string) error {
		builds.Add(1)
		fakeAssets(t, out)
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = buildOnce(opts, dir, "the thing", "", build) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if got := builds.Load(); got != 1 {
		t.Errorf("built %d times, want 1", got)
	}
	if err := complete(dir); err != nil {
		t.Errorf("result is not in place: %v", err)
	}
	if !strings.Contains(progress.String(), "restartbed: building the thing from source into "+dir) {
		t.Errorf("progress = %q, want the building line", progress.String())
	}
	leftovers, _ := filepath.Glob(dir + ".build-*")
	if len(leftovers) != 0 {
		t.Errorf("build directories left behind: %v", leftovers)
	}
}

// A failed build says what failed and how to retry, and leaves nothing that looks finished.
func TestBuildOnceFailure(t *testing.T) {
	cache := t.TempDir()
	dir := filepath.Join(cache, "thing")
	opts := Options{Progress: &syncBuffer{}, CacheDir: cache, SearchFrom: cache}
	if err := opts.complete(); err != nil {
		t.Fatal(err)
	}
	err := buildOnce(opts, dir, "the thing", "", func(_ Options, _, _ string) error {
		return os.ErrPermission
	})
	if err == nil {
		t.Fatal("buildOnce() succeeded, want the build's error")
	}
	for _, want := range []string{"building the thing failed", "make envtest-assets", AssetsEnv, "permission denied"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, statErr := os.Stat(dir); !os.IsNotExist(statErr) {
		t.Errorf("%s exists after a failed build", dir)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
