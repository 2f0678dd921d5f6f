package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	kubeletapis "k8s.io/kubelet/pkg/apis"
	"k8s.io/utils/clock"

	"github.com/restartbed/restartbed/timing"
)

// KubeletPort is the port of the kubelet API the nodes advertise in their status
// (daemonEndpoints.kubeletEndpoint) and serve on their InternalIP: the kubelet's default --port.
const KubeletPort = 10250

// Node condition reasons and messages and node info, as the kubelet writes them.
const (
	reasonKubeletReady      = "KubeletReady"
	messageKubeletReady     = "kubelet is posting ready status"
	reasonSufficientMemory  = "KubeletHasSufficientMemory"
	messageSufficientMemory = "kubelet has sufficient memory available"
	reasonNoDiskPressure    = "KubeletHasNoDiskPressure"
	messageNoDiskPressure   = "kubelet has no disk pressure"
	reasonSufficientPID     = "KubeletHasSufficientPID"
	messageSufficientPID    = "kubelet has sufficient PID available"
	containerRuntimeName    = "restartbed://"
	osImage                 = "restartbed emulated node"
	kernelVersion           = "restartbed"
)

// apiWorkers bounds the concurrent writes of one kind (registrations, lease renewals), so a large
// cluster queues its writes instead of opening thousands of requests at once.
const apiWorkers = 16

// Client is what a node's kubelet writes with: its Node, its Lease. A kubernetes.Interface is one.
type Client interface {
	CoreV1() typedcorev1.CoreV1Interface
	CoordinationV1() typedcoordinationv1.CoordinationV1Interface
}

// Options configure a Set.
type Options struct {
	// Client is the client of the named node's kubelet (its identity, package fakekubelet).
	Client func(node string) Client
	// Admin, when set, adds the labels NodeRestriction forbids a kubelet to set on its Node
	// (kubeletMaySet) after the node registers, as a cluster's administrator or provisioner
	// labels nodes; nil: the kubelet registers its node with every label.
	Admin Client
	Clock clock.WithTicker
	// Timing gives the Lease's duration and renew interval and the status report frequency.
	Timing timing.Profile
	// KubeletVersion is what the nodes report (status.nodeInfo.kubeletVersion).
	KubeletVersion string
	// DeclaredFeatures are what the nodes publish in status.declaredFeatures.
	DeclaredFeatures []string
	// Images are the images the named node's runtime holds, as its status reports them
	// (status.images); nil: the nodes report none.
	Images func(node string) []corev1.ContainerImage
	// Nodes are the nodes, in registration order; at most MaxNodes, each name once.
	Nodes []Spec
}

// Set is a kubelet's nodes, and the heartbeat that keeps them alive in the API. The nodes of
// Options.Nodes are there from New; adopted ones come and go while it runs (Adopt, Release).
type Set struct {
	opts Options

	mu     sync.RWMutex
	nodes  []*Node
	byName map[string]*Node
	// next is the index of the next node: indexes are never reused, so that no two nodes, even
	// one released and one adopted later, share an address.
	next int
}

// New validates the options and numbers the nodes; it starts nothing.
func New(opts Options) (*Set, error) {
	if len(opts.Nodes) > MaxNodes {
		return nil, fmt.Errorf("%d nodes requested; the address plan numbers at most %d", len(opts.Nodes), MaxNodes)
	}
	s := &Set{opts: opts, byName: make(map[string]*Node, len(opts.Nodes))}
	for _, spec := range opts.Nodes {
		if s.byName[spec.Name] != nil {
			return nil, fmt.Errorf("two nodes are named %s", spec.Name)
		}
		s.add(&Node{spec: spec})
	}
	return s, nil
}

// add numbers n and puts it in the set; only New calls it, before the set is shared.
func (s *Set) add(n *Node) {
	n.index = s.next
	s.next++
	s.nodes = append(s.nodes, n)
	s.byName[n.Name()] = n
}

// Get returns the named node, or nil.
func (s *Set) Get(name string) *Node {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byName[name]
}

