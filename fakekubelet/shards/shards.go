// Package shards divides the nodes of a group among the processes that run them (shards), as
// many `restartbed kubelet` processes on many machines share one cluster's emulated nodes.
// Each shard holds a Lease of its own (coordination.k8s.io, labelled with its group) in a
// namespace and renews it; the members of the group are the shards with a Lease, or, with
// Takeover, those whose Lease is current; a node belongs to the member that rendezvous hashing
// of the node's name ranks first, a rule every shard computes alike from the Leases alone, so
// that a shard that joins or leaves moves only the nodes it gains or had.
//
// A node changes hands without two shards running it at once: the shard that runs a node names
// itself in the node's NodeAnnotation, and clears it when it lets go; the node's next owner
// takes it only once the annotation is clear, its own, or names a shard that is no longer live
// (Free), as a node's kubelet starts only after the one before it stopped.
//
// Each shard also publishes on its Lease where its relay listens (RelayAnnotation), for the
// others to reach its pods, and numbers the group's nodes that have no pod range from blocks of
// the address plan only it may give (AllocateIndex), so that the shards' pod networks join into
// one without two nodes sharing a range.
//
// It owns the shard's Lease, the view of the group's Leases, the rule, the hand-over's protocol
// and the blocks of the plan. It must not touch nodes or pods: the kubelet asks Owns and Free, writes the
// annotation, and is told when the assignment may have changed.
package shards

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// GroupLabel is the label of a shard's Lease that names its group.
const GroupLabel = "restartbed.dev/shard-group"

// RelayAnnotation is the annotation of a shard's Lease that says where its relay listens
// (host:port, package relay): the other shards connect there to reach its nodes' pods. Written by
// the shard with each renewal, read by the group's other shards.
const RelayAnnotation = "restartbed.dev/relay"

// NodeAnnotation is the annotation of a node that names the shard running it: set by the shard
// before it takes the node over, cleared by it once it has let go.
const NodeAnnotation = "restartbed.dev/shard"

// Defaults of Options: a shard's Lease lasts as long as a node's (the kubelet's
// nodeLeaseDurationSeconds) and is renewed four times in that time.
const (
	DefaultLeaseDuration = 40 * time.Second
	DefaultNamespace     = "kube-node-lease"
)

// Options configure a shard of a group.
type Options struct {
	// Client reads and writes the group's Leases. Required.
	Client kubernetes.Interface
	// Group names the group; its shards' Leases carry it in GroupLabel. Required.
	Group string
	// Identity is this shard's name in the group, unique and stable across its restarts (a
	// StatefulSet pod's name, a host's): a shard that comes back under it gets its nodes back.
	// Required.
	Identity string
	// Namespace holds the Leases. Default: DefaultNamespace.
	Namespace string
	// LeaseDuration is how long a Lease holds without renewal; it is renewed every quarter of
	// it. Default: DefaultLeaseDuration.
	LeaseDuration time.Duration
	// Takeover: a shard whose Lease has expired is no member, and its nodes go to the others
	// until it renews. Off, a shard is a member as long as its Lease exists, renewed or not: its
	// nodes stay its own, and go unrun while it is gone, as a node's whose kubelet died.
	Takeover bool
	// Relay is where this shard's relay listens (host:port), published on its Lease
	// (RelayAnnotation); empty: the shard has none.
	Relay string
	// Clock drives renewals and expiry. Default: the real clock.
	Clock clock.WithTicker
	// Changed is called whenever the members changed, never twice at once: first by Start
	// once it has read the group, then by the shard's goroutine.
	Changed func()
}

// Shard is one member of a group: its Lease, and the group as its Leases say.
type Shard struct {
	opts   Options
	leases cache.SharedIndexInformer

	mu      sync.Mutex
	members []string

	changes chan struct{}
	wg      sync.WaitGroup

	// planMu guards the blocks of the address plan this shard took and the indexes it gave
	// (plan.go).
	planMu sync.Mutex
	blocks []int
	given  map[int]bool
}

