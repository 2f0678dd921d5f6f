package shards

import (
	"context"
	"fmt"
	"slices"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// This file numbers the group's nodes that have no pod range of their own (no spec.podCIDR:
// KWOK's node manifests, a cluster without kube-controller-manager's --allocate-node-cidrs) with
// indexes of the kubelets' address plan, so that the shards, which share one pod network, never
// give two nodes the same range. Indexes come in blocks of BlockSize; a shard takes a block by
// creating its Lease (blockLeaseName), which only one shard can do, and numbers nodes only from
// its own blocks. A block stays taken as long as the ranges it gave are written in Node objects:
// its Lease is never renewed nor removed by the shards.

// BlockSize is how many indexes of the address plan a shard takes at a time.
const BlockSize = 256

// blockLeaseName names the Lease of the plan's block b: GROUP.plan-B. A shard's own Lease name
// (LeaseName) never has a dot: its parts are DNS labels.
func blockLeaseName(group string, b int) string { return fmt.Sprintf("%s.plan-%d", group, b) }

// AllocateIndex gives a node an index below size of the address plan that used says no node of
// the cluster has and that no other shard gives: one of this shard's blocks, taking a new block
// when they are full. ReleaseIndex gives back an index the node did not get after all.
func (s *Shard) AllocateIndex(ctx context.Context, size int, used func(index int) bool) (int, error) {
	s.planMu.Lock()
	defer s.planMu.Unlock()
	for {
		for _, b := range s.blocks {
			for i := b * BlockSize; i < (b+1)*BlockSize && i < size; i++ {
				if !s.given[i] && !used(i) {
					s.given[i] = true
					return i, nil
				}
			}
		}
		b, err := s.takeBlock(ctx, size)
		if err != nil {
			return 0, err
		}
		s.blocks = append(s.blocks, b)
	}
}

// ReleaseIndex gives back an index AllocateIndex gave, for a node whose write of it failed.
func (s *Shard) ReleaseIndex(index int) {
	s.planMu.Lock()
	defer s.planMu.Unlock()
	delete(s.given, index)
}

// takeBlock creates the Lease of the first block no shard has, or finds one this shard took
// before it restarted. The caller holds planMu.
func (s *Shard) takeBlock(ctx context.Context, size int) (int, error) {
	leases := s.opts.Client.CoordinationV1().Leases(s.opts.Namespace)
	for b := 0; b*BlockSize < size; b++ {
		if slices.Contains(s.blocks, b) {
			continue
		}
		name := blockLeaseName(s.opts.Group, b)
		_, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.opts.Namespace},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(s.opts.Identity)}}, metav1.CreateOptions{})
		if err == nil {
			return b, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return 0, fmt.Errorf("shards: taking block %d of the address plan (Lease %s/%s): %w", b, s.opts.Namespace, name, err)
		}
		lease, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return 0, fmt.Errorf("shards: reading block %d of the address plan (Lease %s/%s): %w", b, s.opts.Namespace, name, err)
		}
		if ptr.Deref(lease.Spec.HolderIdentity, "") == s.opts.Identity {
			return b, nil
		}
	}
	return 0, fmt.Errorf("shards: every block of the address plan's %d indexes is taken", size)
}