// All returns the nodes in registration and adoption order.
func (s *Set) All() []*Node {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.nodes)
}

// Len is the number of nodes.
func (s *Set) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.nodes)
}

// Prepare numbers a node to adopt, the existing Node object current, with the addresses of spec
// (its name is current's); it is not in the set until Adopt. Its labels, taints, capacity and
// allocatable stay the object's (spec.Capacity where it declares none).
func (s *Set) Prepare(current *corev1.Node, spec Spec) (*Node, error) {
	spec.Name = current.Name
	n := &Node{spec: spec, adopted: true}
	if p, err := netip.ParsePrefix(current.Spec.PodCIDR); err == nil && p.Addr().Is4() && p.Bits() <= 30 {
		n.podCIDR = p.Masked()
	}
	n.uid.Store(current.UID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next >= MaxNodes {
		return nil, fmt.Errorf("node %s: the address plan numbers at most %d nodes", n.Name(), MaxNodes)
	}
	n.index = s.next
	s.next++
	return n, nil
}

// Adopt takes over the existing Node object of a prepared node, as KWOK's controller takes over
// the nodes it manages, and puts the node in the set: the kubelet fills in the status a kubelet
// posts — its addresses (spec.Address and the node's name), the kubelet API's port, node info,
// healthy conditions, the capacity and allocatable it lacks — and holds its Lease. If a write
// fails, the node stays out of the set.
func (s *Set) Adopt(ctx context.Context, n *Node, current *corev1.Node) error {
	if err := s.takeOver(ctx, n, current); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byName[n.Name()] != nil {
		return fmt.Errorf("node %s is already this kubelet's", n.Name())
	}
	s.nodes = append(s.nodes, n)
	s.byName[n.Name()] = n
	return nil
}

// Release forgets the named adopted node: its heartbeat stops. It returns the node, or nil if it
// is not an adopted node of the set (registered nodes are never released).
func (s *Set) Release(name string) *Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.byName[name]
	if n == nil || !n.adopted {
		return nil
	}
	delete(s.byName, name)
	s.nodes = slices.DeleteFunc(s.nodes, func(o *Node) bool { return o == n })
	return n
}

// takeOver writes what the kubelet of an adopted node owns: one merge patch of the status, and
// the Lease.
func (s *Set) takeOver(ctx context.Context, n *Node, current *corev1.Node) error {
	now := metav1.NewTime(s.opts.Clock.Now())
	want := s.object(n)
	st := map[string]any{
		"phase":           corev1.NodeRunning,
		"conditions":      healthyConditions(now),
		"addresses":       want.Status.Addresses,
		"daemonEndpoints": want.Status.DaemonEndpoints,
		"nodeInfo":        want.Status.NodeInfo,
	}
	if len(want.Status.DeclaredFeatures) > 0 {
		st["declaredFeatures"] = want.Status.DeclaredFeatures
	}
	if s.opts.Images != nil {
		st["images"] = want.Status.Images
	}
	if len(current.Status.Capacity) == 0 {
		st["capacity"] = want.Status.Capacity
	}
	if len(current.Status.Allocatable) == 0 {
		allocatable := current.Status.Capacity
		if len(allocatable) == 0 {
			allocatable = want.Status.Allocatable
		}
		st["allocatable"] = allocatable
	}
	patch, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		return err
	}
	if _, err := s.opts.Client(n.Name()).CoreV1().Nodes().Patch(ctx, n.Name(), types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("taking over node %s: %w", n.Name(), err)
	}
	if err := s.ensureLease(ctx, n); err != nil {
		return err
	}
	return nil
}

// Register creates every node and its Lease. A node left over from an earlier kubelet of the
// same name is taken over, as a restarted kubelet does.
func (s *Set) Register(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(apiWorkers)
	for _, n := range s.All() {
		if n.adopted {
			continue
		}
		g.Go(func() error { return s.register(gctx, n) })
	}
	return g.Wait()
}

