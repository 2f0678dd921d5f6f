package nodes

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// maxLeaseUpdates is how many updates one renewal tries before it reads the Lease again, as the
// kubelet's lease controller (maxUpdateRetries of k8s.io/component-helpers/apimachinery/lease).
const maxLeaseUpdates = 5

// nodeLease is what a node's kubelet keeps of its Lease, its lease controller's state.
type nodeLease struct {
	// mu serialises the node's Lease writes: the heartbeat's renewal and a reconnection's.
	mu sync.Mutex
	// latest is the Lease as the kubelet last wrote or read it, the base of its next update;
	// nil before the first and after the kubelet restarted.
	latest *coordinationv1.Lease
}

// forget drops what the kubelet knew of its Lease: a kubelet that starts knows nothing of it.
func (l *nodeLease) forget() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.latest = nil
}

// ensureLease makes the node's Lease this kubelet's when it registers or takes over the node: it
// creates the Lease, owned by the node (so that it goes with its node) and held by it, or takes
// over the one that exists: its holder becomes this kubelet's node and it is renewed now.
func (s *Set) ensureLease(ctx context.Context, n *Node) error {
	l := &n.lease
	l.mu.Lock()
	defer l.mu.Unlock()
	l.latest = nil
	if err := s.readAndRenewLease(ctx, n, true); err != nil {
		return fmt.Errorf("creating the lease of node %s: %w", n.Name(), err)
	}
	return nil
}

// renewLease renews the node's Lease as the kubelet's lease controller does every renew interval:
// it updates the Lease it last wrote with the renew time now (its duration and, where it has
// none, the node as its owner, set again). When the Lease moved meanwhile (a conflict: another
// writer), it reads it and updates that; after maxLeaseUpdates failed updates, or with no Lease
// known (the kubelet just started), it reads the Lease, or creates it if it is gone (deleted by
// hand, or with its node's owner gone), and renews what it read. Unlike the kubelet, whose lease
// controller retries that read with a backoff until the apiserver answers, it gives up after one
// read and the next renewal starts over: one node's Lease never holds up the others' heartbeat.
func (s *Set) renewLease(ctx context.Context, n *Node) error {
	l := &n.lease
	l.mu.Lock()
	defer l.mu.Unlock()
	var err error
	if l.latest != nil {
		err = s.updateLease(ctx, n)
	}
	if l.latest == nil || (err != nil && ctx.Err() == nil) {
		err = s.readAndRenewLease(ctx, n, false)
	}
	if err != nil {
		return fmt.Errorf("renewing the lease of node %s: %w", n.Name(), err)
	}
	return nil
}

// readAndRenewLease reads the node's Lease, or creates it, and renews what it read; take: the
// node becomes its holder as well. n.lease.mu is held.
func (s *Set) readAndRenewLease(ctx context.Context, n *Node, take bool) error {
	created, err := s.getOrCreateLease(ctx, n)
	if err != nil || created {
		return err
	}
	if take {
		n.lease.latest.Spec.HolderIdentity = ptr.To(n.Name())
	}
	return s.updateLease(ctx, n)
}

// updateLease is the lease controller's retryUpdateLease from n.lease.latest, which it replaces
// with what the apiserver returns. n.lease.mu is held.
func (s *Set) updateLease(ctx context.Context, n *Node) error {
	l := &n.lease
	leases := s.opts.Client(n.Name()).CoordinationV1().Leases(corev1.NamespaceNodeLease)
	for tries := 1; ; tries++ {
		updated, err := leases.Update(ctx, s.renewed(n, l.latest), metav1.UpdateOptions{})
		if err == nil {
			l.latest = updated
			return nil
		}
		if tries == maxLeaseUpdates || ctx.Err() != nil {
			return fmt.Errorf("%d updates failed, the last: %w", tries, err)
		}
		if apierrors.IsConflict(err) {
			if _, gerr := s.getOrCreateLease(ctx, n); gerr != nil {
				return fmt.Errorf("reading the lease after %d updates: %w (the last update: %w)", tries, gerr, err)
			}
		}
	}
}

// getOrCreateLease sets n.lease.latest to the node's Lease as the API holds it, created (and
// renewed by its creation) if there was none; it reports whether it created it. n.lease.mu is
// held.
func (s *Set) getOrCreateLease(ctx context.Context, n *Node) (created bool, err error) {
	leases := s.opts.Client(n.Name()).CoordinationV1().Leases(corev1.NamespaceNodeLease)
	lease, err := leases.Get(ctx, n.Name(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		fresh := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name(), Namespace: corev1.NamespaceNodeLease},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(n.Name())},
		}
		lease, err = leases.Create(ctx, s.renewed(n, fresh), metav1.CreateOptions{})
		created = err == nil
	}
	if err != nil {
		return false, err
	}
	n.lease.latest = lease
	return created, nil
}

// renewed is base as a renewal writes it: renewed now, with the profile's duration, and owned by
// the node if it is owned by nothing and the node's UID is known (the kubelet's SetNodeOwnerFunc).
func (s *Set) renewed(n *Node, base *coordinationv1.Lease) *coordinationv1.Lease {
	lease := base.DeepCopy()
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(s.opts.Timing.NodeLeaseDuration / time.Second))
	lease.Spec.RenewTime = &metav1.MicroTime{Time: s.opts.Clock.Now()}
	if uid := n.UID(); len(lease.OwnerReferences) == 0 && uid != "" {
		lease.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name(), UID: uid}}
	}
	return lease
}
