package nodectl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// kubelets are fake kubelets that record what they were asked.
type kubelets struct {
	mu      sync.Mutex
	stopped map[string]bool
	calls   []string
}

func newKubelets(nodes ...string) *kubelets {
	k := &kubelets{stopped: map[string]bool{}}
	for _, n := range nodes {
		k.stopped[n] = false
	}
	return k
}

func (k *kubelets) NodeNames() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for n := range k.stopped {
		out = append(out, n)
	}
	return out
}

func (k *kubelets) StopKubelet(node string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = append(k.calls, "stop "+node)
	if k.stopped[node] {
		return errors.New("already stopped")
	}
	k.stopped[node] = true
	return nil
}

func (k *kubelets) StartKubelet(_ context.Context, node string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = append(k.calls, "start "+node)
	if !k.stopped[node] {
		return errors.New("not stopped")
	}
	k.stopped[node] = false
	return nil
}

func (k *kubelets) KubeletStopped(node string) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	stopped, ok := k.stopped[node]
	if !ok {
		return false, fmt.Errorf("no node %s", node)
	}
	return stopped, nil
}

func (k *kubelets) took() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := k.calls
	k.calls = nil
	return out
}

func serveFake(t *testing.T, k Kubelets) *Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	socket := filepath.Join(t.TempDir(), "control.sock")
	done, err := NewServer(k).Serve(ctx, socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return NewClient(socket)
}

func TestUnitName(t *testing.T) {
	for node, want := range map[string]string{
		"node-0":            "kubelet-node_0.service",
		"tpu.pool-a.3":      "kubelet-tpu_pool_a_3.service",
		"worker_1":          "kubelet-worker_1.service",
		"ip-10-0-0-1.local": "kubelet-ip_10_0_0_1_local.service",
	} {
		if got := UnitName(node); got != want {
			t.Errorf("UnitName(%q) = %q, want %q", node, got, want)
		}
	}
}

func TestOperations(t *testing.T) {
	ctx := context.Background()
	k := newKubelets("node-1", "node-0")
	c := serveFake(t, k)

	units, err := c.Units(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(units) != 2 || units[0].Name != "kubelet-node_0.service" || units[0].Node != "node-0" || !units[0].Running() {
		t.Fatalf("units = %+v, want node-0's then node-1's, running", units)
	}

	// What each operation asks of the kubelet, from the state the one before left.
	for _, step := range []struct {
		op, unit string
		calls    []string
		running  bool
	}{
		{OpResetFailed, "kubelet-node_0", nil, true},
		{OpStart, "kubelet-node_0.service", nil, true}, // already running: nothing to do
		{OpKill, "kubelet-node_0", []string{"stop node-0"}, false},
		{OpStop, "kubelet-node_0", nil, false}, // already stopped
		{OpRestart, "kubelet-node_0", []string{"start node-0"}, true},
		{OpRestart, "kubelet-node_0", []string{"stop node-0", "start node-0"}, true},
		{OpStop, "kubelet-node_0", []string{"stop node-0"}, false},
		{OpStart, "kubelet-node_0", []string{"start node-0"}, true},
	} {
		u, err := c.Do(ctx, step.unit, step.op)
		if err != nil {
			t.Fatalf("%s %s: %v", step.op, step.unit, err)
		}
		if calls := k.took(); fmt.Sprint(calls) != fmt.Sprint(step.calls) {
			t.Errorf("%s %s asked %v of the kubelet, want %v", step.op, step.unit, calls, step.calls)
		}
		if u.Running() != step.running {
			t.Errorf("after %s %s the unit is %s/%s, want running=%t", step.op, step.unit, u.Active, u.Sub, step.running)
		}
	}
	if u, err := c.Unit(ctx, "kubelet-node_1"); err != nil || !u.Running() {
		t.Errorf("node-1's unit = %+v, %v: the other node's kubelet was touched", u, err)
	}

	if _, err := c.Do(ctx, "kubelet-node_9", OpStop); !errors.Is(err, ErrNotFound) {
		t.Errorf("stop of a unit that does not exist: %v, want ErrNotFound", err)
	}
	if _, err := c.Do(ctx, "kubelet-node_0", "reload"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("an operation that does not exist: %v, want an error that names it", err)
	}
}

func TestHealthz(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := newKubelets("node-0", "node-1")
	// A port from the system, then the two nodes' from it on.
	var addrs map[string]string
	for port := 20000; port < 60000; port += 2 {
		var err error
		if addrs, err = Healthz(ctx, k, port); err == nil {
			break
		}
	}
	if len(addrs) != 2 {
		t.Fatalf("healthz addresses = %v", addrs)
	}
	healthy := func(node string) bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodHead, addrs[node], nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	if !healthy("node-0") || !healthy("node-1") {
		t.Fatal("running kubelets are not healthy")
	}
	if err := k.StopKubelet("node-0"); err != nil {
		t.Fatal(err)
	}
	if healthy("node-0") || !healthy("node-1") {
		t.Error("after node-0's kubelet stopped: node-0 healthy or node-1 not")
	}
	if err := k.StartKubelet(ctx, "node-0"); err != nil {
		t.Fatal(err)
	}
	if !healthy("node-0") {
		t.Error("node-0's kubelet started again is not healthy")
	}
}

func TestHealthzOnPortsTheSystemPicks(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrs, err := Healthz(ctx, newKubelets("node-0", "node-1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 2 || addrs["node-0"] == addrs["node-1"] || strings.Contains(addrs["node-0"], ":0/") {
		t.Fatalf("healthz addresses = %v, want two of their own", addrs)
	}
	for node, addr := range addrs {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, addr, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", node, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s, want 200", node, resp.Status)
		}
	}
}
