package fakekubelet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/restartbed/restartbed/fakekubelet/restart"
)

// PodScheduled reasons and messages, as kube-scheduler writes them.
const (
	reasonSchedulingGated  = "SchedulingGated"
	messageSchedulingGated = "Scheduling is blocked due to non-empty scheduling gates"
)

// binder is restartbed's scheduler: it binds each pending pod to the feasible node with the
// fewest pods (ties by name), or marks it Unschedulable with kube-scheduler's message. A pod that
// did not fit is tried again whenever a node or a bound pod changes, as the scheduler moves its
// unschedulable pods back to the active queue on cluster events.
type binder struct {
	client kubernetes.Interface
	pods   corelisters.PodLister
	nodes  corelisters.NodeLister
	fit    *fitChecker
	clock  clock.PassiveClock
	queue  workqueue.TypedRateLimitingInterface[types.NamespacedName]
	events *events

	mu sync.Mutex
	// bound holds the requests of the non-terminal pods on each node by UID: from the informer,
	// and from our own bindings before the informer reports them, so two pods never take the
	// same room.
	bound map[string]map[types.UID]corev1.ResourceList
	// waiting are the pods that fit nowhere at their last try.
	waiting map[types.NamespacedName]bool
}

func newBinder(client kubernetes.Interface, factory informers.SharedInformerFactory, fit *fitChecker, clk clock.WithTicker, ev *events) *binder {
	b := &binder{
		events: ev,
		client: client,
		pods:   factory.Core().V1().Pods().Lister(),
		nodes:  factory.Core().V1().Nodes().Lister(),
		fit:    fit,
		clock:  clk,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "restartbed-binder", Clock: clk}),
		bound:   map[string]map[types.UID]corev1.ResourceList{},
		waiting: map[types.NamespacedName]bool{},
	}
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { b.observePod(obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { b.observePod(obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				b.forget(pod)
			}
		},
	})
	_, _ = factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { b.retryWaiting() },
		UpdateFunc: func(old, cur any) { b.nodeChanged(old.(*corev1.Node), cur.(*corev1.Node)) },
	})
	return b
}

// schedulable reports whether restartbed's scheduler owns the pod's placement.
func schedulable(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil &&
		(pod.Spec.SchedulerName == "" || pod.Spec.SchedulerName == corev1.DefaultSchedulerName)
}

func (b *binder) observePod(pod *corev1.Pod) {
	switch {
	case schedulable(pod):
		b.queue.Add(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
	case pod.Spec.NodeName != "" && !restart.IsTerminal(pod.Status.Phase):
		b.mu.Lock()
		b.track(pod)
		b.mu.Unlock()
	case pod.Spec.NodeName != "":
		b.forget(pod) // terminal: its room is free
	}
}

// track records a pod as occupying its node; b.mu is held.
func (b *binder) track(pod *corev1.Pod) {
	on := b.bound[pod.Spec.NodeName]
	if on == nil {
		on = map[types.UID]corev1.ResourceList{}
		b.bound[pod.Spec.NodeName] = on
	}
	if _, known := on[pod.UID]; !known {
		on[pod.UID] = podRequests(pod)
	}
}

func (b *binder) forget(pod *corev1.Pod) {
	b.mu.Lock()
	_, had := b.bound[pod.Spec.NodeName][pod.UID]
	delete(b.bound[pod.Spec.NodeName], pod.UID)
	delete(b.waiting, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
	b.mu.Unlock()
	if had {
		b.retryWaiting()
	}
}

// nodeChanged retries waiting pods when something the filters read changed; a heartbeat alone
// (conditions' times) changes nothing a pod could fit on.
func (b *binder) nodeChanged(old, cur *corev1.Node) {
	if old.Spec.Unschedulable != cur.Spec.Unschedulable || !slices.EqualFunc(old.Spec.Taints, cur.Spec.Taints, taintsEqual) ||
		!labels.Equals(old.Labels, cur.Labels) || !equalResources(old.Status.Allocatable, cur.Status.Allocatable) ||
		!slices.Equal(old.Status.DeclaredFeatures, cur.Status.DeclaredFeatures) {
		b.retryWaiting()
	}
}

func taintsEqual(a, b corev1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value }

func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if other, ok := b[name]; !ok || q.Cmp(other) != 0 {
			return false
		}
	}
	return true
}

