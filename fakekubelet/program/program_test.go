package program

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
)

var idle = Func(func(ctx context.Context, _ *Container) int { <-ctx.Done(); return 0 })

func TestRegistryFirstMatchWins(t *testing.T) {
	reg, err := NewRegistry([]Rule{
		{Container: "agent", Image: "*agent*", Program: idle},
		{Image: "busybox*", Script: "sleep 1"},
		{Container: "worker", Script: "exit 3"},
		{Container: "sidecar", Builtin: "idle"},
	}, Builtins{"idle": idle}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c          corev1.Container
		program    bool
		script     string
		ownCommand bool
	}{
		{c: corev1.Container{Name: "agent", Image: "registry.k8s.io/jobset/agent:v0.12"}, program: true},
		{c: corev1.Container{Name: "agent", Image: "busybox:1.36"}, script: "sleep 1"},
		{c: corev1.Container{Name: "worker", Image: "busybox"}, script: "sleep 1"},
		{c: corev1.Container{Name: "worker", Image: "python:3"}, script: "exit 3"},
		{c: corev1.Container{Name: "other", Image: "python:3"}, ownCommand: true},
		{c: corev1.Container{Name: "sidecar", Image: "python:3"}, program: true},
	} {
		got := reg.Lookup(&tc.c)
		if (got.Program != nil) != tc.program || got.Script != tc.script {
			t.Errorf("%s (%s): got program=%t script=%q", tc.c.Name, tc.c.Image, got.Program != nil, got.Script)
		}
	}
}

func TestImageGlobs(t *testing.T) {
	for _, tc := range []struct {
		glob, image string
		match       bool
	}{
		{"*agent*", "registry.k8s.io/jobset/agent:v0.12", true},
		{"busybox*", "busybox:1.36", true},
		{"busybox*", "docker.io/library/busybox", false},
		{"python:3.1?", "python:3.12", true},
		{"[bp]usybox", "pusybox", true},
		{"[!b]usybox", "busybox", false},
		{"a.b", "axb", false},
	} {
		r := Rule{Image: tc.glob, Script: "x"}
		if got := r.Matches(&corev1.Container{Image: tc.image}); got != tc.match {
			t.Errorf("%q on %q: %t, want %t", tc.glob, tc.image, got, tc.match)
		}
	}
}

func TestRegistryRejectsBadRules(t *testing.T) {
	_, err := NewRegistry([]Rule{
		{Container: "a"},
		{Container: "b", Script: "x", Program: idle},
		{Image: "[", Script: "x"},
		{Builtin: "no-such-program"},
		{Binary: "bin/agent"},
		{Binary: "/usr/bin/agent"},
	}, Builtins{"idle": idle, "agent": idle}, false)
	if err == nil {
		t.Fatal("bad rules accepted")
	}
	for _, want := range []string{"programs[0]: exactly one", "programs[1]: exactly one", "programs[2].image: bad glob",
		`programs[3].builtin: unknown program "no-such-program"; known: agent, idle`, `programs[4].binary: "bin/agent" is not an absolute path`,
		"programs[5].binary: host binaries are not allowed in this run"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestContainerEnvAndIdentity(t *testing.T) {
	c := &Container{Env: []string{"A=1", "B=x=y", "A=2"}}
	if v, ok := c.LookupEnv("A"); !ok || v != "2" {
		t.Errorf("A = %q, %t; the last definition wins", v, ok)
	}
	if c.Getenv("B") != "x=y" || c.Getenv("C") != "" {
		t.Errorf("B = %q, C = %q", c.Getenv("B"), c.Getenv("C"))
	}
	cfg := ServiceAccountConfig(&rest.Config{Host: "https://127.0.0.1:1"}, "ns", "agent")
	// The apiserver adds the account's groups; asking for them would need the right to
	// impersonate groups.
	if cfg.Impersonate.UserName != "system:serviceaccount:ns:agent" || len(cfg.Impersonate.Groups) != 0 {
		t.Errorf("impersonation %+v", cfg.Impersonate)
	}
}

func TestRegistryTakesBinariesWhenAllowed(t *testing.T) {
	reg, err := NewRegistry([]Rule{{Container: "agent", Binary: "/opt/agent"}}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := reg.Lookup(&corev1.Container{Name: "agent"}); got.Binary != "/opt/agent" {
		t.Errorf("Lookup = %+v, want the binary", got)
	}
}