// New checks the options; it starts nothing.
func New(opts Options) (*Shard, error) {
	var errs []error
	if opts.Client == nil {
		errs = append(errs, errors.New("options: Client is required"))
	}
	for _, f := range []struct{ name, value string }{{"Group", opts.Group}, {"Identity", opts.Identity}} {
		if msgs := validation.IsDNS1123Label(f.value); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("options: %s %q: %v", f.name, f.value, msgs))
		}
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration = DefaultLeaseDuration
	}
	if opts.LeaseDuration < time.Second {
		errs = append(errs, fmt.Errorf("options: LeaseDuration %s: at least 1s", opts.LeaseDuration))
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Changed == nil {
		opts.Changed = func() {}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("shards: %w", errors.Join(errs...))
	}
	return &Shard{opts: opts, changes: make(chan struct{}, 1), given: map[int]bool{}}, nil
}

// LeaseName is the name of a shard's Lease: GROUP-IDENTITY.
func LeaseName(group, identity string) string { return group + "-" + identity }

// Start takes the shard's Lease (a Lease of its name held by the same identity is its own from
// before), starts renewing it and watching the group's, and returns once the group is read and
// Changed has been called; the shard runs until ctx ends, and leaves its Lease behind, as a node
// that loses power leaves its own.
func (s *Shard) Start(ctx context.Context) error {
	if err := s.renew(ctx); err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(s.opts.Client, 0, informers.WithNamespace(s.opts.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.Set{GroupLabel: s.opts.Group}.String()
		}))
	s.leases = factory.Coordination().V1().Leases().Informer()
	if _, err := s.leases.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.poke() },
		UpdateFunc: func(any, any) { s.poke() },
		DeleteFunc: func(any) { s.poke() },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), s.leases.HasSynced) {
		return fmt.Errorf("shards: the group's Leases: %w", context.Cause(ctx))
	}
	s.update()
	s.wg.Go(func() {
		<-ctx.Done()
		factory.Shutdown()
	})
	// The ticker is armed before Start returns, so that a renewal period counts from Start (a
	// fake clock stepped right after Start moves the shard's renewals too).
	renew := s.opts.Clock.NewTicker(s.opts.LeaseDuration / 4)
	s.wg.Go(func() { s.run(ctx, renew) })
	return nil
}

// Wait returns once the shard's goroutines have ended, after Start's ctx.
func (s *Shard) Wait() { s.wg.Wait() }

func (s *Shard) poke() {
	select {
	case s.changes <- struct{}{}:
	default:
	}
}

// run renews the Lease at each tick of renew (every quarter of its duration) and recomputes the
// members when a Lease changes and at each renewal, which is when another shard's Lease may have
// expired. It stops renew as it returns.
func (s *Shard) run(ctx context.Context, renew clock.Ticker) {
	defer renew.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-renew.C():
			if err := s.renew(ctx); err != nil && ctx.Err() == nil {
				klog.FromContext(ctx).Error(err, "Renewing the shard's Lease", "group", s.opts.Group, "shard", s.opts.Identity)
			}
			s.update()
		case <-s.changes:
			s.update()
		}
	}
}

// renew creates or renews the shard's Lease.
func (s *Shard) renew(ctx context.Context) error {
	leases := s.opts.Client.CoordinationV1().Leases(s.opts.Namespace)
	name := LeaseName(s.opts.Group, s.opts.Identity)
	now := metav1.NewMicroTime(s.opts.Clock.Now())
	spec := coordinationv1.LeaseSpec{HolderIdentity: ptr.To(s.opts.Identity),
		LeaseDurationSeconds: ptr.To(int32(s.opts.LeaseDuration / time.Second)), RenewTime: &now}
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		spec.AcquireTime = &now
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.opts.Namespace,
			Labels: map[string]string{GroupLabel: s.opts.Group}}, Spec: spec}
		s.annotate(lease)
		_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
	case err == nil:
		if holder := ptr.Deref(lease.Spec.HolderIdentity, ""); holder != s.opts.Identity {
			return fmt.Errorf("shards: the Lease %s/%s is held by %q, not by shard %q", s.opts.Namespace, name, holder, s.opts.Identity)
		}
		spec.AcquireTime = lease.Spec.AcquireTime
		lease.Spec = spec
		s.annotate(lease)
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("shards: the shard's Lease %s/%s: %w", s.opts.Namespace, name, err)
	}
	return nil
}

// annotate says on the shard's Lease where its relay listens, or that it has none.
func (s *Shard) annotate(lease *coordinationv1.Lease) {
	if s.opts.Relay == "" {
		delete(lease.Annotations, RelayAnnotation)
		return
	}
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[RelayAnnotation] = s.opts.Relay
}

