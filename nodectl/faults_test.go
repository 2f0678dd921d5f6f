package nodectl

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// faultyKubelets are fake kubelets that also take faults, recording them; a fault on a node
// named "refuse" is refused.
type faultyKubelets struct {
	*kubelets
}

func (k faultyKubelets) record(what string, target string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if strings.Contains(target, "refuse") {
		return fmt.Errorf("%s %s: refused", what, target)
	}
	k.calls = append(k.calls, what+" "+target)
	return nil
}

func (k faultyKubelets) PodWatch() (uint64, int) { return 42, 7 }

func (k faultyKubelets) FailNode(node string) error { return k.record("fail", node) }
func (k faultyKubelets) RecoverNode(_ context.Context, node string) error {
	return k.record("recover", node)
}
func (k faultyKubelets) RestartKubelet(node string) error { return k.record("restart-kubelet", node) }
func (k faultyKubelets) RebootNode(_ context.Context, node string) error {
	return k.record("reboot", node)
}
func (k faultyKubelets) ResetConnections(node string) (int, error) {
	return 2, k.record("reset-connections", node)
}
func (k faultyKubelets) ExitContainer(ns, pod, c string, code int32) error {
	return k.record(fmt.Sprintf("exit %d", code), ns+"/"+pod+"/"+c)
}
func (k faultyKubelets) OOMKill(ns, pod, c string) error {
	return k.record("oom-kill", ns+"/"+pod+"/"+c)
}
func (k faultyKubelets) Exec(_ context.Context, ns, pod, c string, argv []string) (int, string, error) {
	return 3, strings.Join(argv, " "), k.record("exec", ns+"/"+pod+"/"+c)
}

func TestFaults(t *testing.T) {
	ctx := context.Background()
	k := faultyKubelets{newKubelets("node-0")}
	c := serveFake(t, k)

	for _, verb := range []string{NodeFail, NodeRecover, NodeRestartKubelet, NodeReboot, NodeStopKubelet, NodeStartKubelet, NodeResetConnections} {
		if err := c.NodeFault(ctx, "node-0", verb); err != nil {
			t.Errorf("%s: %v", verb, err)
		}
	}
	if err := c.ExitContainer(ctx, "ns", "pod-a", "worker", 42); err != nil {
		t.Error(err)
	}
	if err := c.OOMKill(ctx, "ns", "pod-a", "worker"); err != nil {
		t.Error(err)
	}
	code, out, err := c.Exec(ctx, "ns", "pod-a", "worker", []string{"sh", "-c", "exit 3"})
	if err != nil || code != 3 || out != "sh -c exit 3" {
		t.Errorf("exec = %d, %q, %v; want 3 and the command echoed", code, out, err)
	}
	want := "[fail node-0 recover node-0 restart-kubelet node-0 reboot node-0 stop node-0 start node-0 reset-connections node-0 exit 42 ns/pod-a/worker oom-kill ns/pod-a/worker exec ns/pod-a/worker]"
	if got := fmt.Sprint(k.took()); got != want {
		t.Errorf("the kubelets took %s, want %s", got, want)
	}

	if st, err := c.Stats(ctx); err != nil || st != (Stats{Nodes: 1, PodWatchEvents: 42, PodsWatched: 7}) {
		t.Errorf("stats = %+v, %v", st, err)
	}

	// What the kubelet refuses comes back with its message; a verb that does not exist is named.
	if err := c.NodeFault(ctx, "refuse-me", NodeFail); err == nil || !strings.Contains(err.Error(), "fail refuse-me: refused") {
		t.Errorf("a refused fault: %v, want the kubelet's message", err)
	}
	if err := c.NodeFault(ctx, "node-0", "melt"); err == nil || !strings.Contains(err.Error(), `"melt"`) {
		t.Errorf("an unknown node fault: %v, want an error that names it", err)
	}
	if err := c.NodeFault(ctx, "node-0", NodeStartKubelet); err == nil || !strings.Contains(err.Error(), "not stopped") {
		t.Errorf("starting a running kubelet: %v, want it refused", err)
	}
	if _, _, err := c.Exec(ctx, "ns", "pod-a", "worker", nil); err == nil || !strings.Contains(err.Error(), "command") {
		t.Errorf("an exec without a command: %v", err)
	}
}

// Kubelets that take no faults serve no fault routes.
func TestNoFaultsWithoutFaults(t *testing.T) {
	c := serveFake(t, newKubelets("node-0"))
	if err := c.NodeFault(context.Background(), "node-0", NodeFail); err == nil {
		t.Fatal("a fault on kubelets that take none was answered")
	}
}
