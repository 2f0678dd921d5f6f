package controlplane

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// The releases restartbed ships: the newest patch of each supported minor whose module
// verifies, with the etcd each release ships. Changing them is a decision; this test makes it one.
func TestShippedReleases(t *testing.T) {
	var got [][2]string
	for _, r := range Releases() {
		got = append(got, [2]string{r.Kubernetes, r.Etcd})
	}
	want := [][2]string{{"v1.35.8", "v3.6.6"}, {"v1.36.4", "v3.6.8"}, {"v1.37.2", "v3.7.0"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Releases() (-want +got):\n%s", diff)
	}
	if got := DefaultRelease().Kubernetes; got != "v1.37.2" {
		t.Errorf("DefaultRelease() = %s, want the newest, v1.37.2", got)
	}
	for _, r := range Releases() {
		if len(r.FeatureGates()) < 100 {
			t.Errorf("%s knows %d feature gates; its featuregates.json looks truncated", r.Kubernetes, len(r.FeatureGates()))
		}
	}
}

func TestResolveRelease(t *testing.T) {
	cases := []struct {
		in, want, wantErr string
	}{
		{in: "", want: "v1.37.2"},
		{in: "1.36", want: "v1.36.4"},
		{in: "v1.35", want: "v1.35.8"},
		{in: "1.37.2", want: "v1.37.2"},
		{in: "v1.36.4", want: "v1.36.4"},
		{in: "1.36.5", wantErr: "Kubernetes 1.36.5 is not supported: restartbed builds v1.36.4 of 1.36; supported: 1.35 (v1.35.8), 1.36 (v1.36.4), 1.37 (v1.37.2)"},
		{in: "1.34", wantErr: "Kubernetes 1.34 is not supported; supported: 1.35 (v1.35.8)"},
		{in: "latest", wantErr: `Kubernetes version "latest" is not a version like 1.36 or 1.36.4; supported: 1.35`},
		{in: "1.36.0-rc.1", wantErr: "is not a version like"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ResolveRelease(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ResolveRelease(%q) error = %v, want %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Kubernetes != tc.want {
				t.Errorf("ResolveRelease(%q) = %s, want %s", tc.in, got.Kubernetes, tc.want)
			}
		})
	}
}

func TestLoadReleases(t *testing.T) {
	mod := func(module, version string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte("module x\n\nrequire " + module + " " + version + "\n")}
	}
	gates := &fstest.MapFile{Data: []byte(`[{"name":"A","default":true,"preRelease":"BETA"}]`)}
	features := &fstest.MapFile{Data: []byte(`[{"name":"F","gates":["A"],"discoverable":true}]`)}
	cases := []struct {
		name    string
		fs      fstest.MapFS
		want    []string
		wantErr string
	}{
		{
			name: "sorted by version",
			fs: fstest.MapFS{
				"releases/v1.10/kubernetes.mod": mod(kubernetesModule, "v1.10.1"), "releases/v1.10/etcd.mod": mod(etcdModule, "v3.1.0"),
				"releases/v1.10/featuregates.json": gates, "releases/v1.10/nodefeatures.json": features,
				"releases/v1.9/kubernetes.mod": mod(kubernetesModule, "v1.9.3"), "releases/v1.9/etcd.mod": mod(etcdModule, "v3.0.0"),
				"releases/v1.9/featuregates.json": gates, "releases/v1.9/nodefeatures.json": features,
			},
			want: []string{"v1.9.3", "v1.10.1"},
		},
		{
			name: "no etcd",
			fs: fstest.MapFS{
				"releases/v1.9/kubernetes.mod": mod(kubernetesModule, "v1.9.3"), "releases/v1.9/etcd.mod": mod("x", "v1.0.0"),
				"releases/v1.9/featuregates.json": gates, "releases/v1.9/nodefeatures.json": features,
			},
			wantErr: "releases/v1.9/etcd.mod: it does not require go.etcd.io/etcd/server/v3",
		},
		{
			name: "folder of another minor",
			fs: fstest.MapFS{
				"releases/v1.9/kubernetes.mod": mod(kubernetesModule, "v1.10.1"), "releases/v1.9/etcd.mod": mod(etcdModule, "v3.0.0"),
				"releases/v1.9/featuregates.json": gates, "releases/v1.9/nodefeatures.json": features,
			},
			wantErr: "releases/v1.9 holds Kubernetes v1.10.1",
		},
		{
			name:    "nothing",
			fs:      fstest.MapFS{"releases/README": &fstest.MapFile{}},
			wantErr: "no release",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := loadReleases(tc.fs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("loadReleases() error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rs {
				got = append(got, r.Kubernetes)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("loadReleases() (-want +got):\n%s", diff)
			}
		})
	}
}

// Each release builds into its own directory, so a version change never reuses an old build.
func TestKeysDiffer(t *testing.T) {
	seen := map[string]string{}
	for _, r := range Releases() {
		k := r.Key()
		if other, dup := seen[k]; dup {
			t.Errorf("%s and %s share the key %s", r.Kubernetes, other, k)
		}
		seen[k] = r.Kubernetes
		if !strings.HasPrefix(k, "kubernetes-"+r.Kubernetes+"-etcd-"+r.Etcd+"-") {
			t.Errorf("key %s does not name %s", k, r)
		}
		if k != r.Key() {
			t.Errorf("%s's key is not stable", r.Kubernetes)
		}
	}
}

