package fakekubelet

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/restartbed/restartbed/fakekubelet/hostproc"
	"github.com/restartbed/restartbed/fakekubelet/images"
	"github.com/restartbed/restartbed/fakekubelet/program"
	"github.com/restartbed/restartbed/fakekubelet/shards"
	"github.com/restartbed/restartbed/internal/pki"
	"github.com/restartbed/restartbed/timing"
)

// NodePool is a group of identical nodes, named <Name>-0, <Name>-1, ...
type NodePool struct {
	// Name prefixes the nodes' names and is their restartbed.dev/pool label.
	Name string
	// NamePrefix, when set, prefixes the nodes' names instead of Name: <NamePrefix>-0, ... A
	// tenant of a shared control plane (envtest's Cluster.Tenant) gives its pools one, so that
	// its nodes' names are its own on the control plane; their pool label is still Name.
	NamePrefix string
	// Count is the number of nodes.
	Count int
	// Labels are added to every node's labels.
	Labels map[string]string
	// Capacity is merged over DefaultCapacity; it is also the nodes' allocatable.
	Capacity corev1.ResourceList
	// Taints are the nodes' taints.
	Taints []corev1.Taint
}

// NodeName is the name of the pool's i-th node: <pool>-<i>, or <NamePrefix>-<i>.
func (p NodePool) NodeName(i int) string {
	prefix := p.Name
	if p.NamePrefix != "" {
		prefix = p.NamePrefix
	}
	return fmt.Sprintf("%s-%d", prefix, i)
}

// gateEnsureSecretPulledImages is the kubelet's gate that changes the Pulled event of an image
// already present; on by default in every supported release.
const gateEnsureSecretPulledImages = "KubeletEnsureSecretPulledImages"

// gateChangeStatusOnKubeletRestart is the kubelet's deprecated gate that brings back the status
// a restarted kubelet gave its running containers before 1.35 (neither started nor ready until
// their probes say so); off by default in every supported release (KEP-5278).
const gateChangeStatusOnKubeletRestart = "ChangeContainerStatusOnKubeletRestart"

// GateRestartAllContainers is the feature gate the kubelets read from Options.FeatureGates: it
// allows the RestartAllContainers action of restart rules.
const GateRestartAllContainers = "RestartAllContainersOnContainerExits"

// PoolLabel is the node label that names a node's pool. Written by restartbed when it registers
// a node; read by users and scenarios to select a pool's nodes.
const PoolLabel = "restartbed.dev/pool"

// TPUResource is the extended resource that accelerator pools declare.
const TPUResource corev1.ResourceName = "google.com/tpu"

// DefaultCapacity is what every node has unless its pool says otherwise: a large host with four
// TPU chips, so that `google.com/tpu: 4` requests place one pod per node.
func DefaultCapacity() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
		TPUResource:           resource.MustParse("4"),
	}
}

// DefaultPools is one pool "node" of one node.
func DefaultPools() []NodePool { return []NodePool{{Name: "node", Count: 1}} }

