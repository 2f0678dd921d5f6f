package nodes

import (
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// MaxNodes is how many nodes the address plan numbers (InternalIP, PodCIDR).
const MaxNodes = 1 << 14

// internalIPFirstOctet starts the nodes' addresses: 172.16.0.0/12.
const internalIPFirstOctet = 172

// Spec is what a node is registered with.
type Spec struct {
	// Name is the node's name and hostname label.
	Name string
	// Labels are added to the labels every node has (hostname, OS, architecture).
	Labels map[string]string
	// Capacity is the node's capacity and allocatable.
	Capacity corev1.ResourceList
	Taints   []corev1.Taint
	// Address is the InternalIP the node advertises, where the apiserver reaches its kubelet API:
	// the address of a process that serves it on a real network (a kubelet joined to another
	// cluster). Zero: its address on the pod network (Node.InternalIP), reached through the
	// control plane's egress to it.
	Address netip.Addr
	// KubeletPort is the port of its kubelet API it advertises (daemonEndpoints). Zero: KubeletPort.
	KubeletPort int32
	// OnPodCIDR puts the node's address on the pod network (InternalIP) at the first address of
	// its pod range, where a bridge CNI puts the node's own, instead of the plan's address by
	// index: the nodes of a shard group share one network across processes, and only their pod
	// ranges are unique among them. Only for a node whose Node object has a pod range.
	OnPodCIDR bool
}

// Node is one emulated node.
type Node struct {
	spec Spec
	// index numbers the node across the kubelet's nodes, from 0: it picks its addresses.
	index int
	// podCIDR is the pod range the API gave an adopted node (spec.podCIDR), or invalid.
	podCIDR netip.Prefix
	// adopted: the Node object was not created by this kubelet but taken over (Set.Adopt).
	adopted bool
	uid     atomic.Value // types.UID once registered
	// cutOff: the node is partitioned from the apiserver: its kubelet and its pods' programs
	// reach nothing.
	cutOff atomic.Bool
	// kubeletDown: the node's kubelet process is stopped (Kubelet.StopKubelet): no heartbeats, no
	// syncs, no kubelet API; the node's containers run on.
	kubeletDown atomic.Bool
	// lease is what the node's kubelet keeps of its Lease (lease.go).
	lease nodeLease
	// postedImages are the images the node's status last posted (Set.images).
	postedImages atomic.Pointer[[]corev1.ContainerImage]
	// open are the responses the node's pods' programs are reading now (Network), which
	// ResetConnections breaks.
	openMu sync.Mutex
	open   map[*partitionedBody]struct{}
}

// Name is the node's name.
func (n *Node) Name() string { return n.spec.Name }

// UID is the node object's UID, empty before it is registered.
func (n *Node) UID() types.UID {
	uid, _ := n.uid.Load().(types.UID)
	return uid
}

// InternalIP is the node's address on the pod network, the index+1st host of 172.16.0.0/12: its
// pods' hostIP, and the address its kubelet API is served on to the pods and the control plane's
// egress. Address is what the Node object advertises.
func (n *Node) InternalIP() netip.Addr {
	if n.spec.OnPodCIDR && n.podCIDR.IsValid() {
		return n.podCIDR.Addr().Next()
	}
	host := n.index + 1
	return netip.AddrFrom4([4]byte{internalIPFirstOctet, byte(16 + host>>16&0x0f), byte(host >> 8), byte(host)})
}

// Address is the InternalIP the Node object advertises: Spec.Address, or InternalIP.
func (n *Node) Address() netip.Addr {
	if n.spec.Address.IsValid() {
		return n.spec.Address
	}
	return n.InternalIP()
}

// KubeletPort is the port of the kubelet API the Node object advertises.
func (n *Node) KubeletPort() int32 {
	if n.spec.KubeletPort != 0 {
		return n.spec.KubeletPort
	}
	return KubeletPort
}

// SetEndpoint sets the address and port the node advertises for its kubelet API (Spec.Address,
// Spec.KubeletPort), once its listener is open. Call it before Register or Adopt.
func (n *Node) SetEndpoint(addr netip.Addr, port int32) {
	n.spec.Address, n.spec.KubeletPort = addr, port
}

// Index numbers the node among the kubelet's, from 0 in registration and adoption order.
func (n *Node) Index() int { return n.index }

// Adopted reports whether the kubelet took over an existing Node object rather than creating it.
func (n *Node) Adopted() bool { return n.adopted }

// PodCIDR is the node's pod range: the API's spec.podCIDR of an adopted node that has an IPv4
// one, else the plan's for its index.
func (n *Node) PodCIDR() netip.Prefix {
	if n.podCIDR.IsValid() {
		return n.podCIDR
	}
	return PlanCIDR(n.index)
}

// HasPodCIDR reports whether the node's Node object gave it its pod range.
func (n *Node) HasPodCIDR() bool { return n.podCIDR.IsValid() }

// PlanCIDR is the pod range the address plan gives the node numbered index (below MaxNodes): the
// index+1st /24 of 10.64.0.0/10.
func PlanCIDR(index int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(64 + index>>8&0x3f), byte(index), 0}), 24)
}

