// Package pleg is the emulated kubelet's pod lifecycle event generator, as the kubelet's generic
// PLEG (pkg/kubelet/pleg/generic.go) with its pod cache (pkg/kubelet/container/cache.go): the
// pod workers learn what the runtime did only when it relists, once a period. A relist inspects
// the pods the runtime changed since the last one, compares each container instance's state
// with what the previous relist saw, and turns the differences into events; it stores the
// snapshots in a cache stamped with the relist's time, and then asks for a sync of every pod
// with an event and of every pod whose sync was waiting for a newer view.
//
// What a relist sees is the runtime at that moment: an instance that changed several times in
// between shows only its last state, and one that started and exited in between is reported
// as died, never as started, as on a node.
//
// It owns the cache and the relist and nothing else: it decides nothing about a pod, starts or
// stops nothing, and never talks to the API. Its clock is the kubelet's.
package pleg

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/restartbed/restartbed/fakekubelet/container"
)

// EventType is what a relist found changed in one container instance or sandbox.
type EventType string

// The kubelet's event types, as pkg/kubelet/pleg names them.
const (
	// ContainerStarted: the instance runs and did not at the last relist.
	ContainerStarted EventType = "ContainerStarted"
	// ContainerDied: the instance has exited and was running, or unseen, at the last relist.
	ContainerDied EventType = "ContainerDied"
	// ContainerRemoved: the instance is gone from the runtime.
	ContainerRemoved EventType = "ContainerRemoved"
)

// Event is one change a relist found. For the pod's sandbox, Sandbox is set and ID is empty.
type Event struct {
	Pod     types.UID
	Type    EventType
	ID      string
	Sandbox bool
}

// syncWorthy reports whether the event brings a sync of its pod: every one but a removal, as
// the kubelet's isSyncPodWorthy.
func (e Event) syncWorthy() bool { return e.Type != ContainerRemoved }

// Options configure a PLEG.
type Options struct {
	// Clock is the kubelet's clock: it times the relists and stamps the cache.
	Clock clock.WithTicker
	// Period is the time between two relists (the kubelet's genericPlegRelistPeriod, scaled
	// by the timing profile).
	Period time.Duration
	// Inspect returns a snapshot of the pod's sandbox and instances, false when the runtime
	// has neither.
	Inspect func(types.UID) (container.PodStatus, bool)
	// Sync asks for a sync of the pod; it is called outside any lock and must not block.
	Sync func(types.UID)
}

// PLEG relists the runtime and caches what it saw. Its methods are safe for concurrent use.
type PLEG struct {
	opts Options

	mu sync.Mutex
	// changed are the pods the runtime reported changed since the last relist.
	changed map[types.UID]struct{}
	// cache holds each pod's snapshot as the last relist that inspected it saw it.
	cache map[types.UID]container.PodStatus
	// relisted is when the last relist began: every snapshot in the cache is at least that
	// recent (the kubelet's global cache timestamp). Zero before the first relist.
	relisted time.Time
	// waiting are the pods whose sync wants a view newer than the cache had.
	waiting map[types.UID]struct{}
}

// New returns a PLEG that has not relisted yet.
func New(opts Options) *PLEG {
	return &PLEG{opts: opts, changed: map[types.UID]struct{}{}, cache: map[types.UID]container.PodStatus{},
		waiting: map[types.UID]struct{}{}}
}

// Changed records that the runtime changed the pod's sandbox or instances; the next relist
// inspects it. It is cheap and never blocks: the runtime calls it on every change.
func (g *PLEG) Changed(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.changed[uid] = struct{}{}
}

// Status returns the pod's snapshot from the cache when the cache is newer than since (the end
// of the pod's last sync), as the kubelet's pod worker waits for a newer cache before each sync
// (GetNewerThan); the snapshot is nil when the runtime had neither sandbox nor instance of the
// pod. When the cache is not newer it returns false, and the next relist asks for the pod's
// sync.
func (g *PLEG) Status(uid types.UID, since time.Time) (*container.PodStatus, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.relisted.After(since) {
		g.waiting[uid] = struct{}{}
		return nil, false
	}
	s, ok := g.cache[uid]
	if !ok {
		return nil, true
	}
	return &s, true
}

