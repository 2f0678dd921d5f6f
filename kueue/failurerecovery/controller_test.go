package failurerecovery

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// The tables below follow Kueue's own (pod_termination_controller_test.go): the pod and node
// event filters, and Reconcile on a fake client with a fake clock.

var now = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

type podOpt func(*corev1.Pod)

func makePod(opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod", Namespace: "ns",
			Annotations: map[string]string{AnnotationSafeToForcefullyDelete: "true"},
			// Kueue's tests hold the pod with a finalizer, so that it can be read after the delete.
			Finalizers: []string{"kueue.x-k8s.io/managed"}},
		Spec:   corev1.PodSpec{NodeName: "unreachable-node"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func deletedAt(t time.Time) podOpt {
	return func(p *corev1.Pod) {
		if t.IsZero() {
			p.DeletionTimestamp = nil
			return
		}
		p.DeletionTimestamp = ptr.To(metav1.NewTime(t))
	}
}
func annotated(key, value string) podOpt {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{key: value} }
}
func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func onNode(name string) podOpt       { return func(p *corev1.Pod) { p.Spec.NodeName = name } }
func grace(seconds int64) podOpt {
	return func(p *corev1.Pod) { p.DeletionGracePeriodSeconds = ptr.To(seconds) }
}
func withCondition(c corev1.PodCondition) podOpt {
	return func(p *corev1.Pod) { p.Status.Conditions = append(p.Status.Conditions, c) }
}

func TestPodCreateFilter(t *testing.T) {
	cases := map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"annotated and marked for deletion":            {pod: makePod(deletedAt(now)), want: true},
		"the annotation is not \"true\"":               {pod: makePod(deletedAt(now), annotated(AnnotationSafeToForcefullyDelete, "false")), want: false},
		"not marked for deletion":                      {pod: makePod(), want: false},
		"v0.15.0's annotation, marked for deletion":    {pod: makePod(deletedAt(now), annotated(AnnotationSafeToForcefullyTerminate, "true")), want: true},
		"an unrelated annotation, marked for deletion": {pod: makePod(deletedAt(now), annotated("example.com/x", "true")), want: false},
	}
	r := &Reconciler{} // the predicates read nothing of the reconciler
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := r.Create(event.TypedCreateEvent[*corev1.Pod]{Object: tc.pod}); got != tc.want {
				t.Errorf("Create() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPodUpdateFilter(t *testing.T) {
	cases := map[string]struct {
		old, new *corev1.Pod
		want     bool
	}{
		"annotated and newly marked for deletion": {old: makePod(), new: makePod(deletedAt(now)), want: true},
		"already marked for deletion":             {old: makePod(deletedAt(now)), new: makePod(deletedAt(now)), want: false},
		"the updated pod is not annotated": {old: makePod(),
			new: makePod(deletedAt(now), annotated(AnnotationSafeToForcefullyDelete, "false")), want: false},
		"annotated while already marked for deletion": {old: makePod(deletedAt(now), annotated("example.com/x", "true")),
			new: makePod(deletedAt(now)), want: true},
	}
	r := &Reconciler{} // the predicates read nothing of the reconciler
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := r.Update(event.TypedUpdateEvent[*corev1.Pod]{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("Update() = %v, want %v", got, tc.want)
			}
		})
	}
}

func node(name string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints}}
}

var (
	unreachableNoExecute  = corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
	unreachableNoSchedule = corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}
	notReady              = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}
	other                 = corev1.Taint{Key: "example.com/other", Effect: corev1.TaintEffectNoSchedule}
)