// Options configure a Kubelet. With neither Pools nor Manage, it registers DefaultPools.
type Options struct {
	// Config reaches the apiserver with the rights of kubelets and the scheduler (the admin).
	Config *rest.Config
	// Pools are the nodes to register. Default: DefaultPools.
	Pools []NodePool
	// FeatureGates are the kubelets' gates (the same as the apiserver's in a restartbed cluster),
	// e.g. whether RestartAllContainers rules act.
	FeatureGates map[string]bool
	// Timing supplies lease and status periods. Required.
	Timing timing.Profile
	// Clock drives every period and every timestamp the kubelet writes. Default: the real clock.
	Clock clock.WithTicker
	// Logger receives the kubelet's logs. Default: discarded.
	Logger *logr.Logger
	// Programs assign in-process programs or scripts to containers; the first matching rule
	// wins. Containers no rule matches run their own command.
	Programs []program.Rule
	// Builtins are the programs a rule's Builtin may name (package builtins has restartbed's).
	Builtins program.Builtins
	// HostBinaries runs the host executables that rules name (Rule.Binary), each pod's in a
	// sandbox of its own; nil: host binaries are not allowed, and a rule that names one is
	// refused. The caller owns it and closes it after Stop.
	HostBinaries *hostproc.Host
	// KubeletVersion is the version the kubelets report (status.nodeInfo.kubeletVersion), e.g.
	// v1.37.2: the cluster's Kubernetes release. Required.
	KubeletVersion string
	// DeclaredFeatures are what the kubelets publish in status.declaredFeatures: what the
	// release's registry of node features discovers for these gates and this version (envtest
	// reads it from the release; see controlplane.Release.DeclaredFeatures).
	DeclaredFeatures []string
	// API configures the kubelet API each node serves on its address; nil: none is served.
	API *APIOptions
	// ControlPlaneAddr is the control plane's address on the pod network: where the apiserver's
	// connections to nodes and pods come from (Kubelet.Dial), and what host binaries reach the
	// apiserver through. It must be no node's or pod's address. Default:
	// DefaultControlPlaneAddr().
	ControlPlaneAddr netip.Addr
	// Rand picks the endpoint of a Service for each connection from a pod, as kube-proxy picks at
	// random, and spreads the first probes of the probe workers a kubelet restart creates; a
	// seeded source makes both repeatable. Default: a source seeded at random.
	Rand rand.Source
	// NodeIdentities makes each node's kubelet act as system:node:NAME (group system:nodes) by
	// impersonation from Config's identity, which must be allowed to impersonate them: its
	// writes, its pods' tokens and its reads of their ConfigMaps and Secrets then pass the Node
	// authorizer and NodeRestriction as a kubelet's do (identity.go). Off, they all act as Config's.
	NodeIdentities bool
	// Images say which images the registry has and how their pulls go (package images): the
	// first rule matching an image wins; an image no rule matches exists and pulls at once.
	Images []images.Rule
	// ImageCommands: a container without a command runs its image's entrypoint and default
	// command, for the images restartbed knows (docs/images.md): busybox's sh exits at once,
	// agnhost pauses, nginx serves. Off, such a container runs until stopped.
	ImageCommands bool
	// Manage chooses existing Node objects the kubelet takes over, beside the Pools it registers,
	// as KWOK's controller chooses the nodes it manages (docs/join.md). Zero: none.
	Manage ManagedNodes
	// RuntimeSocketDir, when set, makes each node serve its container runtime over the CRI
	// (package cri) on the Unix socket DIR/NODE.sock, as containerd serves a node's, while the
	// kubelet runs the node: crictl and upstream's node e2e specs reach it there. The directory
	// must exist.
	RuntimeSocketDir string
	// KubeletConfigFile is a KubeletConfiguration file (kubelet.config.k8s.io/v1beta1, the
	// kubelet's --config) that each node's kubelet reads whenever it starts: at Start, when its
	// node is taken over, and at each RestartKubelet, StartKubelet and RebootNode, so that a
	// file rewritten while a kubelet is stopped changes that node's kubelet only. It sets the
	// node's crash-loop backoff (crashLoopBackOff.maxContainerRestartPeriod and the gates
	// KubeletCrashLoopBackOffMax and ReduceDefaultCrashLoopBackOffDecay); any other field may
	// only restate what /configz reports, and a file that says otherwise is refused, with the
	// kubelet not started (package kubeletconfig). Empty: none, as an empty file.
	KubeletConfigFile string
	// Shard makes the kubelet one of a group of processes that share the managed nodes (Manage;
	// package shards): it takes over only the nodes the group's rule gives it, and lets go of
	// those the rule gives another shard, as shards join and leave. With Pools instead of
	// Manage, the pools' nodes are the group's: each shard creates those that do not exist yet
	// (as a provisioner declares nodes: labelled shards.GroupLabel, with the pool's labels,
	// taints and capacity) and the group shares them. Nil: every managed node is this kubelet's.
	Shard *ShardOptions
}

