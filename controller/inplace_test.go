package controller

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

func pod(attempt string, restartCounts ...int32) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
	if attempt != "" {
		p.Annotations[jobsetv1alpha2.InPlaceRestartAttemptKey] = attempt
	}
	for _, rc := range restartCounts {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{RestartCount: rc})
	}
	return p
}

// inPlaceJobSet has replicated Jobs of replicas × parallelism (completions = parallelism).
func inPlaceJobSet(maxRestarts int32, shapes ...[2]int32) *jobsetv1alpha2.JobSet {
	js := &jobsetv1alpha2.JobSet{Spec: jobsetv1alpha2.JobSetSpec{FailurePolicy: &jobsetv1alpha2.FailurePolicy{
		MaxRestarts: maxRestarts, RestartStrategy: jobsetv1alpha2.InPlaceRestart}}}
	for _, s := range shapes {
		js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, jobsetv1alpha2.ReplicatedJob{Name: "rj", Replicas: s[0],
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Parallelism: ptr.To(s[1]), Completions: ptr.To(s[1])}}})
	}
	return js
}

func TestMaxContainerRestartCount(t *testing.T) {
	withInit := pod("", 5)
	withInit.Status.InitContainerStatuses = []corev1.ContainerStatus{{RestartCount: 10}}
	for name, tc := range map[string]struct {
		pods []corev1.Pod
		want int32
	}{
		"single pod single container":       {[]corev1.Pod{pod("", 5)}, 5},
		"multiple pods multiple containers": {[]corev1.Pod{pod("", 1, 3), pod("", 2, 4)}, 4},
		"init containers":                   {[]corev1.Pod{withInit}, 10},
		"no pods":                           {nil, 0},
	} {
		if got := viewOf(tc.pods).restartCount; got != tc.want {
			t.Errorf("%s: %d, want %d", name, got, tc.want)
		}
	}
}

// viewOf tallies pods as the pod watch does, each a pod of its own.
func viewOf(pods []corev1.Pod) inPlaceView {
	t := newPodTally()
	for i := range pods {
		p := pods[i].DeepCopy()
		p.UID = types.UID(strconv.Itoa(i))
		t.add(p)
	}
	return t.view()
}

// The attempts are those of the pods that are not Failed and have one, as upstream's
// parseInPlaceRestartAttempts reads them, counted and told apart.
func TestInPlaceRestartAttempts(t *testing.T) {
	failed := pod("1")
	failed.Status.Phase = corev1.PodFailed
	for name, tc := range map[string]struct {
		pods      []corev1.Pod
		want      []int32
		annotated int32
		wantErr   bool
	}{
		"valid annotations":     {pods: []corev1.Pod{pod("0"), pod("1")}, want: []int32{0, 1}, annotated: 2},
		"the same attempt":      {pods: []corev1.Pod{pod("1"), pod("1"), pod("0")}, want: []int32{0, 1}, annotated: 3},
		"missing annotations":   {pods: []corev1.Pod{pod(""), pod("1")}, want: []int32{1}, annotated: 1},
		"invalid integer":       {pods: []corev1.Pod{pod("invalid")}, wantErr: true},
		"negative":              {pods: []corev1.Pod{pod("-1")}, wantErr: true},
		"failed pod is skipped": {pods: []corev1.Pod{pod("1"), failed}, want: []int32{1}, annotated: 1},
		"no pods":               {},
	} {
		v := viewOf(tc.pods)
		if (v.err != nil) != tc.wantErr {
			t.Errorf("%s: error %v", name, v.err)
		}
		if v.err == nil && (!cmp.Equal(v.attempts, tc.want) || v.annotated != tc.annotated) {
			t.Errorf("%s: %v of %d pods, want %v of %d", name, v.attempts, v.annotated, tc.want, tc.annotated)
		}
	}
}

