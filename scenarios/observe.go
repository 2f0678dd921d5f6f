package scenarios

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// watched are the resources the CEL variables hold; nodes are cluster-wide, the rest come from
// the scenario's namespace.
var watched = []struct {
	variable   string
	gvr        schema.GroupVersionResource
	namespaced bool
}{
	{varPods, schema.GroupVersionResource{Version: "v1", Resource: "pods"}, true},
	{varJobs, schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, true},
	{varJobSets, schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}, true},
	{varServices, schema.GroupVersionResource{Version: "v1", Resource: "services"}, true},
	{varEvents, schema.GroupVersionResource{Version: "v1", Resource: "events"}, true},
	{varNodes, schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, false},
}

// observer keeps the objects the expressions read, updated by one watch per resource, and
// evaluates the pending waitFor after every change it is told of, so that a state the API held
// only for a moment is still seen.
//
// The watches are independent: one may deliver a change later than another delivers a newer
// one (a pod's update after the JobSet update that followed it). The control plane's
// resourceVersions are its storage's revisions, one order over every resource, so the observer
// keeps each object's recent versions and evaluates a change that arrives late against the
// other objects as they were at its resourceVersion, then against the newest state. What it
// cannot know is a change still on its way: until it arrives, the newest state mixes the
// watches' progress.
type observer struct {
	clock clock.PassiveClock

	mu      sync.Mutex
	objects map[string]map[string]map[string]any // variable → namespace/name → object
	lists   map[string][]any                     // sorted views, rebuilt when stale
	// history holds each object's versions of the last historyWindow, oldest first;
	// newest is the highest resourceVersion observed.
	history map[string]map[string][]stored
	newest  uint64
	changes int
	// captured holds the values of capture steps.
	captured map[string]any
	// fixed are the variables fixed for the run (timing, kubernetes).
	fixed runVariables
	// start is when the first step started (elapsed counts from it); traceStart when the
	// cluster started (trace times count from it).
	start, traceStart time.Time
	wait              *waiter
	trace             *json.Encoder
	traceErr          error
	// judge holds the run's invariants (nil: none); triggers are spec.triggers not fired yet.
	judge    *judge
	triggers []*armedTrigger
	// recent are the last changes, one line each, for the trace around a violation.
	recent []string
}

// recentChanges is how many changes a violation's report shows before it.
const recentChanges = 24

// historyWindow is how long a superseded version is kept for a change that arrives late; watches
// of one apiserver lag each other by milliseconds.
const historyWindow = 30 * time.Second

// stored is one state of an object: nil once deleted. rv is its resourceVersion (0 when it is
// not a storage revision), seen when the observer received it.
type stored struct {
	rv   uint64
	obj  map[string]any
	seen time.Time
}

// waiter is a waitFor in progress.
type waiter struct {
	prg     cel.Program
	done    chan struct{}
	passed  bool
	lastErr error
	// fatal ends the wait without passing: an evaluation over the cost limit, which waiting
	// cannot mend.
	fatal error
	evals int
}

func newObserver(clk clock.PassiveClock, trace io.Writer, fixed runVariables) *observer {
	o := &observer{clock: clk, objects: map[string]map[string]map[string]any{}, lists: map[string][]any{},
		history: map[string]map[string][]stored{}, captured: map[string]any{}, fixed: fixed, traceStart: clk.Now()}
	for _, w := range watched {
		o.objects[w.variable] = map[string]map[string]any{}
		o.history[w.variable] = map[string][]stored{}
	}
	if trace != nil {
		o.trace = json.NewEncoder(trace)
	}
	return o
}

// watch starts the informers of the resources the cluster serves (a cluster without a JobSet
// CRD has no jobsets to watch: the variable stays empty) and returns once they have synced.
//
// Each informer lists once, then watches; it lists again only when its watch cannot go on (the
// apiserver restarted, its history expired), and the versions written meanwhile are never seen.
// The invariants must know that, so every list after the first is told to them before its
// objects arrive. client-go's reflector lists either by a list request or, with its
// WatchListClient feature (on by default since 1.35), by a watch that sends the initial events
// first: both count.
func (o *observer) watch(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, namespace string, nodes labels.Selector) error {
	var informers []cache.SharedIndexInformer
	var names []string
	for _, w := range watched {
		if _, err := mapper.KindFor(w.gvr); meta.IsNoMatchError(err) {
			continue
		}
		ri := dynamic.ResourceInterface(dyn.Resource(w.gvr))
		if w.namespaced {
			ri = dyn.Resource(w.gvr).Namespace(namespace)
		}
		variable := w.variable
		// A tenant's nodes are its own among the shared control plane's.
		selector := ""
		if variable == varNodes && nodes != nil {
			selector = nodes.String()
		}
		lists := 0 // the reflector calls List and Watch from one goroutine
		listed := func() {
			if lists++; lists > 1 {
				o.watchBroke(variable)
			}
		}
		lw := &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				listed()
				opts.LabelSelector = selector
				return ri.List(ctx, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				if ptr.Deref(opts.SendInitialEvents, false) {
					listed() // a list by watch
				}
				opts.LabelSelector = selector
				return ri.Watch(ctx, opts)
			},
		}
		informer := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
		_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { o.changed(variable, "ADDED", obj) },
			UpdateFunc: func(_, obj any) { o.changed(variable, "MODIFIED", obj) },
			DeleteFunc: func(obj any) { o.changed(variable, "DELETED", obj) },
		})
		if err != nil {
			return err
		}
		informers, names = append(informers, informer), append(names, w.gvr.Resource)
		go informer.RunWithContext(ctx)
	}
	for i, informer := range informers {
		if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
			return fmt.Errorf("watching %s did not sync", names[i])
		}
	}
	return nil
}

