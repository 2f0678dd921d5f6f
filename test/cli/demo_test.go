package cli

import (
	"context"
	"errors"
	"os/exec"
	"regexp"
	"testing"
	"time"
)

// TestDemo runs `restartbed demo` as a user does and checks that it tells each step it promises:
// the control plane, the pods the Job controller made, the in-place restart keeping the pod and
// its IP, and the foreground deletion.
func TestDemo(t *testing.T) {
	t.Parallel() // its own process and cluster
	bin := buildCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--nodes", "2", "--parallelism", "2")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
			stderr = exit.Stderr
		}
		t.Fatalf("restartbed demo: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
	}
	for _, want := range []string{
		`(?m)^control plane: Kubernetes v1\.\d+\.\d+ \(etcd v\d+\.\d+\.\d+\), started in `,
		`(?m)^controllers: +kube-controller-manager and kube-scheduler v1\.\d+\.\d+`,
		`(?m)^nodes: +node-0, node-1 \(emulated kubelets\)$`,
		`the Job controller created the pods, the scheduler bound them, the emulated kubelets run them:`,
		`the worker of demo-\S+ exited with 42:`,
		`restarted all its containers in place in \S+: same pod \(UID \S+, unchanged\), same IP [0-9.]+, unchanged, restartCount 1`,
		`deleted the Job with foreground propagation: the garbage collector deleted its pods`,
	} {
		if !regexp.MustCompile(want).Match(out) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
}

// Bad flags are refused before anything starts.
func TestDemoRefusesBadFlags(t *testing.T) {
	t.Parallel() // its own process and cluster
	bin := buildCLI(t)
	for _, args := range [][]string{{"--nodes", "0"}, {"--parallelism", "0"}} {
		out, err := exec.Command(bin, append([]string{"demo"}, args...)...).CombinedOutput()
		if err == nil {
			t.Errorf("demo %v succeeded:\n%s", args, out)
			continue
		}
		if !regexp.MustCompile(`must be at least 1, got 0`).Match(out) {
			t.Errorf("demo %v: %s, want the flag named with what it must be", args, out)
		}
	}
}
