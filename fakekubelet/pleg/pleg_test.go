package pleg

import (
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/restartbed/restartbed/fakekubelet/container"
	"github.com/restartbed/restartbed/internal/clocktest"
)

func inst(id string, s container.State) container.Status {
	return container.Status{ID: id, Name: "c-" + id, State: s}
}

func TestCompare(t *testing.T) {
	const uid = types.UID("u")
	pod := func(ready bool, cs ...container.Status) container.PodStatus {
		return container.PodStatus{UID: uid, SandboxReady: ready, Containers: cs}
	}
	for _, tc := range []struct {
		name     string
		old, new container.PodStatus
		want     []string
	}{
		{"nothing changed", pod(true, inst("a", container.Running)), pod(true, inst("a", container.Running)), nil},
		{"new sandbox and instance", container.PodStatus{}, pod(true, inst("a", container.Running)),
			[]string{"ContainerStarted sandbox", "ContainerStarted a"}},
		{"exited", pod(true, inst("a", container.Running)), pod(true, inst("a", container.Exited)), []string{"ContainerDied a"}},
		// Started and exited between two relists: the relist sees it exited, and says only that.
		{"started and exited in between", pod(true), pod(true, inst("a", container.Exited)), []string{"ContainerDied a"}},
		// Exited and restarted in between: the old instance died, the new one started.
		{"restarted in between", pod(true, inst("a", container.Running)), pod(true, inst("b", container.Running), inst("a", container.Exited)),
			[]string{"ContainerStarted b", "ContainerDied a"}},
		{"removed after exit", pod(true, inst("a", container.Exited)), pod(true), []string{"ContainerRemoved a"}},
		{"killed and removed in between", pod(true, inst("a", container.Running)), pod(true), []string{"ContainerDied a", "ContainerRemoved a"}},
		{"sandbox stopped", pod(true), pod(false), []string{"ContainerDied sandbox"}},
		{"pod gone", pod(false, inst("a", container.Exited)), container.PodStatus{}, []string{"ContainerRemoved a", "ContainerRemoved sandbox"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range Compare(tc.old, tc.new) {
				if e.Pod != uid {
					t.Errorf("event %+v names another pod", e)
				}
				id := e.ID
				if e.Sandbox {
					id = "sandbox"
				}
				got = append(got, string(e.Type)+" "+id)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Compare = %q, want %q", got, tc.want)
			}
		})
	}
}

// fakeRuntime is a runtime whose pods the test sets.
type fakeRuntime struct {
	mu   sync.Mutex
	pods map[types.UID]container.PodStatus
}

func (r *fakeRuntime) set(s container.PodStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pods[s.UID] = s
}

func (r *fakeRuntime) inspect(uid types.UID) (container.PodStatus, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.pods[uid]
	return s, ok
}

func TestRelistAndWait(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
	rt := &fakeRuntime{pods: map[types.UID]container.PodStatus{}}
	var synced []types.UID
	g := New(Options{Clock: clock, Period: time.Second, Inspect: rt.inspect, Sync: func(uid types.UID) { synced = append(synced, uid) }})
	relist := func() []types.UID {
		synced = nil
		g.Relist()
		slices.Sort(synced)
		return synced
	}

	// Before the first relist no view is new enough, not even for a pod never synced.
	if _, ok := g.Status("a", time.Time{}); ok {
		t.Fatal("Status before the first relist: got a view")
	}
	rt.set(container.PodStatus{UID: "a", SandboxReady: true, Containers: []container.Status{inst("1", container.Running)}})
	g.Changed("a")
	clock.Step(time.Second)
	if got := relist(); !slices.Equal(got, []types.UID{"a"}) {
		t.Fatalf("first relist synced %v, want [a] (waiting, and started)", got)
	}
	s, ok := g.Status("a", time.Time{})
	if !ok || s == nil || s.Latest("c-1") == nil || s.Latest("c-1").State != container.Running {
		t.Fatalf("Status after the relist = %+v, %v; want c-1 running", s, ok)
	}

	// A sync that ends after the relist waits for the next one, which sees what changed
	// meanwhile even when nothing was reported for this pod.
	syncEnd := clock.Now()
	if _, ok := g.Status("a", syncEnd); ok {
		t.Fatal("Status newer than the sync's end: got the relist's view from before it")
	}
	rt.set(container.PodStatus{UID: "a", SandboxReady: true, Containers: []container.Status{inst("1", container.Exited)}})
	clock.Step(time.Second)
	if got := relist(); !slices.Equal(got, []types.UID{"a"}) {
		t.Fatalf("relist synced %v, want the waiting pod a", got)
	}
	if s, _ := g.Status("a", syncEnd); s.Latest("c-1").State != container.Running {
		t.Fatal("the change was not reported, yet the cache shows it: a relist inspects only the pods reported changed")
	}

	// Reported: the next relist sees the exit, and a pod nobody waits for is synced for it.
	g.Changed("a")
	clock.Step(time.Second)
	if got := relist(); !slices.Equal(got, []types.UID{"a"}) {
		t.Fatalf("relist synced %v, want a for its exit", got)
	}
	if s, _ := g.Status("a", syncEnd); s.Latest("c-1").State != container.Exited {
		t.Fatal("the reported exit is not in the cache")
	}

	// A removal alone brings no sync; the pod's removal empties its cache entry.
	rt.set(container.PodStatus{UID: "a", SandboxReady: true})
	g.Changed("a")
	clock.Step(time.Second)
	if got := relist(); len(got) != 0 {
		t.Fatalf("a removal synced %v", got)
	}
	rt.mu.Lock()
	delete(rt.pods, "a")
	rt.mu.Unlock()
	g.Changed("a")
	clock.Step(time.Second)
	relist()
	if s, ok := g.Status("a", syncEnd); !ok || s != nil {
		t.Fatalf("Status of a pod the runtime forgot = %+v, %v; want none", s, ok)
	}
}

func TestRunRelistsEveryPeriod(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
	rt := &fakeRuntime{pods: map[types.UID]container.PodStatus{"a": {UID: "a", SandboxReady: true}}}
	synced := make(chan types.UID, 10)
	g := New(Options{Clock: clock, Period: time.Second, Inspect: rt.inspect, Sync: func(uid types.UID) { synced <- uid }})
	ctx := t.Context()
	go g.Run(ctx)
	g.Changed("a")
	clocktest.WaitForWaiters(t, clock, 1, "the relist ticker")
	select {
	case uid := <-synced:
		t.Fatalf("synced %s before the period passed", uid)
	default:
	}
	clock.Step(time.Second)
	select {
	case uid := <-synced:
		if uid != "a" {
			t.Fatalf("synced %s, want a", uid)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no relist a period after the change")
	}
}