// Run relists every period until ctx ends.
func (g *PLEG) Run(ctx context.Context) {
	t := g.opts.Clock.NewTicker(g.opts.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			g.Relist()
		}
	}
}

// Relist inspects the pods changed since the last relist, updates the cache, and asks for the
// syncs its events and the waiting pods need. It returns the events.
func (g *PLEG) Relist() []Event {
	g.mu.Lock()
	now := g.opts.Clock.Now()
	changed := g.changed
	g.changed = map[types.UID]struct{}{}
	old := make(map[types.UID]container.PodStatus, len(changed))
	for uid := range changed {
		old[uid] = g.cache[uid]
	}
	g.mu.Unlock()

	var events []Event
	fresh := make(map[types.UID]container.PodStatus, len(changed))
	var gone []types.UID
	for uid := range changed {
		s, ok := g.opts.Inspect(uid)
		if ok {
			fresh[uid] = s
		} else {
			s = container.PodStatus{}
			gone = append(gone, uid)
		}
		events = append(events, Compare(old[uid], s)...)
	}

	g.mu.Lock()
	for uid, s := range fresh {
		g.cache[uid] = s
	}
	for _, uid := range gone {
		delete(g.cache, uid)
	}
	g.relisted = now
	sync := g.waiting
	g.waiting = map[types.UID]struct{}{}
	g.mu.Unlock()

	for _, e := range events {
		if e.syncWorthy() {
			sync[e.Pod] = struct{}{}
		}
	}
	for uid := range sync {
		g.opts.Sync(uid)
	}
	return events
}

// Compare returns the events that turn the old snapshot of a pod into the new one: for each
// instance, by its ID, what the generic PLEG's generateEvents gives for its old and new state.
// The sandbox counts as one more instance, running while ready. Events come in the order of
// the new snapshot's instances, then removals.
func Compare(old, new container.PodStatus) []Event {
	uid := new.UID
	if uid == "" {
		uid = old.UID
	}
	var events []Event
	add := func(t EventType, id string, sandbox bool) {
		events = append(events, Event{Pod: uid, Type: t, ID: id, Sandbox: sandbox})
	}
	oldSandbox, newSandbox := sandboxState(old), sandboxState(new)
	if t, ok := transition(oldSandbox, newSandbox); ok {
		add(t, "", true)
	}
	before := make(map[string]container.State, len(old.Containers))
	for _, c := range old.Containers {
		before[c.ID] = c.State
	}
	seen := make(map[string]bool, len(new.Containers))
	for _, c := range new.Containers {
		seen[c.ID] = true
		if t, ok := transition(before[c.ID], c.State); ok {
			add(t, c.ID, false)
		}
	}
	for _, c := range old.Containers {
		if seen[c.ID] {
			continue
		}
		if c.State == container.Running {
			add(ContainerDied, c.ID, false) // exited and was removed between two relists
		}
		add(ContainerRemoved, c.ID, false)
	}
	if oldSandbox != "" && newSandbox == "" {
		add(ContainerRemoved, "", true)
	}
	return events
}

// sandboxState is the sandbox's state as a container's: running while ready, exited once
// stopped, "" when there is none.
func sandboxState(s container.PodStatus) container.State {
	switch {
	case s.UID == "":
		return ""
	case s.SandboxReady:
		return container.Running
	}
	return container.Exited
}

// transition is the event for an instance that was in state from ("" when unseen) and is now
// in state to ("" when gone, handled by the caller); false when nothing changed.
func transition(from, to container.State) (EventType, bool) {
	if from == to || to == "" {
		return "", false
	}
	if to == container.Running {
		return ContainerStarted, true
	}
	return ContainerDied, true
}
