// Package cli drives the restartbed binary as a user does: built from source, run as a process,
// reached with a real kubectl and stopped with a signal.
package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// kubectl is the kubectl the test drives: Debian's, which hack/debian-kubectl.sh unpacks into the
// user cache the first time (or $KUBECTL, which the script prints when it is set).
func kubectl(t *testing.T) string {
	out, err := exec.Command("../../hack/debian-kubectl.sh").Output()
	if err != nil {
		var stderr []byte
		if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
			stderr = exit.Stderr
		}
		t.Fatalf("getting Debian's kubectl: %v\n%s", err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// cliDir holds the restartbed binary the tests share; TestMain removes it.
var cliDir string

func TestMain(m *testing.M) {
	var err error
	if cliDir, err = os.MkdirTemp("", "restartbed-cli-"); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(cliDir)
	os.Exit(code)
}

var buildOnce = sync.OnceValues(func() ([]byte, error) {
	return exec.Command("go", "build", "-o", filepath.Join(cliDir, "restartbed"), "../../cmd/restartbed").CombinedOutput()
})

// buildCLI builds cmd/restartbed, once for all the tests, and returns its path.
func buildCLI(t *testing.T) string {
	if out, err := buildOnce(); err != nil {
		t.Fatalf("building restartbed: %v\n%s", err, out)
	}
	return filepath.Join(cliDir, "restartbed")
}

// syncBuffer is a bytes.Buffer a process writes while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestUpServesKubectlUntilInterrupted starts `restartbed up`, uses the kubeconfig it writes with
// kubectl (nodes, a JobSet restarting in place, its pods and status), interrupts it like Ctrl-C
// and checks that the cluster and the kubeconfig are gone.
func TestUpServesKubectlUntilInterrupted(t *testing.T) {
	k := kubectl(t)
	bin := buildCLI(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")

	var out syncBuffer
	up := exec.Command(bin, "up", "--nodes", "2", "--timing", "fast", "--kubeconfig", kubeconfig)
	up.Stdout, up.Stderr = &out, &out
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- up.Wait() }()
	defer func() {
		if up.ProcessState == nil {
			_ = up.Process.Kill()
			<-exited //nolint:errcheck // killed: its exit status says only that
		}
	}()
	// The control plane may be built on first use (make test builds it before the tests).
	deadline := time.Now().Add(8 * time.Minute)
	for !strings.Contains(out.String(), "Press Ctrl-C") {
		select {
		case err := <-exited:
			t.Fatalf("up exited early (%v):\n%s", err, out.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("up did not come up:\n%s", out.String())
		}
	}
	saved, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatalf("up said it was up but wrote no kubeconfig: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "export KUBECONFIG="+kubeconfig) {
		t.Errorf("up's instructions do not name the kubeconfig:\n%s", out.String())
	}

	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, k, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err != nil {
			err = errors.New(err.Error() + ": " + stderr.String())
		}
		return strings.TrimSpace(stdout.String()), err
	}
	must := func(args ...string) string {
		t.Helper()
		s, err := run(args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
		}
		return s
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(60 * time.Second); !ok(); time.Sleep(500 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: not after 60s; pods:\n%s", what, must("get", "pods", "-o", "wide"))
			}
		}
	}

	if got := must("get", "nodes", "-o", "name"); got != "node/node-0\nnode/node-1" {
		t.Fatalf("kubectl get nodes: %q", got)
	}
	eventually("nodes Ready", func() bool {
		s, _ := run("get", "nodes", "-o", `jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}`)
		return s == "True True"
	})
	must("apply", "-f", "../../config/agent/rbac.yaml", "-f", "../../config/agent/policy.yaml")
	must("apply", "-f", "../../config/samples/jobset-in-place-restart.yaml")
	eventually("both pods ready", func() bool {
		s, _ := run("get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=kubectl-check",
			"-o", `jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}`)
		return s == "True True"
	})
	// Every agent reported attempt 0 and the controller lifted the barrier.
	if got := must("get", "jobset", "kubectl-check", "-o", "jsonpath={.status.currentInPlaceRestartAttempt}"); got != "0" {
		t.Errorf("currentInPlaceRestartAttempt = %q, want 0", got)
	}

	if err := up.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("up exited with %v after SIGINT:\n%s", err, out.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("up still running 2m after SIGINT:\n%s", out.String())
	}
	if _, err := os.Stat(kubeconfig); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the kubeconfig is still there after up stopped (%v)", err)
	}
	// The apiserver is gone: the saved credentials reach nothing.
	stale := filepath.Join(dir, "stale-kubeconfig")
	if err := os.WriteFile(stale, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	probe := exec.Command(k, "--kubeconfig", stale, "--request-timeout", "5s", "get", "nodes")
	if b, err := probe.CombinedOutput(); err == nil {
		t.Errorf("the apiserver still answers after up stopped:\n%s", b)
	}
}
