package envtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/shards"
	"github.com/restartbed/restartbed/nodectl"
)

// Faults injects faults into the cluster's nodes and pods wherever their kubelet runs: in this
// process (Cluster.Kubelet) or in the kubelet process that holds the node now
// (Options.KubeletProcesses), through that process's control socket. Each method does what
// fakekubelet.Kubelet's of the same name does (docs/fakekubelet.md); a kubelet process refuses
// what the in-process kubelet would, with its message.
type Faults struct {
	c *Cluster
}

// Faults returns the cluster's fault injection.
func (c *Cluster) Faults() Faults { return Faults{c: c} }

// kubelet is the kubelet that runs a node: the in-process one, or the control socket of the
// process that holds it.
type kubelet struct {
	local  *fakekubelet.Kubelet
	remote *nodectl.Client
}

// nodeKubelet finds the kubelet of the node: the in-process kubelet's own nodes first, then the
// kubelet process its shard annotation names.
func (f Faults) nodeKubelet(ctx context.Context, node string) (kubelet, error) {
	c := f.c
	if c.Kubelet != nil && (len(c.kubeletProcesses) == 0 || slices.Contains(c.Kubelet.NodeNames(), node)) {
		return kubelet{local: c.Kubelet}, nil
	}
	if len(c.kubeletProcesses) == 0 {
		return kubelet{}, fmt.Errorf("node %s: this cluster runs no kubelet", node)
	}
	shard, err := f.ShardOf(ctx, node)
	if err != nil {
		return kubelet{}, err
	}
	if c.kubeletProcess(shard).killed.Load() {
		return kubelet{}, fmt.Errorf("node %s: its kubelet process %s was killed; no kubelet runs it until another takes it over", node, shard)
	}
	return kubelet{remote: nodectl.NewClient(c.KubeletControlSocket(shard))}, nil
}

// podKubelet finds the kubelet of the node a pod is bound to.
func (f Faults) podKubelet(ctx context.Context, namespace, name string) (kubelet, error) {
	if len(f.c.kubeletProcesses) == 0 {
		if f.c.Kubelet == nil {
			return kubelet{}, fmt.Errorf("pod %s/%s: this cluster runs no kubelet", namespace, name)
		}
		return kubelet{local: f.c.Kubelet}, nil
	}
	pod, err := f.c.Clientset.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return kubelet{}, fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	if pod.Spec.NodeName == "" {
		return kubelet{}, fmt.Errorf("pod %s/%s is not bound to a node", namespace, name)
	}
	return f.nodeKubelet(ctx, pod.Spec.NodeName)
}

// nodeFault injects one of nodectl's node faults.
func (f Faults) nodeFault(ctx context.Context, node, verb string, local func(*fakekubelet.Kubelet) error) error {
	k, err := f.nodeKubelet(ctx, node)
	if err != nil {
		return err
	}
	if k.local != nil {
		return local(k.local)
	}
	return k.remote.NodeFault(ctx, node, verb)
}

// FailNode partitions the node from the apiserver and from every other node.
func (f Faults) FailNode(ctx context.Context, node string) error {
	return f.nodeFault(ctx, node, nodectl.NodeFail, func(k *fakekubelet.Kubelet) error { return k.FailNode(node) })
}

// RecoverNode ends the node's partition.
func (f Faults) RecoverNode(ctx context.Context, node string) error {
	return f.nodeFault(ctx, node, nodectl.NodeRecover, func(k *fakekubelet.Kubelet) error { return k.RecoverNode(ctx, node) })
}

// RestartKubelet restarts the node's kubelet.
func (f Faults) RestartKubelet(ctx context.Context, node string) error {
	return f.nodeFault(ctx, node, nodectl.NodeRestartKubelet, func(k *fakekubelet.Kubelet) error { return k.RestartKubelet(node) })
}

// StopKubelet stops the node's kubelet.
func (f Faults) StopKubelet(ctx context.Context, node string) error {
	return f.nodeFault(ctx, node, nodectl.NodeStopKubelet, func(k *fakekubelet.Kubelet) error { return k.StopKubelet(node) })
}

