package fakekubelet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
// over only its share of the managed nodes and releases a node the group's rule gives another;
// it names itself in the node's shards.NodeAnnotation before it takes the node over, clears it
// once it has let go, and waits for the shard named there to do so (package shards).

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
		if err := k.declareGroupNodes(ctx); err != nil {
			return err
		}
		relayAddr, err := k.serveRelay(ctx)
		if err != nil {
			return err
		}
		shard, err := shards.New(shards.Options{Client: k.client, Group: s.Group, Identity: s.Identity, Namespace: s.Namespace,
			LeaseDuration: s.LeaseDuration, Takeover: s.Takeover, Clock: k.clock, Relay: relayAddr,
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
			var wait handOver
			switch err := k.syncManaged(ctx, name); {
			case errors.As(err, &wait):
				// A shard still runs it (another, or this one tearing its pods down): the
				// annotation's change requeues the node, and so does the wait.
				logger.V(4).Info("Waiting for the node's hand-over", "node", klog.KRef("", name), "shard", wait.holder, "recheck", wait.wait)
				queue.Forget(name)
				queue.AddAfter(name, wait.wait)
			case err != nil && ctx.Err() == nil:
				logger.Error(err, "Taking over a node failed; will retry", "node", klog.KRef("", name))
				queue.AddRateLimited(name)
			default:
				queue.Forget(name)
			}
			queue.Done(name)
		}
	})
	return nil
}

// declareGroupNodes creates the nodes of the shard's group (Options.Pools) that do not exist
// yet, as a provisioner declares them; the group's shards create them alike, and a node another
// shard created first is left as it is.
func (k *Kubelet) declareGroupNodes(ctx context.Context) error {
	for _, spec := range k.groupNodes {
		if _, err := k.nodeLister.Get(spec.Name); err == nil {
			continue
		}
		_, err := k.client.CoreV1().Nodes().Create(ctx, nodes.Declared(spec), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("fakekubelet: declaring the group's node %s: %w", spec.Name, err)
		}
	}
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
		if k.shard != nil {
			if node, err = k.claim(ctx, node); err != nil {
				return err
			}
		}
		return k.adopt(ctx, node)
	case !wanted && have != nil && have.Adopted():
		k.letGo(ctx, name)
	}
	if k.shard != nil && !wanted && k.nodes.Get(name) == nil {
		return k.unclaim(ctx, name, node)
	}
	return nil
}

// handOver is syncManaged's answer while a shard, holder, still runs the node (another, until it
// lets go or its Lease runs out; this one, until its pods are torn down), or while the node
// changed under a write of the annotation: ask again after wait.
type handOver struct {
	holder string
	wait   time.Duration
}

func (h handOver) Error() string {
	return fmt.Sprintf("shard %q has not let go of the node; asking again in %s", h.holder, h.wait)
}

// claim names this shard in the node's shards.NodeAnnotation, once the shard named there, if
// any, has let go, and gives the node a pod range of the address plan if it has none, for its
// pods' addresses to be unique among the shards (shardnet.go). The write is conditional on the
// node as read, so that of two shards that read it free only one takes it. It returns the node
// as written.
func (k *Kubelet) claim(ctx context.Context, node *corev1.Node) (*corev1.Node, error) {
	holder := node.Annotations[shards.NodeAnnotation]
	if free, wait := k.shard.Free(holder); !free {
		return nil, handOver{holder: holder, wait: wait}
	}
	if holder == k.shard.Identity() && node.Spec.PodCIDR != "" {
		return node, nil
	}
	if node.Spec.PodCIDR != "" {
		return k.annotateShard(ctx, node, k.shard.Identity(), netip.Prefix{})
	}
	index, err := k.shard.AllocateIndex(ctx, nodes.MaxNodes, k.planIndexUsed)
	if err != nil {
		return nil, err
	}
	written, err := k.annotateShard(ctx, node, k.shard.Identity(), nodes.PlanCIDR(index))
	if err != nil {
		k.shard.ReleaseIndex(index)
	}
	return written, err
}

// unclaim finishes letting go of a node this shard does not run (node: as the API has it, nil
// once deleted), once its pods are torn down — until then their workers may still write their
// status: their pods leave the store, and this shard's name leaves the node's annotation, for
// the next shard to take it.
func (k *Kubelet) unclaim(ctx context.Context, name string, node *corev1.Node) error {
	for _, pod := range k.pods.onNode(name) {
		if k.pods.known(pod.UID) != nil {
			return handOver{holder: k.shard.Identity(), wait: handOverPoll}
		}
	}
	k.pods.watch.forgetNode(name)
	if node == nil || node.DeletionTimestamp != nil || node.Annotations[shards.NodeAnnotation] != k.shard.Identity() {
		return nil
	}
	_, err := k.annotateShard(ctx, node, "", netip.Prefix{})
	return err
}

// handOverPoll is how soon a shard looks again at a node it is handing over or taking over when
// nothing else will tell it: its pods are being torn down, or the node changed under its write.
const handOverPoll = 100 * time.Millisecond

// annotateShard sets the node's shards.NodeAnnotation to identity ("" removes it) and, when
// podCIDR is valid, its pod range, if the node has not changed since it was read. It returns the
// node as written.
func (k *Kubelet) annotateShard(ctx context.Context, node *corev1.Node, identity string, podCIDR netip.Prefix) (*corev1.Node, error) {
	value := any(identity)
	if identity == "" {
		value = nil
	}
	change := map[string]any{"metadata": map[string]any{
		"resourceVersion": node.ResourceVersion,
		"annotations":     map[string]any{shards.NodeAnnotation: value},
	}}
	if podCIDR.IsValid() {
		change["spec"] = map[string]any{"podCIDR": podCIDR.String(), "podCIDRs": []string{podCIDR.String()}}
	}
	patch, err := json.Marshal(change)
	if err != nil {
		return nil, err
	}
	written, err := k.client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsConflict(err) {
		// The node changed since it was read (another shard's write, a heartbeat): read again.
		return nil, handOver{holder: node.Annotations[shards.NodeAnnotation], wait: handOverPoll}
	}
	if err != nil {
		return nil, fmt.Errorf("naming the node's shard (%s=%q): %w", shards.NodeAnnotation, identity, err)
	}
	return written, nil
}

// adopt takes the node over: its address on the pod network and its kubelet API first, so that
// the apiserver reaches it as soon as its status says where, then the node's status and Lease,
// then the pods already bound to it.
func (k *Kubelet) adopt(ctx context.Context, node *corev1.Node) error {
	// A shard's node is on the pod network at its pod range's first address: the range is
	// the node's across the shards; the plan's address by index is only this process's.
	n, err := k.nodes.Prepare(node, nodes.Spec{Capacity: DefaultCapacity(), OnPodCIDR: k.shard != nil})
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
	if k.shard != nil {
		// Its pods come with the watch's list.
		k.pods.watch.watchNode(ctx, n.Name())
	}
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
	if k.shard != nil {
		// Its pods stay in the store for their workers to tear down; unclaim forgets them.
		k.pods.watch.stopNode(name)
	}
	k.images.ForgetNode(name) // a node adopted again under the name is another machine
	k.events.forgetNode(name)
	for _, pod := range k.pods.onNode(name) {
		k.pods.queue.Add(pod.UID)
	}
	klog.FromContext(ctx).V(2).Info("Released node", "node", klog.KRef("", name))
}
