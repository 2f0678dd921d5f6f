package fakekubelet

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/restartbed/restartbed/fakekubelet/nodes"
)

// This file is the kubelet's fault-injection API: what scenario steps and tests do to pods and
// nodes that no API request can.

// pod returns a pod bound to one of the kubelet's nodes, from the informer.
func (k *Kubelet) pod(namespace, name string) (*corev1.Pod, error) {
	if k.pods == nil {
		return nil, fmt.Errorf("fakekubelet: not started")
	}
	obj, exists, err := k.pods.watch.store.GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil, fmt.Errorf("pod %s/%s: not found", namespace, name)
	}
	pod := obj.(*corev1.Pod)
	if k.pods.nodes.Get(pod.Spec.NodeName) == nil {
		return nil, fmt.Errorf("pod %s/%s is not bound to a node of this kubelet", namespace, name)
	}
	return pod, nil
}

// ExitContainer makes the running process of a container exit now with code, as if it had
// ended by itself. It fails if the container is not running.
func (k *Kubelet) ExitContainer(namespace, name, container string, code int32) error {
	pod, err := k.pod(namespace, name)
	if err != nil {
		return err
	}
	if err := k.rt.Exit(pod.UID, container, code, false); err != nil {
		return fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

// OOMKill ends a running container as the kernel's OOM killer does: exit 137, reason OOMKilled.
func (k *Kubelet) OOMKill(namespace, name, container string) error {
	pod, err := k.pod(namespace, name)
	if err != nil {
		return err
	}
	if err := k.rt.Exit(pod.UID, container, 0, true); err != nil {
		return fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

// Exec runs a command in a running container, like kubectl exec, and returns its exit code and
// output.
func (k *Kubelet) Exec(ctx context.Context, namespace, name, container string, argv []string) (int, string, error) {
	pod, err := k.pod(namespace, name)
	if err != nil {
		return 0, "", err
	}
	code, out, err := k.rt.Exec(ctx, pod.UID, container, argv)
	if err != nil {
		return 0, "", fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	return code, out, nil
}

// Logs returns the tail of the output of a container's newest instance.
func (k *Kubelet) Logs(namespace, name, container string) (string, error) {
	pod, err := k.pod(namespace, name)
	if err != nil {
		return "", err
	}
	rt, _ := k.rt.Status(pod.UID)
	latest := rt.Latest(container)
	if latest == nil {
		return "", fmt.Errorf("pod %s/%s: container %q has no instance", namespace, name, container)
	}
	return k.rt.Logs(pod.UID, latest.ID), nil
}

// node returns the named node of this kubelet.
func (k *Kubelet) node(name string) (*nodes.Node, error) {
	if n := k.nodes.Get(name); n != nil {
		return n, nil
	}
	return nil, fmt.Errorf("node %q is not one of this kubelet's (%d nodes)", name, len(k.nodes.All()))
}

// RestartKubelet restarts a node's kubelet: its in-memory state (status cache, crash-loop
// backoff, reason cache, probe results, the Lease it last wrote) is lost, its containers keep running, and it resumes
// from the pod statuses in the API (docs/reference/kubelet.md, "What it keeps and what it does not").
func (k *Kubelet) RestartKubelet(name string) error {
	n, err := k.node(name)
	if err != nil {
		return err
	}
	if n.Partitioned() {
		return fmt.Errorf("node %s is partitioned: a kubelet restarted now could not read its pods; recover the node first", name)
	}
	if n.KubeletStopped() {
		return fmt.Errorf("the kubelet of node %s is stopped: start it (StartKubelet)", name)
	}
	if err := k.startKubeletConfig(name); err != nil {
		return fmt.Errorf("the kubelet of node %s would not start again, so it was not restarted: %w", name, err)
	}
	n.KubeletRestarted()
	k.resync(n)
	return nil
}

// ResetConnections resets every connection the node's pods hold open to the apiserver, as a
// load balancer or a network blip between the node and the control plane does: each watch of
// their programs (the agent's JobSet watch) ends with an error and its client lists or watches
// again, and a request in flight fails. In-process programs lose the responses they are reading;
// host binaries their TCP connections through the pod network. The node's kubelet keeps its
// own connections. It returns how many responses and connections it broke.
func (k *Kubelet) ResetConnections(name string) (int, error) {
	n, err := k.node(name)
	if err != nil {
		return 0, err
	}
	broken := n.ResetConnections()
	if k.network != nil {
		broken += k.network.ResetAPIServerConnections(name)
	}
	return broken, nil
}

// StopKubelet stops a node's kubelet process, as `systemctl kill` of its unit does: the node's
// containers run on (a crash is not restarted, an exit not reported), and nothing of the kubelet
// acts until StartKubelet: no Lease renewals or node status (the node lifecycle controller marks
// it NotReady after its grace), no pod syncs, status writes or events, no probes, and its kubelet
// API refuses every request. It fails if the kubelet is already stopped.
func (k *Kubelet) StopKubelet(name string) error {
	n, p, err := k.startedNode(name)
	if err != nil {
		return err
	}
	if !n.StopKubelet() {
		return fmt.Errorf("the kubelet of node %s is already stopped", name)
	}
	for _, pod := range p.onNode(name) {
		p.prober.RemovePod(pod.UID) // the probe workers die with the process
		k.status.Forget(pod.UID)    // and so do the statuses it had not written
	}
	k.events.forgetNode(name)
	return nil
}

// StartKubelet starts a node's stopped kubelet again: it reads its configuration file
// (Options.KubeletConfigFile), renews its Lease and posts its node status at once, then syncs every
// pod of the node from the API and the runtime with none of the in-memory state it had (as
// RestartKubelet). It fails, and the kubelet stays stopped, if the kubelet is running, if the node
// is partitioned (a kubelet started now could not read its pods; recover the node first), or if
// the configuration file is refused.
func (k *Kubelet) StartKubelet(ctx context.Context, name string) error {
	n, _, err := k.startedNode(name)
	if err != nil {
		return err
	}
	if !n.KubeletStopped() {
		return fmt.Errorf("the kubelet of node %s is not stopped", name)
	}
	if n.Partitioned() {
		return errPartitioned(name)
	}
	if err := k.startKubeletConfig(name); err != nil {
		return fmt.Errorf("the kubelet of node %s did not start: %w", name, err)
	}
	n.StartKubelet()
	k.resync(n)
	return k.nodes.Reconnected(ctx, n, k.nodeLister)
}

// errPartitioned refuses to start a partitioned node's kubelet.
func errPartitioned(name string) error {
	return fmt.Errorf("node %s is partitioned: a kubelet started now could not read its pods; recover the node first", name)
}

// RebootNode reboots a node as upstream's node e2e specs make one: its kubelet stops (unless it
// is stopped already), every pod sandbox of the node stops — their containers are killed at
// once, as the CRI's StopPodSandbox does — and the kubelet starts. The kubelet then finds each
// pod's sandbox not ready and does what it does after a reboot: a SandboxChanged event, a new
// sandbox, the pod's containers started again from its first init container; a pod that would
// not run again (restartPolicy Never) terminates. The node's images and its pods' volumes stay,
// as a disk does. It fails, doing nothing, on a partitioned node.
func (k *Kubelet) RebootNode(ctx context.Context, name string) error {
	n, _, err := k.startedNode(name)
	if err != nil {
		return err
	}
	if n.Partitioned() {
		return errPartitioned(name)
	}
	if _, err := k.readKubeletConfig(); err != nil {
		return fmt.Errorf("node %s was not rebooted: its kubelet would not start: %w", name, err)
	}
	if !n.KubeletStopped() {
		if err := k.StopKubelet(name); err != nil {
			return err
		}
	}
	for _, sb := range k.rt.Sandboxes(name) {
		if err := k.rt.StopSandboxByID(name, sb.ID); err != nil {
			return err
		}
	}
	return k.StartKubelet(ctx, name)
}

// KubeletStopped reports whether the node's kubelet is stopped (StopKubelet).
func (k *Kubelet) KubeletStopped(name string) (bool, error) {
	n, err := k.node(name)
	if err != nil {
		return false, err
	}
	return n.KubeletStopped(), nil
}

// resync forgets the in-memory state of the node's pods and syncs them again.
func (k *Kubelet) resync(n *nodes.Node) {
	k.pods.kubeletRestarted(n.Name())
	k.events.forgetNode(n.Name())
	for _, pod := range k.pods.onNode(n.Name()) {
		k.pods.forgetState(pod.UID)
		k.status.Forget(pod.UID)
		k.images.KubeletRestarted(pod.UID)
		k.pods.queue.Add(pod.UID)
	}
}

// StatusWrites counts the pod status patches sent, for benchmarks.
func (k *Kubelet) StatusWrites() int64 {
	if k.status == nil {
		return 0
	}
	return k.status.Writes()
}
