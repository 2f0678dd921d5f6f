package knownimages

import (
	"slices"
	"testing"
)

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		image string
		known bool
		cmd   []string
	}{
		{"busybox", true, []string{"sh"}},
		{"docker.io/library/busybox:1.36", true, []string{"sh"}},
		{"registry.k8s.io/e2e-test-images/busybox:1.37.0-1", true, []string{"sh"}},
		{"registry.k8s.io/e2e-test-images/agnhost:2.53@sha256:99c6b4bb4a1e1df3f0b3752168c89358794d02258ebebc26bf21c29399011a85", true, []string{"pause"}},
		{"busyboxes:1", false, nil},
		{"registry.example/busybox", false, nil},
		{"Not An Image", false, nil},
	} {
		cfg, known := Lookup(tc.image)
		if known != tc.known || !slices.Equal(cfg.Cmd, tc.cmd) {
			t.Errorf("Lookup(%q) = %v, %v; want %v, %v", tc.image, cfg.Cmd, known, tc.cmd, tc.known)
		}
	}
}

// Argv follows the container runtime: a command replaces both entrypoint and default command;
// args alone replace the default command.
func TestArgv(t *testing.T) {
	agnhost, _ := Lookup("registry.k8s.io/e2e-test-images/agnhost:2.53")
	for _, tc := range []struct {
		command, args, want []string
	}{
		{nil, nil, []string{"/agnhost", "pause"}},
		{nil, []string{"netexec", "--http-port=8080"}, []string{"/agnhost", "netexec", "--http-port=8080"}},
		{[]string{"/bin/sh", "-c"}, []string{"echo hi"}, []string{"/bin/sh", "-c", "echo hi"}},
		{[]string{"/agnhost"}, nil, []string{"/agnhost"}},
	} {
		if got := agnhost.Argv(tc.command, tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("Argv(%q, %q) = %q, want %q", tc.command, tc.args, got, tc.want)
		}
	}
}