func (b *binder) retryWaiting() {
	b.mu.Lock()
	keys := make([]types.NamespacedName, 0, len(b.waiting))
	for key := range b.waiting {
		keys = append(keys, key)
	}
	b.mu.Unlock()
	for _, key := range keys {
		b.queue.Add(key)
	}
}

// binderWorkers bind pods concurrently: placement is decided under b.mu (each decision sees the
// pods the previous ones assumed), only the Bind requests overlap.
const binderWorkers = 8

func (b *binder) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		b.queue.ShutDown()
	}()
	var wg sync.WaitGroup
	for range binderWorkers {
		wg.Go(func() {
			for b.next(ctx) {
			}
		})
	}
	wg.Wait()
}

func (b *binder) next(ctx context.Context) bool {
	key, shutdown := b.queue.Get()
	if shutdown {
		return false
	}
	defer b.queue.Done(key)
	if err := b.schedule(ctx, key); err != nil && ctx.Err() == nil {
		klog.FromContext(ctx).Error(err, "Scheduling failed; will retry", "pod", key)
		b.queue.AddRateLimited(key)
	} else {
		b.queue.Forget(key)
	}
	return true
}

// schedule places one pod, or records why it cannot be placed.
func (b *binder) schedule(ctx context.Context, key types.NamespacedName) error {
	pod, err := b.pods.Pods(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) || (err == nil && !schedulable(pod)) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(pod.Spec.SchedulingGates) > 0 {
		return b.markUnscheduled(ctx, pod, reasonSchedulingGated, messageSchedulingGated)
	}
	nodes, err := b.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	slices.SortFunc(nodes, func(x, y *corev1.Node) int { return strings.Compare(x.Name, y.Name) })

	requests := podRequests(pod)
	b.mu.Lock()
	var (
		chosen  *corev1.Node
		fewest  int
		reasons = map[string][]string{}
	)
	for _, n := range nodes {
		var used nodeUsage
		for _, r := range b.bound[n.Name] {
			used.addRequests(r)
		}
		if why := b.fit.fitRequests(pod, requests, n, used); len(why) > 0 {
			reasons[n.Name] = why
			continue
		}
		if chosen == nil || int(used.pods) < fewest {
			chosen, fewest = n, int(used.pods)
		}
	}
	if chosen == nil {
		b.waiting[key] = true
		b.mu.Unlock()
		message := unschedulableMessage(len(nodes), reasons)
		if !unschedulableSays(pod, message) {
			b.events.scheduler.Eventf(pod, corev1.EventTypeWarning, eventFailedScheduling, "%s", message)
		}
		return b.markUnscheduled(ctx, pod, corev1.PodReasonUnschedulable, message)
	}
	delete(b.waiting, key)
	assumed := pod.DeepCopy()
	assumed.Spec.NodeName = chosen.Name
	b.track(assumed)
	b.mu.Unlock()

	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: chosen.Name},
	}
	if err := b.client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		b.forget(assumed)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // deleted or bound meanwhile; the informer tells the rest
		}
		return fmt.Errorf("binding pod %s to node %s: %w", key, chosen.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Bound pod", "pod", klog.KObj(pod), "node", klog.KObj(chosen))
	b.events.scheduler.Eventf(pod, corev1.EventTypeNormal, eventScheduled, "Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, chosen.Name)
	return nil
}

// unschedulableSays reports whether the pod already shows it is unschedulable for that message.
func unschedulableSays(pod *corev1.Pod, message string) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && c.Message == message {
			return true
		}
	}
	return false
}

// markUnscheduled sets PodScheduled=False with the reason and message, unless it already says so.
func (b *binder) markUnscheduled(ctx context.Context, pod *corev1.Pod, reason, message string) error {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == reason && c.Message == message {
			return nil
		}
	}
	updated := pod.DeepCopy()
	condition := corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: message,
		LastTransitionTime: metav1.NewTime(b.clock.Now()),
	}
	replaced := false
	for i, c := range updated.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			if c.Status == corev1.ConditionFalse {
				condition.LastTransitionTime = c.LastTransitionTime
			}
			updated.Status.Conditions[i] = condition
			replaced = true
		}
	}
	if !replaced {
		updated.Status.Conditions = append(updated.Status.Conditions, condition)
	}
	_, err := b.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // the next informer event brings the pod back
	}
	return err
}
