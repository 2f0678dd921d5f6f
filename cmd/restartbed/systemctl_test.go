package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/restartbed/restartbed/nodectl"
)

// stoppable are fake kubelets for the control socket.
type stoppable struct {
	mu      sync.Mutex
	stopped map[string]bool
}

func (k *stoppable) NodeNames() []string { return []string{"node-0", "node-1"} }
func (k *stoppable) StopKubelet(node string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped[node] = true
	return nil
}
func (k *stoppable) StartKubelet(_ context.Context, node string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped[node] = false
	return nil
}
func (k *stoppable) KubeletStopped(node string) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stopped[node], nil
}

// TestSystemctl runs the commands upstream's node e2e framework runs, and the ones a person
// would, against a control socket.
func TestSystemctl(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	socket := filepath.Join(t.TempDir(), "control.sock")
	if _, err := nodectl.NewServer(&stoppable{stopped: map[string]bool{}}).Serve(ctx, socket); err != nil {
		t.Fatal(err)
	}
	systemctl := func(f systemctlFlags, args ...string) (string, int) {
		t.Helper()
		f.socket = socket
		var out bytes.Buffer
		err := runSystemctl(ctx, &out, f, args[0], args[1:])
		var exit exitError
		switch {
		case err == nil:
			return out.String(), 0
		case errors.As(err, &exit):
			return out.String() + errString(exit.err), exit.code
		default:
			return out.String() + err.Error(), 1
		}
	}

	out, code := systemctl(systemctlFlags{state: []string{"running"}}, "list-units", "*kubelet*")
	if code != 0 || !strings.Contains(out, "kubelet-node_0.service loaded active running") || !strings.Contains(out, "2 loaded units listed.") {
		t.Errorf("list-units --state=running:\n%s", out)
	}
	if out, code := systemctl(systemctlFlags{}, "reset-failed", "kubelet-node_0"); code != 0 {
		t.Errorf("reset-failed: %d %s", code, out)
	}
	if out, code := systemctl(systemctlFlags{}, "kill", "kubelet-node_0"); code != 0 {
		t.Errorf("kill: %d %s", code, out)
	}
	out, _ = systemctl(systemctlFlags{state: []string{"running"}}, "list-units", "*kubelet*")
	if strings.Contains(out, "kubelet-node_0") || !strings.Contains(out, "kubelet-node_1") {
		t.Errorf("list-units --state=running after node-0's kill:\n%s", out)
	}
	if out, code := systemctl(systemctlFlags{}, "is-active", "kubelet-node_0"); code != systemctlInactive || out != "inactive\n" {
		t.Errorf("is-active of a killed unit: %d %q", code, out)
	}
	out, _ = systemctl(systemctlFlags{all: true, noLegend: true}, "list-units")
	if want := "  kubelet-node_0.service loaded inactive dead    restartbed's kubelet of node node-0\n"; !strings.HasPrefix(out, want) {
		t.Errorf("list-units --all --no-legend:\n%s\nwant first %q", out, want)
	}
	if out, code := systemctl(systemctlFlags{}, "restart", "kubelet-node_0.service"); code != 0 {
		t.Errorf("restart: %d %s", code, out)
	}
	if out, code := systemctl(systemctlFlags{}, "is-active", "kubelet-node_0"); code != 0 || out != "active\n" {
		t.Errorf("is-active after the restart: %d %q", code, out)
	}
	if out, code := systemctl(systemctlFlags{}, "start", "kubelet-node_7"); code != systemctlUnitUnknown || !strings.Contains(out, "unit kubelet-node_7 not found") {
		t.Errorf("start of a unit that does not exist: %d %q", code, out)
	}
	if out, code := systemctl(systemctlFlags{}, "status", "kubelet-node_7"); code != systemctlNoSuchUnit || !strings.Contains(out, "could not be found") {
		t.Errorf("status of a unit that does not exist: %d %q", code, out)
	}
	if out, code := systemctl(systemctlFlags{}, "daemon-reload"); code != 1 || !strings.Contains(out, `unknown command "daemon-reload"`) {
		t.Errorf("a command it does not have: %d %q", code, out)
	}
	if out, code := systemctl(systemctlFlags{}, "list-units", "[kubelet"); code != 1 || !strings.Contains(out, "pattern") {
		t.Errorf("a bad pattern: %d %q", code, out)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestSystemctlWithoutSocket: without a socket it says how to name one.
func TestSystemctlWithoutSocket(t *testing.T) {
	err := runSystemctl(context.Background(), &bytes.Buffer{}, systemctlFlags{}, "list-units", nil)
	if err == nil || !strings.Contains(err.Error(), controlSocketEnv) {
		t.Errorf("err = %v, want one that names --control-socket and $%s", err, controlSocketEnv)
	}
}
