package failurerecovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Kueue's names (pkg/controller/constants, pkg/constants, the controller's own).
const (
	// AnnotationSafeToForcefullyDelete opts a pod in when its value is exactly "true".
	AnnotationSafeToForcefullyDelete = "kueue.x-k8s.io/safe-to-forcefully-delete"
	// AnnotationSafeToForcefullyTerminate is v0.15.0's name for it, as KEP-6757 still writes
	// it; restartbed accepts it too (Kueue v0.15.6 and later do not).
	AnnotationSafeToForcefullyTerminate = "kueue.x-k8s.io/safe-to-forcefully-terminate"
	annotationValue                     = "true"

	// ConditionType and Reason are the pod condition written before the delete; Reason is also
	// the Warning event's.
	ConditionType corev1.PodConditionType = "KueueFailureRecovery"
	Reason        string                  = "KueueForcefullyDeleted"

	// ControllerName names the controller; EventSource is the component of its events.
	ControllerName = "failure-recovery-pod-termination-controller"
	EventSource    = "kueue-pod-termination-controller"

	// DefaultThreshold is how long after the deletionTimestamp a pod is failed.
	DefaultThreshold = time.Minute

	// nodeNameField indexes pods by spec.nodeName, to find a node's pods when it turns unreachable.
	nodeNameField = "spec.nodeName"
)

// Reconciler fails and deletes pods stuck terminating on unreachable nodes.
type Reconciler struct {
	client    client.Client
	recorder  record.EventRecorder
	clock     clock.PassiveClock
	threshold time.Duration
}

// Options configure a Reconciler.
type Options struct {
	// Client reads pods and nodes and writes pods. Required.
	Client client.Client
	// Recorder records the Warning event of each forceful deletion. Required.
	Recorder record.EventRecorder
	// Clock is what the threshold is measured on. Default: the real clock.
	Clock clock.PassiveClock
	// Threshold is how long after its deletionTimestamp a pod is failed and deleted. Default:
	// DefaultThreshold, Kueue's.
	Threshold time.Duration
}

// New returns a Reconciler, or what is wrong with opts.
func New(opts Options) (*Reconciler, error) {
	switch {
	case opts.Client == nil:
		return nil, errors.New("failurerecovery: Options.Client is required")
	case opts.Recorder == nil:
		return nil, errors.New("failurerecovery: Options.Recorder is required")
	case opts.Threshold < 0:
		return nil, fmt.Errorf("failurerecovery: the threshold must not be negative, got %v", opts.Threshold)
	}
	r := &Reconciler{client: opts.Client, recorder: opts.Recorder, clock: opts.Clock, threshold: opts.Threshold}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	if r.threshold == 0 {
		r.threshold = DefaultThreshold
	}
	return r, nil
}

// optInAnnotation returns the annotation by which the pod opted in, or "".
func optInAnnotation(p *corev1.Pod) string {
	for _, key := range []string{AnnotationSafeToForcefullyDelete, AnnotationSafeToForcefullyTerminate} {
		if p.Annotations[key] == annotationValue {
			return key
		}
	}
	return ""
}

// eligible: the pod opted in and is being deleted. Its phase does not matter (Kueue includes
// terminal pods since v0.16.7/v0.17.2: they too may be stuck behind a dead kubelet).
func eligible(p *corev1.Pod) bool {
	return optInAnnotation(p) != "" && p.DeletionTimestamp != nil
}

var (
	_ predicate.TypedPredicate[*corev1.Pod]  = (*Reconciler)(nil)
	_ predicate.TypedPredicate[*corev1.Node] = NodePredicate{}
)

// Pod events: a pod that is eligible when first seen, or that becomes eligible.

func (r *Reconciler) Create(e event.TypedCreateEvent[*corev1.Pod]) bool { return eligible(e.Object) }
func (r *Reconciler) Update(e event.TypedUpdateEvent[*corev1.Pod]) bool {
	return !eligible(e.ObjectOld) && eligible(e.ObjectNew)
}
func (r *Reconciler) Delete(event.TypedDeleteEvent[*corev1.Pod]) bool   { return false }
func (r *Reconciler) Generic(event.TypedGenericEvent[*corev1.Pod]) bool { return false }

// NodePredicate passes a node that is created unreachable or becomes unreachable (the taint's
// key, any effect): its eligible pods are checked again, since a pod whose threshold passed while
// its node was still reachable was left alone.
type NodePredicate struct{}

func unreachable(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeUnreachable })
}