func (s *Set) register(ctx context.Context, n *Node) error {
	c := s.opts.Client(n.Name())
	obj := s.object(n)
	restricted := map[string]string{}
	if s.opts.Admin != nil {
		for k, v := range obj.Labels {
			if !kubeletMaySet(k) {
				restricted[k] = v
				delete(obj.Labels, k)
			}
		}
	}
	created, err := c.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = c.CoreV1().Nodes().Get(ctx, n.Name(), metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("registering node %s: %w", n.Name(), err)
	}
	n.uid.Store(created.UID)
	if len(restricted) > 0 {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": restricted}})
		if err != nil {
			return err
		}
		if _, err := s.opts.Admin.CoreV1().Nodes().Patch(ctx, n.Name(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("labelling node %s: %w", n.Name(), err)
		}
	}
	return s.ensureLease(ctx, n)
}

// kubeletMaySet reports whether NodeRestriction lets a kubelet set the label on its own Node
// (plugin/pkg/admission/noderestriction, getForbiddenLabels): not one of node-restriction.kubernetes.io,
// and of the kubernetes.io and k8s.io domains only the kubelet's own labels.
func kubeletMaySet(key string) bool {
	domain, _, found := strings.Cut(key, "/")
	if !found {
		return true
	}
	under := func(parent string) bool { return domain == parent || strings.HasSuffix(domain, "."+parent) }
	if under(corev1.LabelNamespaceNodeRestriction) {
		return false
	}
	return (!under("kubernetes.io") && !under("k8s.io")) || kubeletapis.IsKubeletLabel(key)
}

// Declared is the Node object of spec as a provisioner declares one for a kubelet to take over
// (KWOK's node manifests): its name, the labels every node has and spec's, its taints, capacity
// and allocatable; nothing a kubelet writes.
func Declared(spec Spec) *corev1.Node {
	labels := map[string]string{
		corev1.LabelHostname:      spec.Name,
		corev1.LabelOSStable:      "linux",
		corev1.LabelArchStable:    "amd64",
		"beta.kubernetes.io/os":   "linux",
		"beta.kubernetes.io/arch": "amd64",
	}
	maps.Copy(labels, spec.Labels)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: slices.Clone(spec.Taints)},
		Status:     corev1.NodeStatus{Capacity: spec.Capacity.DeepCopy(), Allocatable: spec.Capacity.DeepCopy()},
	}
}

// object builds the Node a kubelet registers, status included (nodes may set status on create).
func (s *Set) object(n *Node) *corev1.Node {
	node := Declared(n.spec)
	now := metav1.NewTime(s.opts.Clock.Now())
	cidr := n.PodCIDR().String()
	node.Spec.PodCIDR, node.Spec.PodCIDRs = cidr, []string{cidr}
	index := n.index
	node.Status = corev1.NodeStatus{
		Capacity:    n.spec.Capacity.DeepCopy(),
		Allocatable: n.spec.Capacity.DeepCopy(),
		Phase:       corev1.NodeRunning,
		Conditions:  healthyConditions(now),
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: n.Address().String()},
			{Type: corev1.NodeHostName, Address: n.Name()},
		},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: n.KubeletPort()}},
		NodeInfo: corev1.NodeSystemInfo{
			MachineID:               fmt.Sprintf("%032x", index+1),
			SystemUUID:              fmt.Sprintf("00000000-0000-0000-0000-%012x", index+1),
			BootID:                  fmt.Sprintf("boot-%d", index),
			KernelVersion:           kernelVersion,
			OSImage:                 osImage,
			ContainerRuntimeVersion: containerRuntimeName + s.opts.KubeletVersion,
			KubeletVersion:          s.opts.KubeletVersion,
			OperatingSystem:         "linux",
			Architecture:            "amd64",
		},
		DeclaredFeatures: slices.Clone(s.opts.DeclaredFeatures),
		Images:           s.images(n),
	}
	return node
}