// traceLine is one line of --trace.
type traceLine struct {
	// Time is the scenario time in seconds since the cluster started.
	Time      float64        `json:"time"`
	Type      string         `json:"type"`
	Kind      string         `json:"kind"`
	Namespace string         `json:"namespace,omitempty"`
	Name      string         `json:"name"`
	Object    map[string]any `json:"object"`
}

func (o *observer) changed(variable, change string, obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	key := u.GetNamespace() + "/" + u.GetName()
	// A resourceVersion that is not a number is not a storage revision: such a change is
	// evaluated against the newest state only.
	rv, _ := strconv.ParseUint(u.GetResourceVersion(), 10, 64)
	o.mu.Lock()
	defer o.mu.Unlock()
	if versions := o.history[variable][key]; change == "MODIFIED" && rv != 0 && len(versions) > 0 && versions[len(versions)-1].rv == rv {
		// A watch that lists again after a break (an apiserver restart) delivers every object
		// anew: the same version is no change, and judging the others as of its old
		// resourceVersion would judge a state long gone.
		return
	}
	now := o.clock.Now()
	v := stored{rv: rv, obj: u.Object, seen: now}
	if change == "DELETED" {
		delete(o.objects[variable], key)
		v.obj = nil
	} else {
		o.objects[variable][key] = u.Object
	}
	o.record(variable, key, v)
	delete(o.lists, variable)
	if o.trace != nil && o.traceErr == nil {
		o.traceErr = o.trace.Encode(traceLine{Time: o.clock.Since(o.traceStart).Seconds(), Type: change, Kind: u.GetKind(),
			Namespace: u.GetNamespace(), Name: u.GetName(), Object: u.Object})
	}
	if variable != varEvents {
		if len(o.recent) == recentChanges {
			o.recent = slices.Delete(o.recent, 0, 1)
		}
		o.recent = append(o.recent, fmt.Sprintf("%7.1fs %-8s %s", o.scenarioTimeLocked().Seconds(), change, summary(u)))
	}
	if o.judge != nil {
		o.judge.observe(variable, change, u, o.scenarioTimeLocked(), o.recentLocked)
	}
	if rv != 0 && rv < o.newest {
		o.evaluateLocked(func() activation { return o.asOfLocked(rv) })
	}
	o.newest = max(o.newest, rv)
	o.evaluateLocked(o.activationLocked)
}

// watchBroke tells the invariants that a variable's watch broke.
func (o *observer) watchBroke(variable string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.judge == nil || o.judge.builtin == nil {
		return
	}
	switch variable {
	case varJobSets:
		o.judge.builtin.WatchBroke("JobSet")
	case varJobs:
		o.judge.builtin.WatchBroke("Job")
	}
}

// scenarioTimeLocked is the time since the first step (0 before it); o.mu is held.
func (o *observer) scenarioTimeLocked() time.Duration {
	if o.start.IsZero() {
		return 0
	}
	return o.clock.Since(o.start)
}

// recentLocked copies the recent changes; o.mu is held.
func (o *observer) recentLocked() []string { return slices.Clone(o.recent) }

// record appends v to the object's versions and forgets what is older than historyWindow; o.mu
// is held.
func (o *observer) record(variable, key string, v stored) {
	versions := append(o.history[variable][key], v)
	o.history[variable][key] = forget(versions, v.seen)
	if o.changes++; o.changes%1024 == 0 {
		for _, objs := range o.history {
			for k, vs := range objs {
				if vs = forget(vs, v.seen); len(vs) == 1 && vs[0].obj == nil {
					delete(objs, k)
				} else {
					objs[k] = vs
				}
			}
		}
	}
}

// forget drops the versions superseded more than historyWindow before now, and a deletion older
// than that.
func forget(versions []stored, now time.Time) []stored {
	drop := 0
	for drop+1 < len(versions) && now.Sub(versions[drop+1].seen) > historyWindow {
		drop++
	}
	return versions[drop:]
}

