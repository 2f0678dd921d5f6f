package fakekubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync/atomic"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Node condition reasons and messages, as the kubelet writes them.
const (
	reasonKubeletReady       = "KubeletReady"
	messageKubeletReady      = "kubelet is posting ready status"
	reasonSufficientMemory   = "KubeletHasSufficientMemory"
	messageSufficientMemory  = "kubelet has sufficient memory available"
	reasonNoDiskPressure     = "KubeletHasNoDiskPressure"
	messageNoDiskPressure    = "kubelet has no disk pressure"
	reasonSufficientPID      = "KubeletHasSufficientPID"
	messageSufficientPID     = "kubelet has sufficient PID available"
	kubeletPort              = 10250
	containerRuntimeName     = "restartbed://"
	nodeOSImage              = "restartbed emulated node"
	nodeKernelVersion        = "restartbed"
	nodeInternalIPFirstOctet = 172
)

// node is what the kubelet keeps about one of its nodes.
type node struct {
	name  string
	index int // across all pools, for address ranges
	uid   types.UID
	// cutOff: the node is partitioned from the apiserver (FailNode): its kubelet and its pods'
	// programs reach nothing, and the kubelet goes on from its last view of its pods.
	cutOff atomic.Bool
}

// partitioned reports whether the node is cut off from the apiserver.
func (n *node) partitioned() bool { return n.cutOff.Load() }

// internalIP is the node's address, the index+1st host of 172.16.0.0/12.
func internalIP(index int) netip.Addr {
	host := index + 1
	return netip.AddrFrom4([4]byte{nodeInternalIPFirstOctet, byte(16 + host>>16&0x0f), byte(host >> 8), byte(host)})
}

// podCIDR is the node's pod range: a /24 of 10.64.0.0/10, one per node (up to 16384 nodes).
func podCIDR(index int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(64 + index>>8&0x3f), byte(index), 0}), 24)
}

// maxNodes is how many nodes the address plan above can number.
const maxNodes = 1 << 14

// newNodeObject builds the Node a kubelet registers, status included (nodes may set status on
// create).
func (k *Kubelet) newNodeObject(pool NodePool, n *node) *corev1.Node {
	capacity := DefaultCapacity()
	maps.Copy(capacity, pool.Capacity)
	labels := map[string]string{
		corev1.LabelHostname:      n.name,
		corev1.LabelOSStable:      "linux",
		corev1.LabelArchStable:    "amd64",
		"beta.kubernetes.io/os":   "linux",
		"beta.kubernetes.io/arch": "amd64",
		PoolLabel:                 pool.Name,
	}
	maps.Copy(labels, pool.Labels)
	now := metav1.NewTime(k.clock.Now())
	cidr := podCIDR(n.index).String()
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: labels},
		Spec: corev1.NodeSpec{
			PodCIDR:  cidr,
			PodCIDRs: []string{cidr},
			Taints:   slices.Clone(pool.Taints),
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Phase:       corev1.NodeRunning,
			Conditions:  healthyConditions(now),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: internalIP(n.index).String()},
				{Type: corev1.NodeHostName, Address: n.name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: kubeletPort}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID:               fmt.Sprintf("%032x", n.index+1),
				SystemUUID:              fmt.Sprintf("00000000-0000-0000-0000-%012x", n.index+1),
				BootID:                  fmt.Sprintf("boot-%d", n.index),
				KernelVersion:           nodeKernelVersion,
				OSImage:                 nodeOSImage,
				ContainerRuntimeVersion: containerRuntimeName + k.opts.KubeletVersion,
				KubeletVersion:          k.opts.KubeletVersion,
				OperatingSystem:         "linux",
				Architecture:            "amd64",
			},
			DeclaredFeatures: slices.Clone(k.opts.DeclaredFeatures),
		},
	}
}

// healthyConditions are the conditions a healthy kubelet posts, all changed at now.
func healthyConditions(now metav1.Time) []corev1.NodeCondition {
	condition := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, message string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: message, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return []corev1.NodeCondition{
		condition(corev1.NodeMemoryPressure, corev1.ConditionFalse, reasonSufficientMemory, messageSufficientMemory),
		condition(corev1.NodeDiskPressure, corev1.ConditionFalse, reasonNoDiskPressure, messageNoDiskPressure),
		condition(corev1.NodePIDPressure, corev1.ConditionFalse, reasonSufficientPID, messageSufficientPID),
		condition(corev1.NodeReady, corev1.ConditionTrue, reasonKubeletReady, messageKubeletReady),
	}
}

// register creates the node and its Lease. A node left over from an earlier kubelet of the same
// name is taken over, as a restarted kubelet does.
func (k *Kubelet) register(ctx context.Context, pool NodePool, n *node) error {
	obj := k.newNodeObject(pool, n)
	created, err := k.client.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = k.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("registering node %s: %w", n.name, err)
	}
	n.uid = created.UID
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:      n.name,
			Namespace: corev1.NamespaceNodeLease,
			// As the kubelet does, so the lease goes with its node.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: n.name, UID: n.uid,
			}},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(n.name),
			LeaseDurationSeconds: ptr.To(int32(k.opts.Timing.NodeLeaseDuration.Seconds())),
			RenewTime:            &metav1.MicroTime{Time: k.clock.Now()},
		},
	}
	if _, err := k.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, lease, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the lease of node %s: %w", n.name, err)
	}
	return nil
}

// renewLease moves the node's Lease renewTime to now: one merge patch, no read.
func renewLease(ctx context.Context, c kubernetes.Interface, name string, now metav1.MicroTime) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"renewTime": now}})
	if err != nil {
		return err
	}
	_, err = c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// postStatus posts the node's conditions as a healthy kubelet reports them, with a new heartbeat
// time: one strategic merge patch of the status, keyed by condition type. A condition whose
// status differs from the one the API holds (the node lifecycle controller's Unknown, after a
// partition) moves back with a new transition time; the others keep theirs. current is the node
// as last seen in the API, or nil.
func postStatus(ctx context.Context, c kubernetes.Interface, name string, current *corev1.Node, now metav1.Time) error {
	var conditions []any
	for _, want := range healthyConditions(now) {
		cond := map[string]any{"type": want.Type, "status": want.Status, "reason": want.Reason, "message": want.Message,
			"lastHeartbeatTime": now}
		if current != nil {
			for _, have := range current.Status.Conditions {
				if have.Type == want.Type && have.Status != want.Status {
					cond["lastTransitionTime"] = now
				}
			}
		}
		conditions = append(conditions, cond)
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conditions}})
	if err != nil {
		return err
	}
	if _, err := c.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("posting the status of node %s: %w", name, err)
	}
	return nil
}