func TestNodePredicate(t *testing.T) {
	cases := map[string]struct {
		old  *corev1.Node // nil: a create
		new  *corev1.Node
		want bool
	}{
		"created unreachable (NoExecute)":                  {new: node("n", unreachableNoExecute), want: true},
		"created unreachable (NoSchedule)":                 {new: node("n", unreachableNoSchedule), want: true},
		"created healthy":                                  {new: node("n"), want: false},
		"created not ready":                                {new: node("n", notReady), want: false},
		"update adds the unreachable taint":                {old: node("n"), new: node("n", unreachableNoSchedule), want: true},
		"update adds it next to another taint":             {old: node("n", other), new: node("n", other, unreachableNoExecute), want: true},
		"update keeps the unreachable taint":               {old: node("n", unreachableNoSchedule), new: node("n", unreachableNoSchedule, unreachableNoExecute), want: false},
		"update removes the unreachable taint":             {old: node("n", unreachableNoExecute), new: node("n"), want: false},
		"update adds an unrelated taint":                   {old: node("n"), new: node("n", other), want: false},
		"update from not ready to not ready + unreachable": {old: node("n", notReady), new: node("n", notReady, unreachableNoExecute), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got bool
			if tc.old == nil {
				got = NodePredicate{}.Create(event.TypedCreateEvent[*corev1.Node]{Object: tc.new})
			} else {
				got = NodePredicate{}.Update(event.TypedUpdateEvent[*corev1.Node]{ObjectOld: tc.old, ObjectNew: tc.new})
			}
			if got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if (NodePredicate{}).Delete(event.TypedDeleteEvent[*corev1.Node]{Object: node("n", unreachableNoExecute)}) {
		t.Error("a node's deletion must not trigger (pod GC owns pods of deleted nodes)")
	}
}

func message(total, annotation string) string {
	return "Pod forcefully terminated after " + total + " grace period due to unreachable node `unreachable-node` (triggered by `" + annotation + "` annotation)"
}

func TestReconcile(t *testing.T) {
	past := now.Add(-3 * time.Minute)
	cond := func(msg string) corev1.PodCondition {
		return corev1.PodCondition{Type: ConditionType, Status: corev1.ConditionTrue, Reason: Reason, Message: msg}
	}
	elapsed := message("1m0s", AnnotationSafeToForcefullyDelete)
	cases := map[string]struct {
		pod         *corev1.Pod
		wantResult  ctrl.Result
		wantPod     *corev1.Pod
		wantEvents  []string
		wantDeleted bool
	}{
		"a failed pod keeps its phase and gets the condition": {
			pod:        makePod(deletedAt(past), phase(corev1.PodFailed)),
			wantPod:    makePod(deletedAt(past), phase(corev1.PodFailed), withCondition(cond(elapsed))),
			wantEvents: []string{"Warning KueueForcefullyDeleted " + elapsed}, wantDeleted: true,
		},
		"a succeeded pod keeps its phase and gets the condition": {
			pod:        makePod(deletedAt(past), phase(corev1.PodSucceeded)),
			wantPod:    makePod(deletedAt(past), phase(corev1.PodSucceeded), withCondition(cond(elapsed))),
			wantEvents: []string{"Warning KueueForcefullyDeleted " + elapsed}, wantDeleted: true,
		},
		"the pod is not on an unreachable node": {
			pod:     makePod(deletedAt(past), onNode("healthy-node")),
			wantPod: makePod(deletedAt(past), onNode("healthy-node")),
		},
		"the threshold has not passed": {
			pod:        makePod(deletedAt(now)),
			wantResult: ctrl.Result{RequeueAfter: time.Minute},
			wantPod:    makePod(deletedAt(now)),
		},
		"the threshold has passed": {
			pod:        makePod(deletedAt(past)),
			wantPod:    makePod(deletedAt(past), phase(corev1.PodFailed), withCondition(cond(elapsed))),
			wantEvents: []string{"Warning KueueForcefullyDeleted " + elapsed}, wantDeleted: true,
		},
		"the pod's node does not exist": {
			pod:     makePod(deletedAt(past), onNode("missing-node")),
			wantPod: makePod(deletedAt(past), onNode("missing-node")),
		},
		// restartbed's additions.
		"the deletion grace shows in nanoseconds, as in Kueue": {
			pod:         makePod(deletedAt(past), grace(30)),
			wantPod:     makePod(deletedAt(past), grace(30), phase(corev1.PodFailed), withCondition(cond(message("1m0.00000003s", AnnotationSafeToForcefullyDelete)))),
			wantEvents:  []string{"Warning KueueForcefullyDeleted " + message("1m0.00000003s", AnnotationSafeToForcefullyDelete)},
			wantDeleted: true,
		},
		"v0.15.0's annotation is named in the message": {
			pod: makePod(deletedAt(past), annotated(AnnotationSafeToForcefullyTerminate, "true")),
			wantPod: makePod(deletedAt(past), annotated(AnnotationSafeToForcefullyTerminate, "true"), phase(corev1.PodFailed),
				withCondition(cond(message("1m0s", AnnotationSafeToForcefullyTerminate)))),
			wantEvents:  []string{"Warning KueueForcefullyDeleted " + message("1m0s", AnnotationSafeToForcefullyTerminate)},
			wantDeleted: true,
		},
		"a pod that did not opt in is left alone": {
			pod:     makePod(deletedAt(past), annotated(AnnotationSafeToForcefullyDelete, "false")),
			wantPod: makePod(deletedAt(past), annotated(AnnotationSafeToForcefullyDelete, "false")),
		},
		"a retry after a failed delete adds no second condition and no second event": {
			pod:         makePod(deletedAt(past), phase(corev1.PodFailed), withCondition(cond(elapsed))),
			wantPod:     makePod(deletedAt(past), phase(corev1.PodFailed), withCondition(cond(elapsed))),
			wantDeleted: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			deleted := false
			cl := fake.NewClientBuilder().WithScheme(scheme.Scheme).
				WithObjects(tc.pod, node("healthy-node"), node("unreachable-node", unreachableNoSchedule)).
				WithStatusSubresource(&corev1.Pod{}).
				WithInterceptorFuncs(interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					do := &client.DeleteOptions{}
					do.ApplyOptions(opts)
					if ptr.Deref(do.GracePeriodSeconds, -1) != 0 {
						t.Errorf("delete with grace %v, want 0", do.GracePeriodSeconds)
					}
					deleted = true
					return c.Delete(ctx, obj, opts...)
				}}).Build()
			recorder := record.NewFakeRecorder(10)
			r, err := New(Options{Client: cl, Recorder: recorder, Clock: testingclock.NewFakeClock(now)})
			if err != nil {
				t.Fatal(err)
			}

			got, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc.pod)})
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if diff := cmp.Diff(tc.wantResult, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			gotPod := &corev1.Pod{}
			if err := cl.Get(context.Background(), client.ObjectKeyFromObject(tc.pod), gotPod); err != nil {
				t.Fatalf("reading the pod back: %v", err)
			}
			opts := cmp.Options{cmpopts.EquateEmpty(),
				cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ResourceVersion", "DeletionTimestamp"),
				cmpopts.IgnoreFields(corev1.PodCondition{}, "LastTransitionTime")}
			if diff := cmp.Diff(tc.wantPod, gotPod, opts); diff != "" {
				t.Errorf("pod (-want +got):\n%s", diff)
			}
			close(recorder.Events)
			var events []string
			for e := range recorder.Events {
				events = append(events, e)
			}
			if diff := cmp.Diff(tc.wantEvents, events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if deleted != tc.wantDeleted {
				t.Errorf("deleted = %v, want %v", deleted, tc.wantDeleted)
			}
		})
	}
}

func TestNewRefusesIncompleteOptions(t *testing.T) {
	cl := fake.NewClientBuilder().Build()
	for name, tc := range map[string]struct {
		opts Options
		want string
	}{
		"no client":          {opts: Options{Recorder: record.NewFakeRecorder(1)}, want: "Options.Client is required"},
		"no recorder":        {opts: Options{Client: cl}, want: "Options.Recorder is required"},
		"negative threshold": {opts: Options{Client: cl, Recorder: record.NewFakeRecorder(1), Threshold: -time.Second}, want: "must not be negative, got -1s"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := New(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	r, err := New(Options{Client: cl, Recorder: record.NewFakeRecorder(1)})
	if err != nil {
		t.Fatal(err)
	}
	if r.threshold != DefaultThreshold || r.clock == nil {
		t.Errorf("defaults: threshold %v, clock %v; want %v and the real clock", r.threshold, r.clock, DefaultThreshold)
	}
}