// asOfLocked is the expressions' view of the objects as they were at resourceVersion rv, as far
// as the watches have told; o.mu is held.
func (o *observer) asOfLocked(rv uint64) activation {
	lists := make(map[string][]any, len(o.history))
	for variable, objs := range o.history {
		then := map[string]map[string]any{}
		for key, versions := range objs {
			i := sort.Search(len(versions), func(i int) bool { return versions[i].rv > rv })
			if i > 0 && versions[i-1].obj != nil {
				then[key] = versions[i-1].obj
			}
		}
		lists[variable] = sortedList(then)
	}
	return o.activationOf(lists)
}

// activationLocked is the expressions' view of now; o.mu is held.
func (o *observer) activationLocked() activation {
	for _, name := range listVariables {
		if _, fresh := o.lists[name]; !fresh {
			o.lists[name] = sortedList(o.objects[name])
		}
	}
	return o.activationOf(o.lists)
}

// activationOf completes lists with the other variables; o.mu is held.
func (o *observer) activationOf(lists map[string][]any) activation {
	var elapsed time.Duration
	if !o.start.IsZero() {
		elapsed = o.clock.Since(o.start)
	}
	return newActivation(lists, o.captured, elapsed, o.fixed)
}

// sortedList is objs ordered by name, then by namespace/name.
func sortedList(objs map[string]map[string]any) []any {
	keys := slices.Collect(maps.Keys(objs))
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(nameOf(objs[a]), nameOf(objs[b])), cmp.Compare(a, b))
	})
	list := make([]any, len(keys))
	for i, k := range keys {
		list[i] = objs[k]
	}
	return list
}

func nameOf(obj map[string]any) string {
	name, _, _ := unstructured.NestedString(obj, "metadata", "name") // the apiserver's objects have a string name
	return name
}

// evaluateLocked evaluates the pending waitFor, the CEL invariants and the armed triggers against
// the view; o.mu is held.
func (o *observer) evaluateLocked(view func() activation) {
	var a activation
	once := func() activation {
		if a == nil {
			a = view()
		}
		return a
	}
	if o.judge != nil && len(o.judge.cel) > 0 {
		o.judge.evaluate(once(), o.scenarioTimeLocked(), o.recentLocked)
	}
	o.fireLocked(once)
	w := o.wait
	if w == nil || w.passed || w.fatal != nil {
		return
	}
	w.evals++
	ok, err := evalBool(w.prg, once())
	if errors.Is(err, ErrCostLimit) {
		w.fatal = err
		close(w.done)
		return
	}
	if err != nil {
		w.lastErr = err
		return
	}
	if ok {
		w.passed = true
		close(w.done)
	}
}

// reevaluate evaluates the pending waitFor again (for expressions of elapsed, which changes with
// no object changing).
func (o *observer) reevaluate() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.evaluateLocked(o.activationLocked)
}

// startWait makes prg the pending waitFor and evaluates it at once.
func (o *observer) startWait(prg cel.Program) *waiter {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.wait = &waiter{prg: prg, done: make(chan struct{})}
	o.evaluateLocked(o.activationLocked)
	return o.wait
}

// stopWait ends the wait and returns it, with its evaluations and its last evaluation error.
func (o *observer) stopWait() *waiter {
	o.mu.Lock()
	defer o.mu.Unlock()
	w := o.wait
	o.wait = nil
	return w
}

// eval evaluates an expression against the current state.
func (o *observer) eval(prg cel.Program) (any, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return eval(prg, o.activationLocked())
}

// capture stores a captured value (later expressions see a new map; earlier ones keep theirs).
func (o *observer) capture(key string, value any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	next := maps.Clone(o.captured)
	next[key] = value
	o.captured = next
}

// warnings returns the last n Warning events as "Kind/name: Reason: message", oldest first.
func (o *observer) warnings(n int) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	type warning struct {
		at, text string
	}
	var all []warning
	for _, e := range o.objects[varEvents] {
		if e["type"] != "Warning" {
			continue
		}
		// An Event's fields are strings in the apiserver's objects; a missing one reads as "".
		kind, _, _ := unstructured.NestedString(e, "involvedObject", "kind")
		name, _, _ := unstructured.NestedString(e, "involvedObject", "name")
		at, _, _ := unstructured.NestedString(e, "lastTimestamp")
		if at == "" {
			at, _, _ = unstructured.NestedString(e, "eventTime") // as above
		}
		all = append(all, warning{at, fmt.Sprintf("%s/%s: %v: %v", kind, name, e["reason"], e["message"])})
	}
	slices.SortStableFunc(all, func(a, b warning) int { return cmp.Compare(a.at, b.at) })
	if len(all) > n {
		all = all[len(all)-n:]
	}
	out := make([]string, len(all))
	for i, w := range all {
		out[i] = w.text
	}
	return out
}

// pods returns the pods as last observed, sorted by name.
func (o *observer) pods() []map[string]any {
	o.mu.Lock()
	defer o.mu.Unlock()
	list := o.activationLocked()[varPods].([]any)
	out := make([]map[string]any, len(list))
	for i, p := range list {
		out[i] = p.(map[string]any)
	}
	return out
}
