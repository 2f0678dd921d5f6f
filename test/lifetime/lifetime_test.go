//go:build linux

// Package lifetime proves that no control-plane process outlives the process that started it,
// and that a killed run's files go at the next start.
package lifetime

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/internal/procfs"
)

// childEnv makes the test binary, run again by TestControlPlaneDiesWithItsProcess, start a
// cluster and wait to be killed instead of testing.
const childEnv = "RESTARTBED_LIFETIME_CHILD"

// TestLifetimeChild is the child's body; in a normal run it has nothing to do.
func TestLifetimeChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		return
	}
	c, err := envtest.Start(context.Background(), envtest.Options{Nodes: []fakekubelet.NodePool{{Name: "n", Count: 1}}})
	if err != nil {
		fmt.Println("FAILED", err)
		os.Exit(3)
	}
	fmt.Println("READY", c.Dir(), c.WebhookServerOptions().CertDir)
	select {} // until a signal ends the process without any cleanup of ours
}

// The processes of a control plane, by their /proc comm (which keeps 15 bytes of the name).
var processes = []string{"etcd", "kube-apiserver", "kube-controller", "kube-scheduler"}

// However the process that started a control plane ends — interrupted, terminated or killed,
// with no Stop and no deferred cleanup — etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler end with it, and the next cluster to start removes the directory it left.
func TestControlPlaneDiesWithItsProcess(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			child := exec.Command(os.Args[0], "-test.run=^TestLifetimeChild$", "-test.timeout=5m")
			child.Env = append(os.Environ(), childEnv+"=1")
			child.Stderr = os.Stderr
			out, err := child.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil || !strings.HasPrefix(line, "READY") {
				t.Fatalf("child did not start a cluster: %q, %v", line, err)
			}

			procs := map[string]int{}
			for _, pid := range procfs.Children(child.Process.Pid) {
				procs[procfs.Command(pid)] = pid
			}
			for _, name := range processes {
				if procs[name] == 0 {
					t.Fatalf("no %s among the child's processes %v", name, procs)
				}
			}
			var dir, certDir string
			if _, err := fmt.Sscan(strings.TrimPrefix(line, "READY"), &dir, &certDir); err != nil {
				t.Fatalf("child's READY line %q: %v", line, err)
			}
			// Every file of the run lives in its directory, or the sweep below cannot remove it.
			if filepath.Dir(certDir) != dir {
				t.Fatalf("the webhooks' certificates are in %s, outside the cluster's directory %s", certDir, dir)
			}

			if err := child.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			_ = child.Wait()
			for _, name := range processes {
				pid := procs[name]
				deadline := time.Now().Add(30 * time.Second)
				for procfs.Alive(pid) {
					if time.Now().After(deadline) {
						_ = syscall.Kill(pid, syscall.SIGKILL)
						t.Fatalf("%s (pid %d) outlived the process that started it", name, pid)
					}
					time.Sleep(50 * time.Millisecond)
				}
			}

			if _, err := os.Stat(dir); err != nil {
				t.Fatalf("the killed run's directory %s: %v; the test cannot tell whether the next start sweeps it", dir, err)
			}
			c, err := envtest.Start(context.Background(), envtest.Options{DisableControllerManager: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := c.Stop(); err != nil {
					t.Error(err)
				}
			})
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the killed run's directory %s is still there after the next start (%v)", dir, err)
			}
		})
	}
}