// StartKubelet starts the node's stopped kubelet.
func (f Faults) StartKubelet(ctx context.Context, node string) error {
	return f.nodeFault(ctx, node, nodectl.NodeStartKubelet, func(k *fakekubelet.Kubelet) error { return k.StartKubelet(ctx, node) })
}

// RebootNode reboots the node.
func (f Faults) RebootNode(ctx context.Context, node string) error {
	return f.nodeFault(ctx, node, nodectl.NodeReboot, func(k *fakekubelet.Kubelet) error { return k.RebootNode(ctx, node) })
}

// ResetConnections resets the node's pods' connections to the apiserver.
func (f Faults) ResetConnections(ctx context.Context, node string) error {
	return f.nodeFault(ctx, node, nodectl.NodeResetConnections, func(k *fakekubelet.Kubelet) error {
		_, err := k.ResetConnections(node)
		return err
	})
}

// ResetAllConnections resets every pod's connections to the apiserver, on every node the
// cluster's kubelets run, at once: every agent's watch breaks together.
func (f Faults) ResetAllConnections(ctx context.Context) error {
	var nodes []string
	if f.c.Kubelet != nil {
		nodes = append(nodes, f.c.Kubelet.NodeNames()...)
	}
	for _, shard := range f.c.KubeletProcessNames() {
		if f.c.kubeletProcess(shard).killed.Load() {
			continue
		}
		held, err := f.ShardNodes(ctx, shard)
		if err != nil {
			return err
		}
		nodes = append(nodes, held...)
	}
	if len(nodes) == 0 {
		return fmt.Errorf("this cluster runs no node")
	}
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, node := range nodes {
		wg.Go(func() { errs[i] = f.ResetConnections(ctx, node) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ExitContainer makes a running container's process exit with code.
func (f Faults) ExitContainer(ctx context.Context, namespace, pod, container string, code int32) error {
	k, err := f.podKubelet(ctx, namespace, pod)
	if err != nil {
		return err
	}
	if k.local != nil {
		return k.local.ExitContainer(namespace, pod, container, code)
	}
	return k.remote.ExitContainer(ctx, namespace, pod, container, code)
}

// OOMKill ends a running container as the OOM killer does.
func (f Faults) OOMKill(ctx context.Context, namespace, pod, container string) error {
	k, err := f.podKubelet(ctx, namespace, pod)
	if err != nil {
		return err
	}
	if k.local != nil {
		return k.local.OOMKill(namespace, pod, container)
	}
	return k.remote.OOMKill(ctx, namespace, pod, container)
}

// Exec runs a command in a running container and returns its exit code and output.
func (f Faults) Exec(ctx context.Context, namespace, pod, container string, argv []string) (int, string, error) {
	k, err := f.podKubelet(ctx, namespace, pod)
	if err != nil {
		return 0, "", err
	}
	if k.local != nil {
		return k.local.Exec(ctx, namespace, pod, container, argv)
	}
	return k.remote.Exec(ctx, namespace, pod, container, argv)
}

// ShardOf names the kubelet process that holds the node now.
func (f Faults) ShardOf(ctx context.Context, node string) (string, error) {
	if len(f.c.kubeletProcesses) == 0 {
		return "", fmt.Errorf("node %s: this cluster runs no kubelet processes", node)
	}
	n, err := f.c.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("node %s: %w", node, err)
	}
	shard := n.Annotations[shards.NodeAnnotation]
	if f.c.kubeletProcess(shard) == nil {
		return "", fmt.Errorf("node %s is held by none of the kubelet processes %v (its %s is %q)", node, f.c.KubeletProcessNames(), shards.NodeAnnotation, shard)
	}
	return shard, nil
}

// ShardNodes are the nodes the named kubelet process holds now, by their shard annotation.
func (f Faults) ShardNodes(ctx context.Context, shard string) ([]string, error) {
	if f.c.kubeletProcess(shard) == nil {
		return nil, fmt.Errorf("no kubelet process is named %q; they are %v", shard, f.c.KubeletProcessNames())
	}
	list, err := f.c.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: shards.GroupLabel + "=" + KubeletGroup})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range list.Items {
		if n.Annotations[shards.NodeAnnotation] == shard {
			names = append(names, n.Name)
		}
	}
	return names, nil
}
