package fakekubelet

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/restartbed/restartbed/fakekubelet/nodes"
	"github.com/restartbed/restartbed/fakekubelet/shards"
)

// This file takes over existing Node objects (Options.Manage), as KWOK's controller does: a node
// that matches is adopted when it appears or comes to match, and released when it is deleted or
// stops matching. An adopted node is a node of this kubelet like a registered one — heartbeats,
// its pods run, its kubelet API served — except that it keeps what its manifest declares
// (labels, taints, capacity, allocatable). A released node's containers are killed and forgotten
// at once, as if its machine had lost power; its pods stay in the API for the control plane to
// handle. Nodes this kubelet registered itself are never released. A shard (Options.Shard) takes
// over only its share of the managed nodes and releases a node the group's rule gives another.

// adoptRetry bounds the retries of a failed adoption: per node, 5 ms doubling to this.
const adoptRetry = 30 * time.Second

// manageNodes adopts the matching nodes as the node informer sees them, until ctx ends.
func (k *Kubelet) manageNodes(ctx context.Context, informer cache.SharedIndexInformer) error {
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, adoptRetry),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "restartbed-managed-nodes", Clock: k.clock})
	enqueue := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if node, ok := obj.(*corev1.Node); ok {
			queue.Add(node.Name)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue}); err != nil {
		return fmt.Errorf("fakekubelet: watching the nodes to manage: %w", err)
	}
	if s := k.opts.Shard; s != nil {
		shard, err := shards.New(shards.Options{Client: k.client, Group: s.Group, Identity: s.Identity, Namespace: s.Namespace,
			LeaseDuration: s.LeaseDuration, Takeover: s.Takeover, Clock: k.clock,
			// A shard that joins or leaves moves nodes: each is adopted or let go as the rule says.
			Changed: func() {
				for _, name := range informer.GetStore().ListKeys() {
					queue.Add(name)
				}
			}})
		if err != nil {
			return fmt.Errorf("fakekubelet: %w", err)
		}
		if err := shard.Start(ctx); err != nil {
			return fmt.Errorf("fakekubelet: %w", err)
		}
		k.shard = shard
		k.wg.Go(shard.Wait)
	}
	k.wg.Go(func() {
		<-ctx.Done()
		queue.ShutDown()
	})
	k.wg.Go(func() {
		logger := klog.FromContext(ctx)
		for {
			name, shutdown := queue.Get()
			if shutdown {
				return
			}
			if err := k.syncManaged(ctx, name); err != nil && ctx.Err() == nil {
				logger.Error(err, "Taking over a node failed; will retry", "node", klog.KRef("", name))
				queue.AddRateLimited(name)
			} else {
				queue.Forget(name)
			}
			queue.Done(name)
		}
	})
	return nil
}

// syncManaged adopts or releases the named node as the API has it now.
func (k *Kubelet) syncManaged(ctx context.Context, name string) error {
	node, err := k.nodeLister.Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	wanted := err == nil && node.DeletionTimestamp == nil && k.opts.Manage.Matches(node) && (k.shard == nil || k.shard.Owns(name))
	have := k.nodes.Get(name)
	switch {
	case wanted && have == nil:
		return k.adopt(ctx, node)
	case !wanted && have != nil && have.Adopted():
		k.letGo(ctx, name)
	}
	return nil
}

// adopt takes the node over: its address on the pod network and its kubelet API first, so that
// the apiserver reaches it as soon as its status says where, then the node's status and Lease,
// then the pods already bound to it.
func (k *Kubelet) adopt(ctx context.Context, node *corev1.Node) error {
	n, err := k.nodes.Prepare(node, nodes.Spec{Capacity: DefaultCapacity()})
	if err != nil {
		return err
	}
	if err := k.startKubeletConfig(n.Name()); err != nil {
		return err
	}
	serving := &nodeServing{}
	if err := k.listen(n, serving); err != nil {
		return err
	}
	if err := k.attach(n, serving); err != nil {
		serving.close()
		return err
	}
	if err := k.nodes.Adopt(ctx, n, node); err != nil {
		serving.close()
		return err
	}
	k.setServing(n.Name(), serving)
	for _, pod := range k.pods.onNode(n.Name()) {
		k.pods.queue.Add(pod.UID)
	}
	klog.FromContext(ctx).V(2).Info("Took over node", "node", klog.KObj(node), "address", n.Address(), "kubeletPort", n.KubeletPort())
	return nil
}

// letGo releases the node: its kubelet API and address are closed, and its pod workers kill and
// forget its pods' containers (a sync finds their node gone), as when a node's machine loses power.
func (k *Kubelet) letGo(ctx context.Context, name string) {
	if k.nodes.Release(name) == nil {
		return
	}
	k.closeServing(name)
	k.images.ForgetNode(name) // a node adopted again under the name is another machine
	k.events.forgetNode(name)
	for _, pod := range k.pods.onNode(name) {
		k.pods.queue.Add(pod.UID)
	}
	klog.FromContext(ctx).V(2).Info("Released node", "node", klog.KRef("", name))
}
