package podgc

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func pod(name, node string, phase corev1.PodPhase, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0)},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: phase},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func deleting(p *corev1.Pod) {
	p.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	p.Finalizers = []string{"example.com/keep"} // a terminating pod stays in the tracker
}

func node(name string, ready corev1.ConditionStatus, taintKeys ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
	for _, k := range taintKeys {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoExecute})
	}
	return n
}

// removal is what pod GC did to one pod: the phase it patched (empty: no patch) and whether the
// patch carried the orphan's condition, then the delete.
type removal struct {
	Phase      corev1.PodPhase
	Disruption bool
}

// harness runs passes of a Controller on a fake clientset and reports what it did per pod.
type harness struct {
	t      *testing.T
	client *fake.Clientset
	clock  *testingclock.FakeClock
	c      *Controller
}

func newHarness(t *testing.T, threshold int, objs ...runtime.Object) *harness {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	clk := testingclock.NewFakeClock(t0)
	c, err := New(Options{Client: client, Pods: factory.Core().V1().Pods(), Nodes: factory.Core().V1().Nodes(),
		Clock: clk, Period: 20 * time.Second, Quarantine: 40 * time.Second, TerminatedThreshold: &threshold})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return &harness{t: t, client: client, clock: clk, c: c}
}

// pass runs one pass at the clock's time and returns what it did, by pod name.
func (h *harness) pass() map[string]removal {
	h.t.Helper()
	h.client.ClearActions()
	h.c.Pass(context.Background())
	got := map[string]removal{}
	for _, a := range h.client.Actions() {
		switch a := a.(type) {
		case k8stesting.PatchAction:
			patch := string(a.GetPatch())
			r := got[a.GetName()]
			if strings.Contains(patch, `"phase":"Failed"`) {
				r.Phase = corev1.PodFailed
			}
			r.Disruption = strings.Contains(patch, ReasonDeletionByPodGC) && strings.Contains(patch, MessageNodeGone)
			got[a.GetName()] = r
		case k8stesting.DeleteAction:
			if a.GetResource().Resource != "pods" {
				continue
			}
			if _, ok := got[a.GetName()]; !ok {
				got[a.GetName()] = removal{}
			}
		}
	}
	return got
}

func TestPass(t *testing.T) {
	cases := map[string]struct {
		objs      []runtime.Object
		threshold int
		want      map[string]removal
	}{
		"a running pod on a ready node stays": {
			objs: []runtime.Object{node("n", corev1.ConditionTrue), pod("p", "n", corev1.PodRunning)},
			want: map[string]removal{},
		},
		"a terminating pod on an unreachable node stays (KEP-6757's gap)": {
			objs: []runtime.Object{node("n", corev1.ConditionUnknown, corev1.TaintNodeUnreachable),
				pod("p", "n", corev1.PodRunning, deleting)},
			want: map[string]removal{},
		},
		"a terminating pod on a not-ready out-of-service node is failed and deleted": {
			objs: []runtime.Object{node("n", corev1.ConditionFalse, corev1.TaintNodeOutOfService),
				pod("p", "n", corev1.PodRunning, deleting)},
			want: map[string]removal{"p": {Phase: corev1.PodFailed}},
		},
		"out-of-service on a ready node does nothing": {
			objs: []runtime.Object{node("n", corev1.ConditionTrue, corev1.TaintNodeOutOfService),
				pod("p", "n", corev1.PodRunning, deleting)},
			want: map[string]removal{},
		},
		"a pod on an out-of-service node that is not terminating stays": {
			objs: []runtime.Object{node("n", corev1.ConditionFalse, corev1.TaintNodeOutOfService),
				pod("p", "n", corev1.PodRunning)},
			want: map[string]removal{},
		},
		"a succeeded terminating pod on an out-of-service node is deleted without a patch": {
			objs: []runtime.Object{node("n", corev1.ConditionFalse, corev1.TaintNodeOutOfService),
				pod("p", "n", corev1.PodSucceeded, deleting)},
			want: map[string]removal{"p": {}},
		},
		"an unscheduled terminating pod is failed and deleted": {
			objs: []runtime.Object{pod("p", "", corev1.PodPending, deleting)},
			want: map[string]removal{"p": {Phase: corev1.PodFailed}},
		},
		"an unscheduled pod that is not terminating stays": {
			objs: []runtime.Object{pod("p", "", corev1.PodPending)},
			want: map[string]removal{},
		},
		"terminated pods above the threshold go, evicted first, then the oldest": {
			threshold: 2,
			objs: []runtime.Object{
				pod("old", "n", corev1.PodSucceeded, func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour)) }),
				pod("new", "n", corev1.PodFailed),
				pod("evicted", "n", corev1.PodFailed, func(p *corev1.Pod) { p.Status.Reason = reasonEvicted }),
				pod("newer", "n", corev1.PodSucceeded, func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t0.Add(time.Hour)) }),
				pod("running", "n", corev1.PodRunning),
				node("n", corev1.ConditionTrue),
			},
			want: map[string]removal{"evicted": {}, "old": {}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, tc.threshold, tc.objs...)
			if diff := cmp.Diff(tc.want, h.pass()); diff != "" {
				t.Errorf("what pod GC did (-want +got):\n%s", diff)
			}
		})
	}
}

