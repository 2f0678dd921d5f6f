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
