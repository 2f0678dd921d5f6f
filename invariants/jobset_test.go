package invariants

import (
	"slices"
	"strconv"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// history builds the objects of one JobSet in sidecar mode, with resourceVersions in the order
// the changes are made, as the apiserver stores them.
type history struct {
	rv   int
	base time.Time
}

func (h *history) next() string { h.rv++; return strconv.Itoa(h.rv) }

func (h *history) jobSet(current, previous *int32) *unstructured.Unstructured {
	return h.jobSetWith(func(js *jobsetv1alpha2.JobSet) {
		js.Status.CurrentInPlaceRestartAttempt, js.Status.PreviousInPlaceRestartAttempt = current, previous
	})
}

// jobSetWith is the JobSet, restarting in place with maxRestarts 10, as edit leaves it.
func (h *history) jobSetWith(edit func(*jobsetv1alpha2.JobSet)) *unstructured.Unstructured {
	js := &jobsetv1alpha2.JobSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: jobsetv1alpha2.GroupVersion.String(), Kind: "JobSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "js", ResourceVersion: h.next()},
		Spec:       jobsetv1alpha2.JobSetSpec{FailurePolicy: &jobsetv1alpha2.FailurePolicy{RestartStrategy: jobsetv1alpha2.InPlaceRestart, MaxRestarts: 10}},
	}
	edit(js)
	return toUnstructured(js)
}

// failed makes the JobSet failed with the reason.
func failed(js *jobsetv1alpha2.JobSet, reason string) {
	js.Status.TerminalState = string(jobsetv1alpha2.JobSetFailed)
	js.Status.Conditions = []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetFailed), Status: metav1.ConditionTrue, Reason: reason}}
}

// failedJob is the JobSet's Job of replicated Job rjob, created at JobSet restart attempt, failed
// with reason.
func (h *history) failedJob(attempt int, reason string) *unstructured.Unstructured {
	return toUnstructured(&batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "js-rjob-0", ResourceVersion: h.next(), Labels: map[string]string{
			jobsetv1alpha2.JobSetNameKey: "js", jobsetv1alpha2.ReplicatedJobNameKey: "rjob", jobsetv1alpha2.RestartsKey: strconv.Itoa(attempt)}},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason}}},
	})
}

// pod is pod i at an attempt; its agent and worker have restarted restarts times, the worker
// running since second started (or terminated with code exit at second started when exit >= 0).
func (h *history) pod(i, attempt int, restarts int32, started int, exit int32) *unstructured.Unstructured {
	at := metav1.NewTime(h.base.Add(time.Duration(started) * time.Second))
	worker := corev1.ContainerStatus{Name: "worker", RestartCount: restarts, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}}}
	if exit >= 0 {
		worker.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, FinishedAt: at}}
	}
	if restarts > 0 {
		worker.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: metav1.NewTime(at.Add(-time.Second))}}
	}
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p" + strconv.Itoa(i), UID: types.UID("uid-" + strconv.Itoa(i)), ResourceVersion: h.next(),
			Labels:      map[string]string{jobsetv1alpha2.JobSetNameKey: "js"},
			Annotations: map[string]string{jobsetv1alpha2.InPlaceRestartAttemptKey: strconv.Itoa(attempt)}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "agent", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
			Containers:     []corev1.Container{{Name: "worker"}},
		},
		Status: corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "agent", RestartCount: restarts, LastTerminationState: worker.LastTerminationState,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(h.base)}}}},
			ContainerStatuses: []corev1.ContainerStatus{worker},
		},
	}
	return toUnstructured(p)
}

// waitingPod is pod i at an attempt, its agent running after restarts restarts and its worker
// waiting at the barrier, never started.
func (h *history) waitingPod(i, attempt int, restarts int32) *unstructured.Unstructured {
	u := h.pod(i, attempt, restarts, 0, -1)
	statuses, _, _ := unstructured.NestedSlice(u.Object, "status", "containerStatuses")
	worker := statuses[0].(map[string]any)
	worker["state"] = map[string]any{"waiting": map[string]any{"reason": "PodInitializing"}}
	worker["restartCount"] = int64(0)
	delete(worker, "lastState")
	_ = unstructured.SetNestedSlice(u.Object, statuses, "status", "containerStatuses")
	return u
}

// node is node name, Ready or not.
func (h *history) node(name string, ready bool) *unstructured.Unstructured {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return toUnstructured(&corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: h.next()},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}},
	})
}

// on binds the pod to the node; deleting also marks it for deletion.
func on(u *unstructured.Unstructured, node string, deleting bool) *unstructured.Unstructured {
	_ = unstructured.SetNestedField(u.Object, node, "spec", "nodeName")
	if deleting {
		u.SetDeletionTimestamp(ptr.To(metav1.Now()))
	}
	return u
}