// ShardOptions make a kubelet one shard of a group (shards.Options says each field's meaning).
type ShardOptions struct {
	// Group names the group; Identity names this shard in it, stable across its restarts.
	Group, Identity string
	// Namespace holds the shards' Leases. Default: shards.DefaultNamespace.
	Namespace string
	// LeaseDuration is how long a shard's Lease holds. Default: the timing profile's node Lease
	// duration (Timing.NodeLeaseDuration), so that a shard is given up on as its nodes are.
	LeaseDuration time.Duration
	// Takeover: the nodes of a shard whose Lease expired go to the live shards.
	Takeover bool
	// Relay is where the shard's relay listens for the other shards' connections to its nodes'
	// pods (package relay); port 0: one the system picks. Default: the kubelet API's
	// API.Listen, else 127.0.0.1.
	Relay netip.AddrPort
	// RelayAdvertise is the address the other shards reach the relay at. Default: API.Advertise
	// when the relay listens on API.Listen, else Relay's address.
	RelayAdvertise netip.Addr
}

// ManagedNodes chooses the existing nodes a kubelet takes over, with KWOK's rules: every node
// (All), one node by name (Name), or the nodes whose annotations and labels match the selectors
// (both, when both are set). All and Name exclude the others.
type ManagedNodes struct {
	All         bool
	Name        string
	Annotations labels.Selector
	Labels      labels.Selector
}

// IsZero reports whether no node is chosen.
func (m ManagedNodes) IsZero() bool {
	return !m.All && m.Name == "" && m.Annotations == nil && m.Labels == nil
}

// Validate reports choices that exclude each other.
func (m ManagedNodes) Validate() error {
	set := 0
	for _, on := range []bool{m.All, m.Name != "", m.Annotations != nil || m.Labels != nil} {
		if on {
			set++
		}
	}
	if set > 1 {
		return errors.New("fakekubelet: Options.Manage: all nodes, one node by name and nodes by selector exclude each other")
	}
	return nil
}

// Matches reports whether the node is chosen.
func (m ManagedNodes) Matches(node *corev1.Node) bool {
	switch {
	case m.All:
		return true
	case m.Name != "":
		return node.Name == m.Name
	case m.Annotations == nil && m.Labels == nil:
		return false
	}
	return (m.Annotations == nil || m.Annotations.Matches(labels.Set(node.Annotations))) &&
		(m.Labels == nil || m.Labels.Matches(labels.Set(node.Labels)))
}

// DefaultControlPlaneAddr is the control plane's address on the pod network unless
// Options.ControlPlaneAddr says otherwise: past the last node's address.
func DefaultControlPlaneAddr() netip.Addr { return netip.AddrFrom4([4]byte{172, 31, 255, 254}) }

// APIOptions configure the kubelet API (package server) the nodes serve on port 10250 of their
// InternalIP: what kubectl logs, exec, attach and port-forward reach through the apiserver.
type APIOptions struct {
	// ServingCA signs each node's serving certificate (for its name and InternalIP); the
	// apiserver verifies the kubelets with it (--kubelet-certificate-authority).
	ServingCA *pki.CA
	// ClientCAs are the PEM certificates of the CAs whose client certificates the kubelets
	// accept (--client-ca-file): the apiserver's client certificate for kubelets among them.
	ClientCAs []byte
	// Listen, when set, serves each node's kubelet API on a real network as well: a TCP
	// listener of its own on this address, at Port + the node's number or, with Port 0, at a
	// port the system picks. The nodes then advertise Advertise (default Listen) as their
	// InternalIP and the listener's port as their kubelet endpoint, so that an apiserver that
	// is not restartbed's reaches them (a joined kubelet, docs/join.md).
	Listen netip.Addr
	// Port is the first port of the nodes' listeners on Listen; 0: ports the system picks.
	Port uint16
	// Advertise is the address the nodes advertise when Listen is unspecified (0.0.0.0), or
	// reached at another address than it (NAT). Default: Listen.
	Advertise netip.Addr
}

