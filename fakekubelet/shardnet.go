package fakekubelet

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/restartbed/restartbed/fakekubelet/nodes"
	"github.com/restartbed/restartbed/fakekubelet/relay"
	"github.com/restartbed/restartbed/fakekubelet/shards"
)

// This file joins a shard's pod network to the other shards' (Options.Shard): each node of the
// group has a pod range of its own in the API (spec.podCIDR; a shard writes one from the address
// plan as it claims a node that has none) and its address on the pod network is the range's
// first; an address this shard does not hold is looked up among the group's nodes by range, and
// the connection or echo goes through the relay of the shard named in the node's
// shards.NodeAnnotation, whose address that shard's Lease publishes. A partition is decided by
// the shard that runs the partitioned node, at either end.

// podCIDRIndex indexes the nodes by their spec.podCIDR, masked.
const podCIDRIndex = "restartbed.dev/pod-cidr"

func nodesByPodCIDR(obj any) ([]string, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return nil, nil
	}
	p, err := netip.ParsePrefix(node.Spec.PodCIDR)
	if err != nil {
		return nil, nil
	}
	return []string{p.Masked().String()}, nil
}

// serveRelay opens the shard's relay listener and answers the other shards' connections to its
// nodes' pods on it until ctx ends; it returns the address the other shards reach it at.
func (k *Kubelet) serveRelay(ctx context.Context) (string, error) {
	sh := k.opts.Shard
	l, err := net.Listen("tcp", sh.Relay.String())
	if err != nil {
		return "", fmt.Errorf("fakekubelet: the shard's relay: %w", err)
	}
	k.wg.Go(func() {
		if err := relay.Serve(ctx, l, k.network); err != nil {
			klog.FromContext(ctx).Error(err, "The shard's relay stopped; the other shards no longer reach its pods")
		}
	})
	port := l.Addr().(*net.TCPAddr).Port
	return netip.AddrPortFrom(sh.RelayAdvertise, uint16(port)).String(), nil
}

// Relay is where this shard's relay listens for the other shards, as its Lease publishes it;
// empty for a kubelet that is no shard, or before Start.
func (k *Kubelet) Relay() string {
	if k.shard == nil {
		return ""
	}
	return k.shard.RelayAddress()
}

// locate finds the node of the group, run by another shard, whose pod range holds addr, and
// where that shard's relay listens (relay.Client's Locate).
func (k *Kubelet) locate(addr netip.Addr) (node, relayAddr string, ok bool) {
	if k.shard == nil || !addr.Is4() {
		return "", "", false
	}
	for bits := 32; bits >= 8; bits-- {
		p, _ := addr.Prefix(bits)
		objs, err := k.nodeIndexer.ByIndex(podCIDRIndex, p.String())
		if err != nil {
			return "", "", false
		}
		for _, obj := range objs {
			n := obj.(*corev1.Node)
			holder := n.Annotations[shards.NodeAnnotation]
			if holder == "" || holder == k.shard.Identity() {
				continue
			}
			if r, ok := k.shard.Relay(holder); ok {
				return n.Name, r, true
			}
		}
	}
	return "", "", false
}

// planIndexUsed reports whether a node of the cluster has the address plan's range index.
func (k *Kubelet) planIndexUsed(index int) bool {
	objs, err := k.nodeIndexer.ByIndex(podCIDRIndex, nodes.PlanCIDR(index).String())
	return err != nil || len(objs) > 0
}