func (NodePredicate) Create(e event.TypedCreateEvent[*corev1.Node]) bool {
	return unreachable(e.Object)
}
func (NodePredicate) Update(e event.TypedUpdateEvent[*corev1.Node]) bool {
	return !unreachable(e.ObjectOld) && unreachable(e.ObjectNew)
}
func (NodePredicate) Delete(event.TypedDeleteEvent[*corev1.Node]) bool   { return false }
func (NodePredicate) Generic(event.TypedGenericEvent[*corev1.Node]) bool { return false }

var _ reconcile.Reconciler = (*Reconciler)(nil)

// Reconcile fails and deletes the pod if it is eligible, its threshold has passed and its node is
// unreachable; it requeues for the threshold, and otherwise waits for the node watch.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := ctrl.LoggerFrom(ctx)
	pod := &corev1.Pod{}
	if err := r.client.Get(ctx, req.NamespacedName, pod); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !eligible(pod) {
		return ctrl.Result{}, nil
	}
	now := r.clock.Now()
	due := pod.DeletionTimestamp.Add(r.threshold)
	if now.Before(due) {
		return ctrl.Result{RequeueAfter: due.Sub(now)}, nil
	}
	node := &corev1.Node{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, node); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err) // a node that is gone is pod GC's
	}
	if !unreachable(node) {
		logger.V(4).Info("Threshold passed, but the pod's node is reachable", "node", klog.KObj(node))
		return ctrl.Result{}, nil
	}

	// Kueue converts the grace seconds to a Duration without a unit, so 30 s reads as 30 ns:
	// "1m0.00000003s". Users see that message; restartbed shows the same.
	total := time.Duration(ptr.Deref(pod.DeletionGracePeriodSeconds, 0)) + r.threshold
	message := fmt.Sprintf("Pod forcefully terminated after %s grace period due to unreachable node `%s` (triggered by `%s` annotation)",
		total, node.Name, optInAnnotation(pod))
	condition := corev1.PodCondition{Type: ConditionType, Status: corev1.ConditionTrue, Reason: Reason, Message: message}

	patched := pod.DeepCopy()
	if patched.Status.Phase != corev1.PodFailed && patched.Status.Phase != corev1.PodSucceeded {
		patched.Status.Phase = corev1.PodFailed
	}
	conditionChanged := upsertCondition(&patched.Status, condition, r.clock.Now())
	if conditionChanged || patched.Status.Phase != pod.Status.Phase {
		if err := r.client.Status().Patch(ctx, patched, client.MergeFrom(pod)); err != nil {
			return ctrl.Result{}, err
		}
	}
	if conditionChanged {
		r.recorder.Event(patched, corev1.EventTypeWarning, Reason, message)
	}
	logger.V(2).Info("Forcefully deleting a pod stuck on an unreachable node", "pod", klog.KObj(pod), "node", klog.KObj(node))
	if err := r.client.Delete(ctx, patched, client.GracePeriodSeconds(0)); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, nil
}

// podsOf maps an unreachable node to its eligible pods.
func (r *Reconciler) podsOf(ctx context.Context, node *corev1.Node) []ctrl.Request {
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.MatchingFields{nodeNameField: node.Name}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the pods of an unreachable node", "node", klog.KObj(node))
		return nil
	}
	var reqs []ctrl.Request
	for i := range pods.Items {
		if p := &pods.Items[i]; eligible(p) {
			reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		}
	}
	return reqs
}

// SetupWithManager registers the controller and its spec.nodeName index with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, nodeNameField, func(o client.Object) []string {
		if name := o.(*corev1.Pod).Spec.NodeName; name != "" {
			return []string{name}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing pods by node: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("pod_termination_controller").
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.Pod{}, &handler.TypedEnqueueRequestForObject[*corev1.Pod]{}, r)).
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.Node{}, handler.TypedEnqueueRequestsFromMapFunc(r.podsOf), NodePredicate{})).
		WithOptions(crcontroller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(r)
}

// upsertCondition sets the condition in status, as the pod status helpers of the controllers
// do: a new condition, or one whose status changes, gets now as its transition time; one whose
// status stays keeps its time and takes the new reason and message. It reports whether anything
// changed.
func upsertCondition(status *corev1.PodStatus, condition corev1.PodCondition, now time.Time) bool {
	condition.LastTransitionTime = metav1.NewTime(now)
	i := slices.IndexFunc(status.Conditions, func(c corev1.PodCondition) bool { return c.Type == condition.Type })
	if i < 0 {
		status.Conditions = append(status.Conditions, condition)
		return true
	}
	old := status.Conditions[i]
	if old.Status == condition.Status {
		condition.LastTransitionTime = old.LastTransitionTime
	}
	status.Conditions[i] = condition
	return old.Status != condition.Status || old.Reason != condition.Reason || old.Message != condition.Message ||
		!old.LastProbeTime.Equal(&condition.LastProbeTime)
}