func TestExceededMaxRestarts(t *testing.T) {
	for _, tc := range []struct {
		max, restarts, counted int32
		attempts               []int32
		want                   bool
	}{
		{1, 0, 0, []int32{1, 2}, true},
		{2, 0, 0, []int32{1, 2}, false},
		{1, 1, 1, []int32{1, 2}, true},
		{2, 1, 1, []int32{1, 2}, false},
		{1, 2, 1, []int32{2, 3}, true},  // 3-(2-1) = 2 > 1
		{1, 2, 1, []int32{1, 2}, false}, // 2-1 = 1
	} {
		js := inPlaceJobSet(tc.max)
		js.Status.Restarts, js.Status.RestartsCountTowardsMax = tc.restarts, tc.counted
		if got := exceededMaxRestarts(js, tc.attempts); got != tc.want {
			t.Errorf("max %d restarts %d/%d attempts %v: %t, want %t", tc.max, tc.restarts, tc.counted, tc.attempts, got, tc.want)
		}
	}
}

func TestTotalPods(t *testing.T) {
	if n, err := totalPods(inPlaceJobSet(1, [2]int32{2, 2}, [2]int32{1, 3})); err != nil || n != 7 {
		t.Errorf("total %d, %v; want 7", n, err)
	}
	unequal := inPlaceJobSet(1, [2]int32{1, 2})
	unequal.Spec.ReplicatedJobs[0].Template.Spec.Completions = ptr.To[int32](3)
	nilCompletions := inPlaceJobSet(1, [2]int32{1, 2})
	nilCompletions.Spec.ReplicatedJobs[0].Template.Spec.Completions = nil
	for name, js := range map[string]*jobsetv1alpha2.JobSet{"completions != parallelism": unequal, "nil completions": nilCompletions} {
		if _, err := totalPods(js); err == nil || err.Error() != "rj: in-place restart requires jobTemplate.spec.completions == jobTemplate.spec.parallelism != nil" {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestAllEqual(t *testing.T) {
	for _, tc := range []struct {
		values []int32
		want   bool
	}{{nil, false}, {[]int32{3}, true}, {[]int32{1, 1, 1}, true}, {[]int32{1, 2}, false}} {
		if got := allEqual(tc.values); got != tc.want {
			t.Errorf("%v: %t", tc.values, got)
		}
	}
}

func TestUpdateCurrentAndPrevious(t *testing.T) {
	for _, tc := range []struct {
		before   *int32
		attempts []int32
		after    *int32
	}{
		{ptr.To[int32](0), []int32{1, 1}, ptr.To[int32](1)},
		{ptr.To[int32](1), []int32{1, 1}, ptr.To[int32](1)},
		{nil, []int32{0, 0}, ptr.To[int32](0)},
	} {
		st := jobsetv1alpha2.JobSetStatus{CurrentInPlaceRestartAttempt: tc.before}
		if updateCurrent(&st, tc.attempts); !cmp.Equal(st.CurrentInPlaceRestartAttempt, tc.after) {
			t.Errorf("current %v + %v: %v, want %v", tc.before, tc.attempts, st.CurrentInPlaceRestartAttempt, tc.after)
		}
	}
	for _, tc := range []struct {
		before   *int32
		attempts []int32
		after    *int32
	}{
		{ptr.To[int32](0), []int32{2, 1}, ptr.To[int32](1)},
		{ptr.To[int32](1), []int32{2, 1}, ptr.To[int32](1)},
		{ptr.To[int32](1), []int32{1}, ptr.To[int32](1)},
		{nil, nil, nil},
		{nil, []int32{0, 1}, ptr.To[int32](0)},
	} {
		st := jobsetv1alpha2.JobSetStatus{PreviousInPlaceRestartAttempt: tc.before}
		if updatePrevious(&st, tc.attempts); !cmp.Equal(st.PreviousInPlaceRestartAttempt, tc.after) {
			t.Errorf("previous %v + %v: %v, want %v", tc.before, tc.attempts, st.PreviousInPlaceRestartAttempt, tc.after)
		}
	}
}

// TestReconcileInPlaceRestart mirrors upstream's table (pkg/controllers/in_place_restart_test.go).
func TestReconcileInPlaceRestart(t *testing.T) {
	for _, tc := range []struct {
		name        string
		js          *jobsetv1alpha2.JobSet
		pods        []corev1.Pod
		wantFailed  bool
		wantCurrent *int32
		wantPrev    *int32
	}{
		{name: "a container exceeded max restarts", js: inPlaceJobSet(1, [2]int32{1, 1}), pods: []corev1.Pod{pod("", 2)}, wantFailed: true},
		{name: "a pod attempt exceeded max restarts", js: inPlaceJobSet(1, [2]int32{1, 1}), pods: []corev1.Pod{pod("2")}, wantFailed: true},
		{name: "first sync", js: inPlaceJobSet(3, [2]int32{2, 1}), pods: []corev1.Pod{pod("0"), pod("0")}, wantCurrent: ptr.To[int32](0)},
		{name: "sync after the first restart", js: withStatus(inPlaceJobSet(3, [2]int32{2, 1}), ptr.To[int32](0), ptr.To[int32](0)),
			pods: []corev1.Pod{pod("1"), pod("1")}, wantCurrent: ptr.To[int32](1), wantPrev: ptr.To[int32](0)},
		{name: "waiting: no pods", js: inPlaceJobSet(3, [2]int32{2, 1})},
		{name: "waiting: one pod without annotation", js: inPlaceJobSet(3, [2]int32{2, 1}), pods: []corev1.Pod{pod("")}},
		{name: "waiting: one annotated, one not", js: inPlaceJobSet(3, [2]int32{2, 1}), pods: []corev1.Pod{pod("0"), pod("")}},
		{name: "waiting: two pods without annotations", js: inPlaceJobSet(3, [2]int32{2, 1}), pods: []corev1.Pod{pod(""), pod("")}},
		{name: "in sync, one pod just restarted", js: withStatus(inPlaceJobSet(3, [2]int32{2, 1}), ptr.To[int32](0), nil),
			pods: []corev1.Pod{pod("0"), pod("1")}, wantCurrent: ptr.To[int32](0), wantPrev: ptr.To[int32](0)},
		{name: "in sync at 1, one pod just restarted", js: withStatus(inPlaceJobSet(3, [2]int32{2, 1}), ptr.To[int32](1), ptr.To[int32](0)),
			pods: []corev1.Pod{pod("1"), pod("2")}, wantCurrent: ptr.To[int32](1), wantPrev: ptr.To[int32](1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			failed, err := reconcileInPlaceRestart(tc.js, viewOf(tc.pods))
			if err != nil {
				t.Fatal(err)
			}
			if failed != tc.wantFailed {
				t.Errorf("failed %t, want %t", failed, tc.wantFailed)
			}
			if !tc.wantFailed && (!cmp.Equal(tc.js.Status.CurrentInPlaceRestartAttempt, tc.wantCurrent) || !cmp.Equal(tc.js.Status.PreviousInPlaceRestartAttempt, tc.wantPrev)) {
				t.Errorf("current %v previous %v, want %v %v", tc.js.Status.CurrentInPlaceRestartAttempt, tc.js.Status.PreviousInPlaceRestartAttempt, tc.wantCurrent, tc.wantPrev)
			}
		})
	}
}

func withStatus(js *jobsetv1alpha2.JobSet, current, previous *int32) *jobsetv1alpha2.JobSet {
	js.Status.CurrentInPlaceRestartAttempt, js.Status.PreviousInPlaceRestartAttempt = current, previous
	return js
}

// TestJobSetPods mirrors upstream's TestGetAssociatedPods: the JobSet counts its own pods and no
// others, and a pod's changes move it between attempts, JobSets and out.
func TestJobSetPods(t *testing.T) {
	labelled := func(uid, namespace, jobset, attempt string) *corev1.Pod {
		p := pod(attempt)
		p.UID, p.Namespace = types.UID(uid), namespace
		if jobset != "" {
			p.Labels = map[string]string{jobsetv1alpha2.JobSetNameKey: jobset}
		}
		return &p
	}
	js := types.NamespacedName{Namespace: "ns", Name: "js"}
	c := newChildren()
	for _, p := range []*corev1.Pod{labelled("mine", "ns", "js", "0"), labelled("mine too", "ns", "js", "0"),
		labelled("other", "ns", "js2", "5"), labelled("elsewhere", "ns2", "js", "6"), labelled("bare", "ns", "", "7")} {
		c.setPod(nil, p)
	}
	check := func(step string, want []int32, annotated int32) {
		t.Helper()
		if v := c.inPlaceView(js); !cmp.Equal(v.attempts, want) || v.annotated != annotated {
			t.Errorf("%s: attempts %v of %d pods, want %v of %d", step, v.attempts, v.annotated, want, annotated)
		}
	}
	check("its pods", []int32{0}, 2)
	c.setPod(labelled("mine", "ns", "js", "0"), labelled("mine", "ns", "js", "1"))
	check("one pod at the next attempt", []int32{0, 1}, 2)
	c.setPod(labelled("mine too", "ns", "js", "0"), labelled("mine too", "ns", "js2", "0"))
	check("the other pod relabelled", []int32{1}, 1)
	c.setPod(labelled("mine", "ns", "js", "1"), nil)
	check("the pod deleted", nil, 0)
	if _, ok := c.pods[js]; ok {
		t.Errorf("a tally for %s, which has no pods left: a JobSet without pods is forgotten", js)
	}
}

// sameError compares errors by their messages.
var sameError = cmp.Comparer(func(a, b error) bool { return (a == nil) == (b == nil) && (a == nil || a.Error() == b.Error()) })

// However a JobSet's pods change, the tally says what a tally of its pods made afresh says.
func TestPodTallyFollowsChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	live := map[types.UID]*corev1.Pod{}
	tally := newPodTally()
	for step := range 5000 {
		uid := types.UID(strconv.Itoa(rng.IntN(20)))
		if rng.IntN(5) == 0 {
			tally.remove(uid)
			delete(live, uid)
		} else {
			attempt := []string{"", "0", "1", "2", "x"}[rng.IntN(5)]
			p := pod(attempt, int32(rng.IntN(4)), int32(rng.IntN(4)))
			p.UID = uid
			if rng.IntN(6) == 0 {
				p.Status.Phase = corev1.PodFailed
			}
			tally.add(&p)
			live[uid] = &p
		}
		fresh := newPodTally()
		for _, p := range live {
			fresh.add(p)
		}
		if got, want := tally.view(), fresh.view(); !cmp.Equal(got, want, cmp.AllowUnexported(inPlaceView{}), sameError) {
			t.Fatalf("step %d: tally %+v, afresh %+v", step, got, want)
		}
	}
}

// A pod's update reconciles its JobSet only when it changes what the in-place restart reads.
func TestInPlaceInputsChanged(t *testing.T) {
	base := pod("1", 2, 0)
	base.Labels = map[string]string{jobsetv1alpha2.JobSetNameKey: "js"}
	base.Status.Phase = corev1.PodRunning
	cases := []struct {
		name   string
		change func(p *corev1.Pod)
		want   bool
	}{
		{name: "nothing", change: func(*corev1.Pod) {}, want: false},
		{name: "a container turns ready", change: func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Ready = true }, want: false},
		{name: "a condition", change: func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
		}, want: false},
		{name: "another annotation", change: func(p *corev1.Pod) { p.Annotations["x"] = "y" }, want: false},
		{name: "the attempt", change: func(p *corev1.Pod) { p.Annotations[jobsetv1alpha2.InPlaceRestartAttemptKey] = "2" }, want: true},
		{name: "the attempt goes", change: func(p *corev1.Pod) { delete(p.Annotations, jobsetv1alpha2.InPlaceRestartAttemptKey) }, want: true},
		{name: "a restart count", change: func(p *corev1.Pod) { p.Status.ContainerStatuses[1].RestartCount = 1 }, want: true},
		{name: "an init container's restart count", change: func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{RestartCount: 0}}
		}, want: true},
		{name: "the pod fails", change: func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, want: true},
		{name: "the pod succeeds", change: func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, want: false},
		{name: "the JobSet label", change: func(p *corev1.Pod) { p.Labels[jobsetv1alpha2.JobSetNameKey] = "other" }, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			updated := base.DeepCopy()
			tc.change(updated)
			if got := inPlaceInputsChanged(&base, updated); got != tc.want {
				t.Errorf("inPlaceInputsChanged = %v, want %v", got, tc.want)
			}
		})
	}
}