// Partitioned reports whether the node is cut off from the apiserver.
func (n *Node) Partitioned() bool { return n.cutOff.Load() }

// Partition cuts the node off from the apiserver; false if it already was.
func (n *Node) Partition() bool { return n.cutOff.CompareAndSwap(false, true) }

// Reconnect ends the node's partition; false if it was not partitioned.
func (n *Node) Reconnect() bool { return n.cutOff.CompareAndSwap(true, false) }

// KubeletStopped reports whether the node's kubelet process is stopped.
func (n *Node) KubeletStopped() bool { return n.kubeletDown.Load() }

// StopKubelet marks the node's kubelet stopped; false if it already was.
func (n *Node) StopKubelet() bool { return n.kubeletDown.CompareAndSwap(false, true) }

// StartKubelet marks the node's kubelet running again, a new kubelet (KubeletRestarted); false if
// it was not stopped.
func (n *Node) StartKubelet() bool {
	if !n.kubeletDown.CompareAndSwap(true, false) {
		return false
	}
	n.KubeletRestarted()
	return true
}

// KubeletRestarted is a new kubelet process taking the node's place: it knows nothing of the
// Lease its predecessor wrote, and reads it at its first renewal.
func (n *Node) KubeletRestarted() { n.lease.forget() }

// Network wraps the transport of a pod's programs: while the node is partitioned, requests fail
// as on an unreachable network and open responses (watches) break at their next read;
// ResetConnections breaks the open responses at once.
func (n *Node) Network(rt http.RoundTripper) http.RoundTripper {
	return partitionedTransport{node: n, next: rt}
}

// ResetConnections breaks every response the node's pods' programs are reading, as a reset of
// their connections would: a watch ends with an error and its client watches again. It returns
// how many it broke.
func (n *Node) ResetConnections() int {
	n.openMu.Lock()
	open := n.open
	n.open = nil
	n.openMu.Unlock()
	for b := range open {
		b.reset.Store(true)
		_ = b.ReadCloser.Close() // wakes a Read in progress
	}
	return len(open)
}

func (n *Node) opened(b *partitionedBody) {
	n.openMu.Lock()
	defer n.openMu.Unlock()
	if n.open == nil {
		n.open = map[*partitionedBody]struct{}{}
	}
	n.open[b] = struct{}{}
}

func (n *Node) closed(b *partitionedBody) {
	n.openMu.Lock()
	defer n.openMu.Unlock()
	delete(n.open, b)
}

type partitionedTransport struct {
	node *Node
	next http.RoundTripper
}

func (t partitionedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.node.Partitioned() {
		return nil, t.node.unreachable(req.URL.Host)
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b := &partitionedBody{ReadCloser: resp.Body, node: t.node, host: req.URL.Host}
	t.node.opened(b)
	resp.Body = b
	return resp, nil
}

func (n *Node) unreachable(host string) error {
	return fmt.Errorf("dial tcp %s: connect: network is unreachable (restartbed: node %s is partitioned)", host, n.Name())
}

type partitionedBody struct {
	io.ReadCloser
	node  *Node
	host  string
	reset atomic.Bool
}

func (b *partitionedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case b.reset.Load():
		return 0, fmt.Errorf("read tcp %s: connection reset by peer (restartbed: node %s's connections were reset)", b.host, b.node.Name())
	case b.node.Partitioned():
		return 0, b.node.unreachable(b.host)
	case err != nil:
		b.node.closed(b) // the response is over: nothing left to break
	}
	return n, err
}

func (b *partitionedBody) Close() error {
	b.node.closed(b)
	return b.ReadCloser.Close()
}