// Orphans wait out the quarantine, from the pass that first saw their node missing.
func TestOrphansAfterQuarantine(t *testing.T) {
	h := newHarness(t, 0, node("n", corev1.ConditionTrue),
		pod("orphan", "gone", corev1.PodRunning), pod("done", "gone", corev1.PodSucceeded), pod("kept", "n", corev1.PodRunning))
	for _, at := range []time.Duration{0, 20 * time.Second, 39 * time.Second} {
		h.clock.SetTime(t0.Add(at))
		if got := h.pass(); len(got) != 0 {
			t.Fatalf("at +%v, inside the quarantine, pod GC removed %v", at, got)
		}
	}
	h.clock.SetTime(t0.Add(40 * time.Second))
	want := map[string]removal{"orphan": {Phase: corev1.PodFailed, Disruption: true}, "done": {}}
	if diff := cmp.Diff(want, h.pass()); diff != "" {
		t.Errorf("after the quarantine (-want +got):\n%s", diff)
	}
	pods, err := h.client.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, p := range pods.Items {
		left = append(left, p.Name)
	}
	if !slices.Equal(left, []string{"kept"}) {
		t.Errorf("pods left = %v, want [kept]", left)
	}
}

// A node that comes back inside the quarantine saves its pods, and a later loss starts a new
// quarantine.
func TestOrphanQuarantineRestartsWhenTheNodeReturns(t *testing.T) {
	h := newHarness(t, 0, pod("p", "flaky", corev1.PodRunning))
	h.pass()
	h.clock.Step(30 * time.Second)
	if _, err := h.client.CoreV1().Nodes().Create(context.Background(), node("flaky", corev1.ConditionTrue), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, err := h.c.nodes.Get("flaky"); return err == nil })
	h.pass()
	if err := h.client.CoreV1().Nodes().Delete(context.Background(), "flaky", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, err := h.c.nodes.Get("flaky"); return err != nil })
	h.clock.Step(20 * time.Second) // 50 s after the first loss, 20 s after the second
	if got := h.pass(); len(got) != 0 {
		t.Fatalf("a node missing for 20 s lost its pods: %v", got)
	}
	h.clock.Step(40 * time.Second)
	if diff := cmp.Diff(map[string]removal{"p": {Phase: corev1.PodFailed, Disruption: true}}, h.pass()); diff != "" {
		t.Errorf("after a full quarantine (-want +got):\n%s", diff)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("the informer did not catch up within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNewRejectsMissingOptions(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	for missing, opts := range map[string]Options{
		"Pods":   {Client: client, Nodes: factory.Core().V1().Nodes(), Period: time.Second, Quarantine: time.Second},
		"Period": {Client: client, Pods: factory.Core().V1().Pods(), Nodes: factory.Core().V1().Nodes(), Quarantine: time.Second},
	} {
		if _, err := New(opts); err == nil {
			t.Errorf("New accepted options without %s", missing)
		}
	}
}
