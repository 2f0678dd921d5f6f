package fakekubelet

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
)

// TestCorrelatorAsClientGo feeds restartbed's correlator and client-go's the same random events
// (repeats, messages that differ so that they combine, several objects on two kubelets, so many
// of them that the caches forget, the clock moving by up to ten minutes, writes the apiserver
// answers) and wants the same verdict, event and patch from both every time. Each kubelet has a
// correlator of each kind, as each has its own recorder.
func TestCorrelatorAsClientGo(t *testing.T) {
	type kubelet struct {
		ours    *correlator
		theirs  *record.EventCorrelator
		objects sets.Set[string] // the spam filter's keys it has seen
	}
	for seed := range uint64(10) {
		// The last two seeds have so many pods that every cache fills and forgets.
		pods, steps := 3, 2000
		if seed >= 8 {
			pods, steps = 12000, 30000
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 1))
			clk := testingclock.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
			kubelets := map[string]*kubelet{}
			for _, host := range hosts {
				kubelets[host] = &kubelet{ours: newCorrelator(clk, corev1.EventSource{Component: "kubelet", Host: host}),
					theirs: record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{Clock: clk}), objects: sets.New[string]()}
			}
			rv, fresh := 0, 0
			skipped, patched, combined := 0, 0, 0

			for step := range steps {
				ev := randomEvent(rng, clk.Now(), pods, &fresh)
				k := kubelets[ev.Source.Host]
				k.objects.Insert(ev.InvolvedObject.Name)
				ours, theirs := k.ours, k.theirs
				want, wantErr := theirs.EventCorrelate(ev.DeepCopy())
				got, gotErr := ours.correlate(ev.InvolvedObject.DeepCopy(), ev.Type, ev.Reason, ev.Message)
				if (wantErr == nil) != (gotErr == nil) {
					t.Fatalf("step %d: error %v, client-go's %v", step, gotErr, wantErr)
				}
				if want.Skip != got.Skip || !bytes.Equal(want.Patch, got.Patch) {
					t.Fatalf("step %d: skip %v patch %s, client-go's skip %v patch %s", step, got.Skip, got.Patch, want.Skip, want.Patch)
				}
				if diff := cmp.Diff(want.Event, got.Event); diff != "" {
					t.Fatalf("step %d: event differs from client-go's (-client-go +restartbed):\n%s", step, diff)
				}
				if got.Skip {
					skipped++
				} else if got.Patch != nil {
					patched++
				}
				if !got.Skip && strings.HasPrefix(got.Event.Message, "(combined from similar events)") {
					combined++
				}
				if !got.Skip && rng.IntN(4) > 0 { // written, its name and count as the apiserver has them
					rv++
					written := got.Event.DeepCopy()
					written.ResourceVersion = fmt.Sprint(rv)
					theirs.UpdateState(written.DeepCopy())
					ours.updateState(written)
				}
				switch r := rng.IntN(100); {
				case r < 60:
					clk.Step(time.Duration(rng.IntN(2000)) * time.Millisecond)
				case r < 62:
					clk.Step(time.Duration(rng.IntN(700)) * time.Second)
				}
			}
			for host, k := range kubelets {
				if pods > 3 && k.objects.Len() <= correlatorCacheSize {
					t.Fatalf("%d objects on %s: its caches never had to forget one", k.objects.Len(), host)
				}
			}
			if skipped == 0 || patched == 0 || combined == 0 {
				t.Fatalf("the events never reached the spam filter (%d skipped), never repeated (%d patched) or were never combined (%d)",
					skipped, patched, combined)
			}
		})
	}
}

// hosts are the nodes whose kubelets make randomEvent's events.
var hosts = []string{"node-0", "node-1"}

// randomEvent is an event a kubelet's recorder might make: one of that many pods (half the time
// one of the first three), containers and nodes; Unhealthy with one message, which repeats;
// Started with three, too few to be combined; BackOff with a new message each time (fresh counts
// it), combined from the tenth on. (A reason whose messages both repeat and exceed ten is
// combined as client-go's set of messages happens to pop one, at random, so no two correlators
// agree on it.)
func randomEvent(rng *rand.Rand, now time.Time, pods int, fresh *int) *corev1.Event {
	pod := rng.IntN(pods)
	if rng.IntN(2) == 0 {
		pod = rng.IntN(3) // a few pods have most of the events, and repeats
	}
	reasons := []string{eventUnhealthy, eventBackOff, eventStarted}
	reason := reasons[rng.IntN(len(reasons))]
	message := "Startup probe failed: HTTP probe failed with statuscode: 503"
	switch reason {
	case eventBackOff:
		*fresh++
		message = fmt.Sprintf("Back-off restarting failed container c%d", *fresh)
	case eventStarted:
		message = fmt.Sprintf("Started container c%d", rng.IntN(3))
	}
	t := metav1.NewTime(now)
	host := hosts[rng.IntN(len(hosts))]
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d.%x", pod, now.UnixNano()), Namespace: "ns"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "ns", Name: fmt.Sprintf("p%d", pod),
			UID: types.UID(fmt.Sprintf("uid-%d", pod)), FieldPath: fmt.Sprintf("spec.containers{c%d}", rng.IntN(2))},
		Reason: reason, Message: message, Type: corev1.EventTypeWarning, Count: 1, FirstTimestamp: t, LastTimestamp: t,
		Source:              corev1.EventSource{Component: "kubelet", Host: host},
		ReportingController: "kubelet", ReportingInstance: host,
	}
}
