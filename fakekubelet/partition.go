package fakekubelet

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/restartbed/restartbed/fakekubelet/nodes"
)

// This file is the network partition of a node (FailNode, RecoverNode). A partitioned kubelet is
// alive but cannot reach the apiserver: no Lease renewals, no node or pod status, no events, no
// deletions finished; it does not see what changes in the API either. It goes on from its last
// view of its pods: containers keep running, crash and restart by their rules, probes run, and
// a RestartAllContainers happens on the node, with only the latest status of each pod waiting
// to be written. The pods' programs (the agent) are cut off as well. Meanwhile the control plane
// sees a node that stopped posting status: the node lifecycle controller marks it Unknown and
// taints it unreachable, taint eviction deletes its pods once their tolerations run out, and
// they stay Terminating, since only their kubelet could finish the deletion.

// view returns the pod as the kubelet of its node sees it: the API's pod, or for a partitioned
// node the pod as it was when the partition began. unseen is true for a pod bound to a
// partitioned node after that: its kubelet has never heard of it.
func (p *pods) view(uid types.UID) (pod *corev1.Pod, unseen bool) {
	p.frozenMu.RLock()
	frozen, ok := p.frozen[uid]
	p.frozenMu.RUnlock()
	if ok {
		return frozen, false
	}
	pod = p.lookup(uid)
	if pod != nil {
		if n := p.nodes.Get(pod.Spec.NodeName); n != nil && n.Partitioned() {
			return nil, true
		}
	}
	return pod, false
}

// cutOff reports whether the pod's kubelet is partitioned from the apiserver.
func (p *pods) cutOff(uid types.UID) bool {
	p.frozenMu.RLock()
	defer p.frozenMu.RUnlock()
	_, ok := p.frozen[uid]
	return ok
}

// onNode returns the pods of the store bound to the node.
func (p *pods) onNode(name string) []*corev1.Pod {
	objs, _ := p.watch.store.ByIndex(nodeIndex, name) // fails only for an index the store lacks
	out := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		out = append(out, obj.(*corev1.Pod))
	}
	return out
}

// startedNode returns the named node and the pod workers, once the kubelet has started.
func (k *Kubelet) startedNode(name string) (*nodes.Node, *pods, error) {
	n, err := k.node(name)
	if err != nil {
		return nil, nil, err
	}
	if k.pods == nil {
		return nil, nil, errors.New("fakekubelet: not started")
	}
	return n, k.pods, nil
}

// FailNode partitions a node from the apiserver (see above). It fails if the node is already
// partitioned.
func (k *Kubelet) FailNode(name string) error {
	n, p, err := k.startedNode(name)
	if err != nil {
		return err
	}
	p.frozenMu.Lock()
	defer p.frozenMu.Unlock()
	if n.Partitioned() {
		return fmt.Errorf("node %s is already partitioned", name)
	}
	for _, pod := range p.onNode(name) {
		p.frozen[pod.UID] = pod // informer objects are never modified; this one is the kubelet's from now on
	}
	n.Partition()
	return nil
}

// RecoverNode ends a node's partition: the kubelet renews its Lease and posts its node status at
// once (Ready again; the node lifecycle controller then lifts the taints), reads its pods from
// the API again — finishing the deletions it missed and killing the containers of pods that
// were removed meanwhile — and publishes each pod's latest status against what the API holds
// now. Its in-memory state (backoff, probe results) is kept: the kubelet did not restart.
func (k *Kubelet) RecoverNode(ctx context.Context, name string) error {
	n, p, err := k.startedNode(name)
	if err != nil {
		return err
	}
	p.frozenMu.Lock()
	if !n.Partitioned() {
		p.frozenMu.Unlock()
		return fmt.Errorf("node %s is not partitioned", name)
	}
	var known []types.UID
	for uid, pod := range p.frozen {
		if pod.Spec.NodeName == name {
			known = append(known, uid)
			delete(p.frozen, uid)
		}
	}
	n.Reconnect()
	p.frozenMu.Unlock()
	if n.KubeletStopped() {
		return nil // the network is back, the kubelet is not: StartKubelet does the rest
	}

	if err := k.nodes.Reconnected(ctx, n, k.nodeLister); err != nil {
		return err
	}
	for _, pod := range p.onNode(name) {
		k.status.Reconnect(pod)
		p.queue.Add(pod.UID)
	}
	for _, uid := range known {
		p.queue.Add(uid) // those gone from the API meanwhile are torn down
	}
	return nil
}