// images are the images the node's status reports now, remembered as posted: a later change is
// posted at the next status check (Heartbeat).
func (s *Set) images(n *Node) []corev1.ContainerImage {
	if s.opts.Images == nil {
		return nil
	}
	imgs := s.opts.Images(n.Name())
	n.postedImages.Store(&imgs)
	return imgs
}

// imagesChanged reports whether the node's images differ from those its status last posted.
func (s *Set) imagesChanged(n *Node) bool {
	if s.opts.Images == nil {
		return false
	}
	posted := n.postedImages.Load()
	return posted == nil || !equality.Semantic.DeepEqual(*posted, s.opts.Images(n.Name()))
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

// Heartbeat renews every connected node's Lease each renew interval and re-posts its status each
// report period, from one goroutine for all nodes, until ctx ends. current reads the nodes as the
// API last showed them. A status that changed (the node's images) is posted at the next renewal
// rather than the next report: the kubelet compares its status with the last posted every
// nodeStatusUpdateFrequency, which is the renew interval of upstream's defaults (10 s).
func (s *Set) Heartbeat(ctx context.Context, current corelisters.NodeLister) {
	logger := klog.FromContext(ctx)
	renew := s.opts.Clock.NewTicker(s.opts.Timing.NodeLeaseRenewInterval)
	defer renew.Stop()
	report := s.opts.Clock.NewTicker(s.opts.Timing.NodeStatusReportFrequency)
	defer report.Stop()
	for {
		var write func(context.Context, *Node) error
		select {
		case <-ctx.Done():
			return
		case <-renew.C():
			now := metav1.NewTime(s.opts.Clock.Now())
			write = func(ctx context.Context, n *Node) error {
				if err := s.renewLease(ctx, n); err != nil {
					return err
				}
				if s.imagesChanged(n) {
					return s.postStatus(ctx, n, apiNode(current, n), now)
				}
				return nil
			}
		case <-report.C():
			now := metav1.NewTime(s.opts.Clock.Now())
			write = func(ctx context.Context, n *Node) error { return s.postStatus(ctx, n, apiNode(current, n), now) }
		}
		var g errgroup.Group
		g.SetLimit(apiWorkers)
		for _, n := range s.All() {
			if n.Partitioned() || n.KubeletStopped() {
				continue
			}
			g.Go(func() error {
				if err := write(ctx, n); err != nil && ctx.Err() == nil {
					logger.Error(err, "Heartbeat failed", "node", klog.KRef("", n.Name()))
				}
				return nil
			})
		}
		_ = g.Wait() // every heartbeat reports its own failure and returns nil
	}
}

// Reconnected is what a node's kubelet does first when its partition ends: it renews its Lease
// and posts its status at once (Ready again; the node lifecycle controller then lifts its taints).
func (s *Set) Reconnected(ctx context.Context, n *Node, current corelisters.NodeLister) error {
	if err := s.renewLease(ctx, n); err != nil {
		return err
	}
	return s.postStatus(ctx, n, apiNode(current, n), metav1.NewTime(s.opts.Clock.Now()))
}

func apiNode(lister corelisters.NodeLister, n *Node) *corev1.Node {
	obj, err := lister.Get(n.Name())
	if err != nil {
		return nil
	}
	return obj
}

// postStatus posts the node's conditions as a healthy kubelet reports them, with a new heartbeat
// time, and its images: one strategic merge patch of the status, conditions keyed by type. A condition whose
// status differs from the one the API holds (the node lifecycle controller's Unknown, after a
// partition) moves back with a new transition time; the others keep theirs. current is the node
// as last seen in the API, or nil.
func (s *Set) postStatus(ctx context.Context, n *Node, current *corev1.Node, now metav1.Time) error {
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
	st := map[string]any{"conditions": conditions}
	if s.opts.Images != nil {
		// status.images has no merge key: the list is replaced whole, as the kubelet's patch does.
		st["images"] = s.images(n)
	}
	patch, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		return err
	}
	if _, err := s.opts.Client(n.Name()).CoreV1().Nodes().Patch(ctx, n.Name(), types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("posting the status of node %s: %w", n.Name(), err)
	}
	return nil
}
