package fakekubelet

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"
)

// TestEventsQueueOnlyWhatTheSpamFilterLetsThrough records a probe failure every second on one
// pod, as a waiting agent's startup probe makes them, and wants only the spam filter's burst of
// 25 queued for writing, each a repeat of the first (its name, its count), and the 26th let
// through once the filter's next token is due (5 minutes).
func TestEventsQueueOnlyWhatTheSpamFilterLetsThrough(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
	e := &events{clock: clk, log: klog.Background(), lost: func(string) bool { return false }, byNode: map[string]*nodeEvents{},
		queue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Clock: clk})}
	defer e.queue.ShutDown()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid"}, Spec: corev1.PodSpec{NodeName: "n",
		InitContainers: []corev1.Container{{Name: "agent"}}}}
	for range 100 {
		e.container(pod, &pod.Spec.InitContainers[0], corev1.EventTypeWarning, eventUnhealthy, "Startup probe failed: %s", "refused")
		clk.Step(time.Second)
	}
	n := e.byNode["n"]
	if len(n.pending) != spamBurst {
		t.Fatalf("%d events queued, want the spam filter's burst of %d", len(n.pending), spamBurst)
	}
	first := n.pending[0].ev
	if first.Count != 1 || first.InvolvedObject.FieldPath != "spec.initContainers{agent}" || first.Source.Host != "n" || first.Namespace != "ns" {
		t.Errorf("first event %+v", first)
	}
	for i, p := range n.pending {
		if p.ev.Name != first.Name || p.ev.Count != int32(i+1) || (i > 0) != (p.correlated.Patch != nil) {
			t.Errorf("event %d: name %s count %d patch %s; want %s, %d, a patch for each repeat", i, p.ev.Name, p.ev.Count, p.correlated.Patch, first.Name, i+1)
		}
	}
	// The first is written while the others wait: its count does not set theirs back.
	written := first.DeepCopy()
	written.ResourceVersion = "7"
	n.correlator.updateState(written)
	clk.Step(5 * time.Minute)
	e.container(pod, &pod.Spec.InitContainers[0], corev1.EventTypeWarning, eventUnhealthy, "Startup probe failed: %s", "refused")
	if got := n.pending[len(n.pending)-1].ev.Count; len(n.pending) != spamBurst+1 || got != 101 {
		t.Errorf("after 5 minutes: %d queued, the last counted %d; want %d, 101", len(n.pending), got, spamBurst+1)
	}
}
