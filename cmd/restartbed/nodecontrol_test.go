package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNodeControlFlagsCheck(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "kubelet-config")
	if err := os.WriteFile(config, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badConfig := filepath.Join(dir, "bad-config")
	if err := os.WriteFile(badConfig, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPod: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, tc := range []struct {
		name  string
		f     nodeControlFlags
		nodes int
		want  string // a part of the error; "" for none
	}{
		{"nothing asked", nodeControlFlags{}, 0, ""},
		{"all of it", nodeControlFlags{socket: filepath.Join(dir, "c.sock"), healthz: healthzPort{first: 10248}, runtimeDir: dir, kubeletConfig: config}, 2, ""},
		{"a kubelet configuration file that is not there", nodeControlFlags{kubeletConfig: filepath.Join(dir, "nope")}, 1, "--kubelet-config: kubelet configuration " + filepath.Join(dir, "nope") + ": no such file"},
		{"a kubelet configuration file with an unknown field", nodeControlFlags{kubeletConfig: badConfig}, 1, "bad-config:3: maxPod: unknown field"},
		{"a socket file that is there already", nodeControlFlags{socket: sock}, 1, ""},
		{"healthz ports without nodes", nodeControlFlags{healthz: healthzPort{first: 10248}}, 0, "--kubelet-healthz-port needs nodes"},
		{"any healthz ports without nodes", nodeControlFlags{healthz: healthzPort{any: true}}, 0, "--kubelet-healthz-port needs nodes"},
		{"any healthz ports", nodeControlFlags{healthz: healthzPort{any: true}}, 3, ""},
		{"healthz ports past 65535", nodeControlFlags{healthz: healthzPort{first: 65535}}, 2, "must be ports"},
		{"a negative healthz port", nodeControlFlags{healthz: healthzPort{first: -1}}, 1, "must be ports"},
		{"a runtime socket directory that is not there", nodeControlFlags{runtimeDir: filepath.Join(dir, "nope")}, 1, "--runtime-socket-dir " + filepath.Join(dir, "nope") + ": not a directory"},
		{"a runtime socket directory that is a file", nodeControlFlags{runtimeDir: file}, 1, "not a directory"},
		{"a control socket in no directory", nodeControlFlags{socket: filepath.Join(dir, "nope", "c.sock")}, 1, "does not exist"},
		{"a control socket over a file", nodeControlFlags{socket: file}, 1, "is not a socket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.f.check(tc.nodes)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("check: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("check: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestHealthzPortFlag(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want: String() after Set; "" for an error
		set      bool
	}{
		{"any", "any", true},
		{"10248", "10248", true},
		{"0", "0", false},
		{"auto", "", false},
		{"", "", false},
	} {
		var p healthzPort
		err := p.Set(tc.in)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("Set(%q) = nil, want an error", tc.in)
		case tc.want != "" && err != nil:
			t.Errorf("Set(%q): %v", tc.in, err)
		case tc.want != "" && (p.String() != tc.want || p.set() != tc.set):
			t.Errorf("Set(%q): String() = %q, set() = %v, want %q, %v", tc.in, p.String(), p.set(), tc.want, tc.set)
		}
	}
}