func toUnstructured(obj any) *unstructured.Unstructured {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func invariantsOf(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Invariant)
	}
	return out
}

// run feeds the changes, then finishes, and returns the broken invariants in order, with
// Recovers when the JobSets are left unsettled.
func run(changes ...*unstructured.Unstructured) []string {
	c := NewJobSetInPlace()
	var got []string
	lost := false
	for _, u := range changes {
		switch {
		case u == nil: // the JobSets' watch breaks; the next JobSet change is lost
			c.WatchBroke("JobSet")
			lost = true
		case lost && u.GetKind() == "JobSet":
			lost = false
		default:
			got = append(got, invariantsOf(c.Observe("MODIFIED", u))...)
		}
	}
	if c.Unsettled() != "" {
		got = append(got, Recovers)
	}
	return append(got, invariantsOf(c.Finish())...)
}

func TestJobSetInPlace(t *testing.T) {
	zero, one := ptr.To[int32](0), ptr.To[int32](1)
	for _, tc := range []struct {
		name    string
		changes func(h *history) []*unstructured.Unstructured
		want    []string
	}{
		{"a group restart as the protocol makes it", func(h *history) []*unstructured.Unstructured {
			return []*unstructured.Unstructured{
				h.jobSet(zero, nil), h.pod(0, 0, 0, 0, -1), h.pod(1, 0, 0, 0, -1),
				h.pod(0, 0, 0, 5, 3),                       // pod 0's worker fails
				h.pod(0, 1, 1, 6, 0), h.jobSet(zero, zero), // it restarts; the controller desyncs
				h.pod(1, 1, 1, 7, 0), h.jobSet(one, zero), // pod 1 restarts; the sync point
				h.pod(0, 1, 1, 8, -1), h.pod(1, 1, 1, 8, -1), // both workers run at attempt 1
			}
		}, nil},
		{"a worker runs before the JobSet reached its attempt", func(h *history) []*unstructured.Unstructured {
			return []*unstructured.Unstructured{
				h.jobSet(zero, nil), h.pod(0, 0, 0, 0, -1), h.pod(1, 0, 0, 0, -1),
				h.pod(0, 0, 0, 5, 3), h.pod(0, 1, 1, 6, 0),
				h.pod(0, 1, 1, 6, -1),                      // pod 0's worker runs at attempt 1, current still 0
				h.pod(1, 1, 1, 10, 0), h.jobSet(one, zero), // pod 1 restarts (at 9) after it
			}
		}, []string{Barrier, GroupRestart, Recovers}},
		{"a worker runs again while another pod never restarts", func(h *history) []*unstructured.Unstructured {
			return []*unstructured.Unstructured{
				h.jobSet(zero, nil), h.pod(0, 0, 0, 0, -1), h.pod(1, 0, 0, 0, -1),
				h.pod(0, 0, 0, 5, 3), h.pod(0, 0, 1, 6, -1),
			}
		}, []string{GroupRestart, Recovers}},
		{"a group restart that never finishes", func(h *history) []*unstructured.Unstructured {
			return []*unstructured.Unstructured{
				h.jobSet(zero, nil), h.pod(0, 0, 0, 0, -1), h.pod(1, 0, 0, 0, -1),
				h.pod(0, 0, 0, 5, 3), h.pod(0, 1, 1, 6, 0), h.jobSet(zero, zero),
			}
		}, []string{Recovers}},
		{"the JobSet version the barrier needs was lost in a watch gap", func(h *history) []*unstructured.Unstructured {
			return []*unstructured.Unstructured{
				h.jobSet(zero, nil), h.pod(0, 0, 0, 0, -1), h.pod(1, 0, 0, 0, -1),
				h.pod(0, 0, 0, 5, 3), h.pod(0, 1, 1, 6, 0), h.pod(1, 1, 1, 6, 0),
				nil,                                          // the JobSets' watch breaks
				h.jobSet(one, zero),                          // never observed: written while the watch was down
				h.pod(0, 1, 1, 7, -1), h.pod(1, 1, 1, 7, -1), // both workers run at attempt 1
				h.jobSet(one, zero), // what the watch lists when it is back
			}
		}, nil},
		{"a pod stranded Terminating on a lost node", func(h *history) []*unstructured.Unstructured {
			return []*unstructured.Unstructured{
				h.node("n0", true), h.node("n1", true),
				h.jobSet(zero, nil), on(h.pod(0, 0, 0, 0, -1), "n0", false), on(h.pod(1, 0, 0, 0, -1), "n1", false),
				h.node("n0", false), on(h.pod(0, 0, 0, 0, -1), "n0", true), // evicted; its node never answers
			}
		}, nil},
		{"the lost node is back and the group does not run", func(h *history) []*unstructured.Unstructured {
			return []*unstructured.Unstructured{
				h.node("n0", true), h.node("n1", true),
				h.jobSet(zero, nil), on(h.pod(0, 0, 0, 0, -1), "n0", false), on(h.pod(1, 0, 0, 0, -1), "n1", false),
				h.node("n0", false), on(h.pod(0, 0, 0, 0, -1), "n0", true),
				h.node("n0", true), // its pod could end now
			}
		}, []string{Recovers}},
		{"a pod lost before its group first ran", func(h *history) []*unstructured.Unstructured {
			return []*unstructured.Unstructured{
				h.node("n0", true), h.node("n1", true), h.node("n2", true), h.node("n3", true),
				h.jobSet(nil, nil), on(h.waitingPod(0, 0, 0), "n0", false), on(h.waitingPod(1, 0, 0), "n1", false),
				h.node("n1", false), on(h.waitingPod(1, 0, 0), "n1", true), // its node lost at the barrier
				on(h.waitingPod(2, 0, 0), "n2", false), h.jobSet(zero, nil), // its replacement joins: the sync point
				on(h.pod(0, 0, 0, 10, -1), "n0", false), on(h.pod(2, 0, 0, 10, -1), "n2", false), // the group's first start
			}
		}, nil},
		{"a pod lost once its group ran, and the others never restart", func(h *history) []*unstructured.Unstructured {
			return []*unstructured.Unstructured{
				h.node("n0", true), h.node("n1", true), h.node("n2", true), h.node("n3", true),
				h.jobSet(zero, nil), on(h.pod(0, 0, 0, 0, -1), "n0", false), on(h.pod(1, 0, 0, 0, -1), "n1", false),
				h.node("n1", false), on(h.pod(1, 0, 0, 0, -1), "n1", true),
				on(h.waitingPod(2, 1, 0), "n2", false), h.jobSet(one, zero), // a controller that lifts the barrier early
				on(h.pod(2, 1, 0, 10, -1), "n2", false), // pod 0 still runs at attempt 0
			}
		}, []string{GroupRestart}}, // recovers is not judged: pod 1 is stranded on its lost node
		{"a group restart while a pod waits at the barrier", func(h *history) []*unstructured.Unstructured {
			return []*unstructured.Unstructured{
				h.jobSet(zero, nil), h.pod(0, 0, 0, 0, -1), h.waitingPod(1, 0, 0),
				h.pod(0, 0, 0, 5, 3), h.pod(0, 1, 1, 6, 0), h.jobSet(zero, zero),
				h.waitingPod(1, 1, 1), h.jobSet(one, zero), // only its agent restarts: its worker never ran
				h.pod(0, 1, 1, 8, -1), h.pod(1, 1, 0, 8, -1), // the worker's first start counts no restart
			}
		}, nil},
		{"a pod at the barrier lets its worker through a group restart", func(h *history) []*unstructured.Unstructured {
			return []*unstructured.Unstructured{
				h.jobSet(zero, nil), h.pod(0, 0, 0, 0, -1), h.waitingPod(1, 0, 0),
				h.pod(0, 0, 0, 5, 3), h.pod(0, 1, 1, 6, 0), h.jobSet(zero, zero),
				h.pod(1, 0, 0, 7, -1), // its agent never restarted: its worker runs at the old attempt
			}
		}, []string{GroupRestart, Recovers}},
		{"an attempt goes back", func(h *history) []*unstructured.Unstructured {
			return []*unstructured.Unstructured{h.jobSet(one, zero), h.jobSet(zero, zero)}
		}, []string{AttemptsMonotonic, Recovers}}, // and it has no pod
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &history{base: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
			got := run(tc.changes(h)...)
			slices.Sort(got)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("broken %v, want %v", got, want)
			}
		})
	}
}