// fakeAssets writes executable files named like the control plane.
func fakeAssets(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range Binaries {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// The cache holds a release once all its binaries are in place; a partial directory is not used.
func TestComplete(t *testing.T) {
	dir := t.TempDir()
	if err := complete(dir); err == nil || !strings.Contains(err.Error(), "no kube-scheduler") {
		t.Errorf("complete(empty) = %v, want it to name the missing binaries", err)
	}
	fakeAssets(t, dir)
	if err := complete(dir); err != nil {
		t.Errorf("complete() = %v, want nil", err)
	}
	if err := os.Chmod(filepath.Join(dir, EtcdBinary), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := complete(dir); err == nil || !strings.Contains(err.Error(), "etcd is not an executable file") {
		t.Errorf("complete() = %v, want etcd not executable", err)
	}
}

// Ensure uses a complete cache directory as it is and builds nothing.
func TestEnsureUsesTheCache(t *testing.T) {
	cache := t.TempDir()
	opts := Options{Progress: &syncBuffer{}, CacheDir: cache}
	if err := opts.complete(); err != nil {
		t.Fatal(err)
	}
	r := DefaultRelease()
	fakeAssets(t, opts.dir(r))
	got, err := Ensure(r, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got.Dir != opts.dir(r) || got.Source != "user cache" {
		t.Errorf("Ensure() = %s from %q, want %s from the user cache", got.Dir, got.Source, opts.dir(r))
	}
}

// Parallel callers build once: the lock serialises them and the later ones find the result.
func TestBuildOnceBuildsOnce(t *testing.T) {
	cache := t.TempDir()
	dir := filepath.Join(cache, "thing")
	var builds atomic.Int32
	var progress syncBuffer
	opts := Options{Progress: &progress, CacheDir: cache}
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
	opts := Options{Progress: &syncBuffer{}, CacheDir: cache}
	if err := opts.complete(); err != nil {
		t.Fatal(err)
	}
	err := buildOnce(opts, dir, "the thing", "", func(_ Options, _, _ string) error {
		return os.ErrPermission
	})
	if err == nil {
		t.Fatal("buildOnce() succeeded, want the build's error")
	}
	for _, want := range []string{"building the thing failed", "restartbed assets", "permission denied"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, statErr := os.Stat(dir); !os.IsNotExist(statErr) {
		t.Errorf("%s exists after a failed build", dir)
	}
	kept, _ := filepath.Glob(dir + ".build-*")
	if len(kept) != 1 {
		t.Fatalf("build directories after a failed build = %v, want the one kept for inspection", kept)
	}

	// The next build clears what the failed one kept, as it would a killed build's.
	err = buildOnce(opts, dir, "the thing", "", func(_ Options, _, out string) error {
		fakeAssets(t, out)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(dir + ".build-*"); len(left) != 0 {
		t.Errorf("build directories left after the next build: %v", left)
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

// A kubelet declares what its release's registry discovers for the gates in force.
func TestDeclaredFeatures(t *testing.T) {
	r := Release{Kubernetes: "v1.36.4",
		gates: Gates{"A": {Name: "A", Default: true}, "B": {Name: "B"}},
		nodeFeatures: []NodeFeature{
			{Name: "OnByDefault", Gates: []string{"A"}, Discoverable: true},
			{Name: "NeedsB", Gates: []string{"A", "B"}, Discoverable: true},
			{Name: "NeedsTheRuntime", Gates: []string{"A"}, Discoverable: false},
			{Name: "Retired", Gates: []string{"A"}, Discoverable: true, MaxVersion: "1.35.0"},
			{Name: "StillReported", Gates: []string{"A"}, Discoverable: true, MaxVersion: "1.36.4"},
		}}
	if diff := cmp.Diff([]string{"OnByDefault", "StillReported"}, r.DeclaredFeatures(nil)); diff != "" {
		t.Errorf("DeclaredFeatures(defaults) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"NeedsB", "OnByDefault", "StillReported"}, r.DeclaredFeatures(map[string]bool{"B": true})); diff != "" {
		t.Errorf("DeclaredFeatures(B on) (-want +got):\n%s", diff)
	}
	if got := r.DeclaredFeatures(map[string]bool{"A": false}); len(got) != 0 {
		t.Errorf("DeclaredFeatures(A off) = %v, want none", got)
	}
	for _, rel := range Releases() {
		declared := rel.DeclaredFeatures(map[string]bool{"RestartAllContainersOnContainerExits": true, "NodeDeclaredFeatures": true})
		if !slices.Contains(declared, "RestartAllContainersOnContainerExits") {
			t.Errorf("a %s kubelet with RestartAllContainers on declares %v, not the feature", rel.Kubernetes, declared)
		}
	}
}

// TestServerRelease maps an apiserver's version to the release that emulates it.
func TestServerRelease(t *testing.T) {
	for v, want := range map[string]string{"v1.36.2": "v1.36.2", "v1.37.0-gke.1200+abc": "v1.37.0", "1.35.1": "v1.35.1"} {
		r, reported, err := ServerRelease(v)
		if err != nil || reported != want || r.Minor() != strings.TrimPrefix(want, "v")[:4] {
			t.Errorf("ServerRelease(%q) = %s, %q, %v; want the release of %s reporting %s", v, r.Kubernetes, reported, err, want[:5], want)
		}
	}
	for _, v := range []string{"v1.20.1", "banana"} {
		if _, _, err := ServerRelease(v); err == nil {
			t.Errorf("ServerRelease(%q): no error", v)
		}
	}
}
