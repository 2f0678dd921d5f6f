package status

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// A held pod's statuses wait, SetAndWait does not block on them, and Reconnect publishes the
// latest against what the API holds by then.
func TestHeldUntilReconnect(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	// A pod of a connected node, whose publication shows that the held pod's turn has passed.
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "ns", UID: "u2"}}
	client := fake.NewClientset(pod.DeepCopy(), other.DeepCopy())
	var held atomic.Bool
	held.Store(true)
	m, err := New(Options{Client: OneClient(client.CoreV1()), Held: func(uid types.UID) bool { return uid == pod.UID && held.Load() }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Run(ctx, 1) // one writer, first in first out

	withMessage := *pod.Status.DeepCopy()
	withMessage.Message = "written while cut off"
	waitCtx, waitCancel := context.WithTimeout(ctx, 5*time.Second)
	defer waitCancel()
	if err := m.SetAndWait(waitCtx, pod, withMessage); err != nil {
		t.Fatalf("SetAndWait on a held pod = %v, want it to return at once", err)
	}
	if err := m.SetAndWait(waitCtx, other, corev1.PodStatus{Phase: corev1.PodRunning}); err != nil {
		t.Fatalf("SetAndWait on a connected pod: %v", err)
	}
	if n := patches(client); n != 1 {
		t.Fatalf("%d status patches sent, want only the connected pod's: none for the held pod", n)
	}

	// Meanwhile the node lifecycle controller marked the pod not ready.
	apiPod := pod.DeepCopy()
	apiPod.Status.Conditions[0].Status = corev1.ConditionFalse
	held.Store(false)
	m.Reconnect(apiPod)
	deadline := time.Now().Add(5 * time.Second)
	for patches(client) == 1 {
		if time.Now().After(deadline) {
			t.Fatal("no status patch after Reconnect")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var patch string
	for _, a := range client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			patch = string(p.GetPatch())
		}
	}
	for _, want := range []string{`"message":"written while cut off"`, `"status":"True"`} {
		if !strings.Contains(patch, want) {
			t.Errorf("patch after Reconnect = %s, want it to contain %s (the latest status against the API's)", patch, want)
		}
	}
}

func patches(c *fake.Clientset) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == "patch" {
			n++
		}
	}
	return n
}

// A container reader sees every Set and the Forget of its pod, and a pod set again after it was
// forgotten, though it reads the status only when the pod's changed.
func TestContainerReaderIsCurrent(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}}
	m, err := New(Options{Client: OneClient(fake.NewClientset().CoreV1())})
	if err != nil {
		t.Fatal(err)
	}
	running := func(id string, started bool, at time.Time) corev1.PodStatus {
		return corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "other", ContainerID: "containerd://other"},
			{Name: "app", ContainerID: "containerd://" + id, Started: &started,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}}}}}
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	read := m.ContainerReader(pod.UID, "app")
	readSidecar := m.ContainerReader(pod.UID, "agent")
	check := func(step string, wantPhase corev1.PodPhase, want ContainerView, wantOK bool) {
		t.Helper()
		for range 2 { // the second read is the kept one
			if phase, v, ok := read(); phase != wantPhase || v != want || ok != wantOK {
				t.Fatalf("%s: read = %q, %+v, %t; want %q, %+v, %t", step, phase, v, ok, wantPhase, want, wantOK)
			}
		}
	}

	check("before any status", "", ContainerView{}, false)
	m.Set(pod, running("a", false, t0))
	check("first status", corev1.PodRunning, ContainerView{ID: "containerd://a", Running: true, StartedAt: t0}, true)
	m.Set(pod, running("a", true, t0))
	check("started", corev1.PodRunning, ContainerView{ID: "containerd://a", Running: true, Started: true, StartedAt: t0}, true)
	exited := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "app", ContainerID: "containerd://a",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}},
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "agent", ContainerID: "containerd://s"}}}
	m.Set(pod, exited)
	check("exited", corev1.PodRunning, ContainerView{ID: "containerd://a"}, true)
	if phase, v, ok := readSidecar(); phase != corev1.PodRunning || v.ID != "containerd://s" || !ok {
		t.Fatalf("init container: read = %q, %+v, %t; want its instance s", phase, v, ok)
	}
	m.Set(pod, corev1.PodStatus{Phase: corev1.PodPending})
	check("no container status", corev1.PodPending, ContainerView{}, false)
	m.Set(pod, running("b", false, t0.Add(time.Minute)))
	check("a new instance", corev1.PodRunning, ContainerView{ID: "containerd://b", Running: true, StartedAt: t0.Add(time.Minute)}, true)
	m.Forget(pod.UID)
	check("forgotten", "", ContainerView{}, false)
	m.Set(pod, running("c", true, t0.Add(2*time.Minute)))
	check("set again", corev1.PodRunning, ContainerView{ID: "containerd://c", Running: true, Started: true, StartedAt: t0.Add(2 * time.Minute)}, true)
}