// update recomputes the members from the Leases, and calls Changed if they changed.
func (s *Shard) update() {
	now := s.opts.Clock.Now()
	var members []string
	for _, obj := range s.leases.GetStore().List() {
		lease := obj.(*coordinationv1.Lease)
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		if lease.Labels[GroupLabel] != s.opts.Group || holder == "" || lease.Name != LeaseName(s.opts.Group, holder) {
			continue // not a shard's Lease
		}
		if s.opts.Takeover && holder != s.opts.Identity && expired(lease, now) {
			continue
		}
		members = append(members, holder)
	}
	slices.Sort(members)
	s.mu.Lock()
	same := slices.Equal(members, s.members)
	s.members = members
	s.mu.Unlock()
	if !same {
		s.opts.Changed()
	}
}

// expired reports whether the Lease was not renewed within its duration.
func expired(lease *coordinationv1.Lease, now time.Time) bool { return now.After(expiry(lease)) }

// expiry is when the Lease runs out unless renewed; the zero time for a Lease that never says.
func expiry(lease *coordinationv1.Lease) time.Time {
	if lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil {
		return time.Time{}
	}
	return lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
}

// Members are the group's members, sorted.
func (s *Shard) Members() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.members)
}

// Owner is the member that runs the node, or "" before Start.
func (s *Shard) Owner(node string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Owner(s.members, node)
}

// Owns reports whether this shard runs the node.
func (s *Shard) Owns(node string) bool { return s.Owner(node) == s.opts.Identity }

// Identity is this shard's name in the group.
func (s *Shard) Identity() string { return s.opts.Identity }

// Free reports whether this shard may take over a node whose NodeAnnotation names holder: no
// shard runs it (""), this one did, or the holder is not live — its Lease is gone or was not
// renewed in time, so that it is dead or cut off from the apiserver. Otherwise the holder lets
// go first and clears the annotation, and wait is how long until its Lease expires unless
// renewed: the time to ask again if the annotation has not changed by then.
func (s *Shard) Free(holder string) (free bool, wait time.Duration) {
	if holder == "" || holder == s.opts.Identity {
		return true, 0
	}
	lease := s.leaseOf(holder)
	if lease == nil {
		return true, 0
	}
	left := expiry(lease).Sub(s.opts.Clock.Now())
	if left < 0 {
		return true, 0
	}
	return false, left + time.Second/10
}

// RelayAddress is where this shard's relay listens, as its Lease publishes it (Options.Relay).
func (s *Shard) RelayAddress() string { return s.opts.Relay }

// leaseOf is the named shard's own Lease as the group's informer has it: nil when there is none,
// or when the Lease of its name is held by another identity (not the shard's).
func (s *Shard) leaseOf(member string) *coordinationv1.Lease {
	obj, ok, err := s.leases.GetStore().GetByKey(s.opts.Namespace + "/" + LeaseName(s.opts.Group, member))
	if err != nil || !ok {
		return nil
	}
	lease := obj.(*coordinationv1.Lease)
	if ptr.Deref(lease.Spec.HolderIdentity, "") != member {
		return nil
	}
	return lease
}

// Relay is where the named member's relay listens, as its Lease says; false when it has no
// Lease or no relay.
func (s *Shard) Relay(member string) (string, bool) {
	lease := s.leaseOf(member)
	if lease == nil {
		return "", false
	}
	relay, ok := lease.Annotations[RelayAnnotation]
	return relay, ok && relay != ""
}

// Owner is the member rendezvous hashing ranks first for the node: the one whose hash of
// member and node is highest (ties to the smaller name). Adding a member moves to it only the
// nodes it now ranks first for; removing one moves only its nodes.
func Owner(members []string, node string) string {
	best, bestScore := "", uint64(0)
	for _, m := range members {
		h := fnv.New64a()
		_, _ = h.Write([]byte(m))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(node))
		score := mix(h.Sum64())
		if best == "" || score > bestScore || (score == bestScore && m < best) {
			best, bestScore = m, score
		}
	}
	return best
}

// mix spreads FNV's bits (splitmix64's finalizer): FNV alone ranks names that differ in their
// last byte too alike.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
