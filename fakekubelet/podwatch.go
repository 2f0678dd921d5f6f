package fakekubelet

import (
	"context"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
)

// This file is where the kubelet's pods come from: the apiserver's watch of pods, into one store
// the pod workers, the kubelet API and the volume refresh read (podStore's indexes). A kubelet
// that runs its own nodes watches every pod of the cluster once, which costs the apiserver one
// watch and the kubelet the pods it does not run. A shard watches the pods of each node it runs,
// as each real kubelet watches its own (a field selector on spec.nodeName), so that what the
// apiserver sends a shard grows with its own nodes, not with the cluster; a node's watch starts
// when the shard takes the node over and stops when it lets go, and the node's pods leave the
// store once their workers have forgotten them.

// The store's indexes.
const (
	// uidIndex: runtime events name pods by UID.
	uidIndex = "restartbed-uid"
	// nodeIndex: the node a pod is bound to.
	nodeIndex = "restartbed-node"
)

// podIndexers are the pod store's indexes.
func podIndexers() cache.Indexers {
	return cache.Indexers{uidIndex: func(obj any) ([]string, error) {
		return []string{string(obj.(*corev1.Pod).UID)}, nil
	}, nodeIndex: podsByNode, sourceIndex: podSources}
}

// podWatch feeds the pod store from the apiserver and counts what the apiserver sent.
type podWatch struct {
	store cache.Indexer
	// events counts the pod events received: adds, updates and deletes, the initial lists' too.
	events atomic.Uint64
	// onPod is told of every event, once the store has it.
	onPod func(obj any)

	// For a shard: each node's watch, and what it needs to start one: the client, and run,
	// which runs a watch's goroutine as one of the kubelet's.
	client kubernetes.Interface
	run    func(func())
	mu     sync.Mutex
	nodes  map[string]context.CancelFunc
}

// watchAllPods feeds the store from one watch of every pod of the cluster, the factory's.
func watchAllPods(factory informers.SharedInformerFactory) (*podWatch, error) {
	informer := factory.Core().V1().Pods().Informer()
	if err := informer.AddIndexers(podIndexers()); err != nil {
		return nil, err
	}
	return &podWatch{store: informer.GetIndexer()}, nil
}

// watchNodesPods makes a store that a watch per node feeds (watchNode).
func watchNodesPods(client kubernetes.Interface, run func(func())) *podWatch {
	return &podWatch{store: cache.NewIndexer(cache.MetaNamespaceKeyFunc, podIndexers()), client: client, run: run,
		nodes: map[string]context.CancelFunc{}}
}

// handle is the event handler of a watch: it counts the event, applies it to the pod store when
// fill says the watch's informer is not the store's own (a node's watch), then tells onPod.
func (w *podWatch) handle(fill bool) cache.ResourceEventHandlerFuncs {
	apply := func(obj any, op func(any) error) {
		w.events.Add(1)
		if fill {
			_ = op(obj) // a store of objects with a namespace and name fails on none
		}
		w.onPod(obj)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { apply(obj, w.store.Add) },
		UpdateFunc: func(_, obj any) { apply(obj, w.store.Update) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			apply(obj, w.store.Delete)
		},
	}
}

// watchNode starts the watch of the pods bound to the node, if it has none, until stopNode or
// ctx's end. Pods left in the store from an earlier watch of the node leave it first: what the
// apiserver has now comes with the watch's list.
func (w *podWatch) watchNode(ctx context.Context, node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.nodes[node]; ok {
		return
	}
	w.forget(node)
	selector := fields.OneTermEqualSelector("spec.nodeName", node).String()
	informer := coreinformers.NewFilteredPodInformer(w.client, metav1.NamespaceAll, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.FieldSelector = selector })
	_ = informer.SetTransform(crcache.TransformStripManagedFields()) // fails only once started
	_, _ = informer.AddEventHandler(w.handle(true))                  // fails only once stopped
	ctx, cancel := context.WithCancel(ctx)
	w.nodes[node] = cancel
	w.run(func() { informer.RunWithContext(ctx) })
}

// stopNode stops the watch of the node's pods. Its pods stay in the store until forgetNode.
func (w *podWatch) stopNode(node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cancel, ok := w.nodes[node]; ok {
		cancel()
		delete(w.nodes, node)
	}
}

// forgetNode takes the pods of a node that is not watched out of the store.
func (w *podWatch) forgetNode(node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, watched := w.nodes[node]; !watched {
		w.forget(node)
	}
}

func (w *podWatch) forget(node string) {
	objs, _ := w.store.ByIndex(nodeIndex, node) // fails only for an index the store lacks
	for _, obj := range objs {
		_ = w.store.Delete(obj)
	}
}

// PodWatch says what the apiserver's pod watches brought the kubelet: the events it received
// (adds, updates and deletes, the initial lists' included) and the pods it holds now. A shard's
// grow with its own nodes' pods; another kubelet's with the cluster's.
func (k *Kubelet) PodWatch() (events uint64, pods int) {
	if k.pods == nil {
		return 0, 0
	}
	return k.pods.watch.events.Load(), len(k.pods.watch.store.ListKeys())
}