func TestFailsByPolicy(t *testing.T) {
	maxOne := func(js *jobsetv1alpha2.JobSet) { js.Spec.FailurePolicy.MaxRestarts = 1 }
	running := func(js *jobsetv1alpha2.JobSet) { js.Status.CurrentInPlaceRestartAttempt = ptr.To[int32](0) }
	for _, tc := range []struct {
		name    string
		changes func(h *history) []*unstructured.Unstructured
		want    []string
	}{
		{"a container restarted past maxRestarts fails the JobSet", func(h *history) []*unstructured.Unstructured {
			return []*unstructured.Unstructured{
				h.jobSetWith(maxOne), h.pod(0, 2, 2, 0, -1),
				h.jobSetWith(func(js *jobsetv1alpha2.JobSet) { maxOne(js); failed(js, reasonReachedMaxRestarts) }),
			}
		}, nil},
		{"the JobSet fails within maxRestarts", func(h *history) []*unstructured.Unstructured {
			return []*unstructured.Unstructured{
				h.jobSetWith(maxOne), h.pod(0, 1, 1, 0, -1),
				h.jobSetWith(func(js *jobsetv1alpha2.JobSet) { maxOne(js); failed(js, reasonReachedMaxRestarts) }),
			}
		}, []string{FailsByPolicy}},
		{"a container past maxRestarts and the JobSet never fails", func(h *history) []*unstructured.Unstructured {
			return []*unstructured.Unstructured{h.jobSetWith(maxOne), h.pod(0, 0, 2, 0, -1)}
		}, []string{Recovers}},
		{"a failed Job with the counted restarts at maxRestarts fails the JobSet", func(h *history) []*unstructured.Unstructured {
			return []*unstructured.Unstructured{
				h.jobSetWith(func(js *jobsetv1alpha2.JobSet) {
					maxOne(js)
					js.Status.Restarts, js.Status.RestartsCountTowardsMax = 1, 1
				}),
				h.failedJob(1, "BackoffLimitExceeded"),
				h.jobSetWith(func(js *jobsetv1alpha2.JobSet) {
					maxOne(js)
					js.Status.Restarts, js.Status.RestartsCountTowardsMax = 1, 1
					failed(js, reasonReachedMaxRestarts)
				}),
			}
		}, nil},
		{"a restart counted after a failed Job", func(h *history) []*unstructured.Unstructured {
			return []*unstructured.Unstructured{
				h.jobSetWith(running), h.pod(0, 0, 0, 0, -1), h.failedJob(0, "PodFailurePolicy"),
				h.jobSetWith(func(js *jobsetv1alpha2.JobSet) {
					running(js)
					js.Status.Restarts, js.Status.RestartsCountTowardsMax = 1, 1
				}),
			}
		}, nil},
		{"an in-place restart counted as a JobSet restart", func(h *history) []*unstructured.Unstructured {
			return []*unstructured.Unstructured{
				h.jobSetWith(running), h.pod(0, 0, 0, 0, -1),
				h.jobSetWith(func(js *jobsetv1alpha2.JobSet) {
					running(js)
					js.Status.Restarts, js.Status.RestartsCountTowardsMax = 1, 1
				}),
			}
		}, []string{FailsByPolicy}},
		{"a FailJobSet rule that matches", func(h *history) []*unstructured.Unstructured {
			rule := func(js *jobsetv1alpha2.JobSet) {
				js.Spec.FailurePolicy.Rules = []jobsetv1alpha2.FailurePolicyRule{{Name: "fatal", Action: jobsetv1alpha2.FailJobSet, OnJobFailureReasons: []string{"PodFailurePolicy"}}}
			}
			return []*unstructured.Unstructured{
				h.jobSetWith(rule), h.failedJob(0, "PodFailurePolicy"),
				h.jobSetWith(func(js *jobsetv1alpha2.JobSet) { rule(js); failed(js, reasonFailJobSetAction) }),
			}
		}, nil},
		{"a FailJobSet rule that matches no failed Job", func(h *history) []*unstructured.Unstructured {
			rule := func(js *jobsetv1alpha2.JobSet) {
				js.Spec.FailurePolicy.Rules = []jobsetv1alpha2.FailurePolicyRule{{Name: "fatal", Action: jobsetv1alpha2.FailJobSet, OnJobFailureReasons: []string{"PodFailurePolicy"}}}
			}
			return []*unstructured.Unstructured{
				h.jobSetWith(rule), h.failedJob(0, "BackoffLimitExceeded"),
				h.jobSetWith(func(js *jobsetv1alpha2.JobSet) { rule(js); failed(js, reasonFailJobSetAction) }),
			}
		}, []string{FailsByPolicy}},
		{"FailedJobs with a failure policy", func(h *history) []*unstructured.Unstructured {
			return []*unstructured.Unstructured{
				h.jobSetWith(func(*jobsetv1alpha2.JobSet) {}), h.failedJob(0, "BackoffLimitExceeded"),
				h.jobSetWith(func(js *jobsetv1alpha2.JobSet) { failed(js, reasonFailedJobs) }),
			}
		}, []string{FailsByPolicy}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &history{base: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
			if got := run(tc.changes(h)...); !slices.Equal(got, tc.want) {
				t.Errorf("broken %v, want %v", got, tc.want)
			}
		})
	}
}