func (o *Options) complete() error {
	if o.Config == nil {
		return errors.New("fakekubelet: Options.Config is required")
	}
	if err := o.Timing.Validate(); err != nil {
		return fmt.Errorf("fakekubelet: %w", err)
	}
	if sh := o.Shard; sh != nil {
		switch {
		case len(o.Pools) > 0 && !o.Manage.IsZero():
			return errors.New("fakekubelet: Options.Shard: a shard runs its share of its group's nodes (Options.Pools) or of the nodes it takes over (Options.Manage), not both")
		case len(o.Pools) == 0 && o.Manage.IsZero():
			return errors.New("fakekubelet: Options.Shard: a shard needs nodes: its group's (Options.Pools) or those it takes over (Options.Manage)")
		case len(o.Pools) > 0:
			// The group's nodes carry its name, and its shards take over those.
			o.Manage = ManagedNodes{Labels: labels.SelectorFromSet(labels.Set{shards.GroupLabel: sh.Group})}
		}
	}
	if len(o.Pools) == 0 && o.Manage.IsZero() {
		o.Pools = DefaultPools()
	}
	if err := o.Manage.Validate(); err != nil {
		return err
	}
	if a := o.API; a != nil && a.Listen.IsValid() {
		if !a.Advertise.IsValid() {
			a.Advertise = a.Listen
		}
		if a.Advertise.IsUnspecified() {
			return fmt.Errorf("fakekubelet: Options.API: the nodes cannot advertise %s; say the address the apiserver reaches them at (Advertise)", a.Advertise)
		}
	}
	if sh := o.Shard; sh != nil {
		if sh.LeaseDuration == 0 {
			sh.LeaseDuration = o.Timing.NodeLeaseDuration
		}
		if !sh.Relay.Addr().IsValid() {
			sh.Relay = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), sh.Relay.Port())
			if a := o.API; a != nil && a.Listen.IsValid() {
				sh.Relay = netip.AddrPortFrom(a.Listen, sh.Relay.Port())
			}
		}
		if !sh.RelayAdvertise.IsValid() {
			sh.RelayAdvertise = sh.Relay.Addr()
			if a := o.API; a != nil && a.Listen == sh.Relay.Addr() {
				sh.RelayAdvertise = a.Advertise
			}
		}
		if sh.RelayAdvertise.IsUnspecified() {
			return fmt.Errorf("fakekubelet: Options.Shard: the other shards cannot reach the relay at %s; say the address they reach it at (RelayAdvertise)", sh.RelayAdvertise)
		}
	}
	if _, err := version.ParseSemantic(o.KubeletVersion); err != nil {
		return fmt.Errorf("fakekubelet: Options.KubeletVersion %q: %w", o.KubeletVersion, err)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if !o.ControlPlaneAddr.IsValid() {
		o.ControlPlaneAddr = DefaultControlPlaneAddr()
	}
	if o.Logger == nil {
		discard := logr.Discard()
		o.Logger = &discard
	}
	return ValidatePools(o.Pools)
}

// ValidatePools reports every problem with the pools, each with its place, so a caller can
// refuse bad pools before it starts anything.
func ValidatePools(pools []NodePool) error {
	var errs []error
	seen, prefixes := map[string]bool{}, map[string]bool{}
	for i, p := range pools {
		where := fmt.Sprintf("pools[%d]", i)
		for _, msg := range validation.IsDNS1123Label(p.Name) {
			errs = append(errs, fmt.Errorf("%s.name %q: %s", where, p.Name, msg))
		}
		dup := seen[p.Name]
		if dup {
			errs = append(errs, fmt.Errorf("%s.name %q: another pool has this name", where, p.Name))
		}
		seen[p.Name] = true
		if p.NamePrefix != "" {
			for _, msg := range validation.IsDNS1123Label(p.NamePrefix) {
				errs = append(errs, fmt.Errorf("%s.namePrefix %q: %s", where, p.NamePrefix, msg))
			}
		}
		prefix := cmp.Or(p.NamePrefix, p.Name)
		if prefixes[prefix] && !dup {
			errs = append(errs, fmt.Errorf("%s: another pool's nodes are named %s-<i> too", where, prefix))
		}
		prefixes[prefix] = true
		if p.Count < 0 {
			errs = append(errs, fmt.Errorf("%s.count: must not be negative, got %d", where, p.Count))
		}
		for name, q := range p.Capacity {
			if q.Sign() < 0 {
				errs = append(errs, fmt.Errorf("%s.capacity[%s]: must not be negative, got %s", where, name, q.String()))
			}
		}
	}
	return errors.Join(errs...)
}
