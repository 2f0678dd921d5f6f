package bench

import (
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/agent"
	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// Stages a pod passes through in a group restart, in the order they happen, and the JobSet's.
const (
	stageDecided       = "controller: the group restarts"
	stageAgentRestart  = "agent restarted"
	stageAttempt       = "pod at the new attempt"
	stageBarrierLifted = "controller: barrier lifted"
	stageOldGone       = "old pod gone"
	stageCreated       = "new pod created"
	stageBound         = "new pod bound to a node"
	stageRunning       = "worker running again"
)

// stageOrder is the order stages are reported in.
var stageOrder = []string{stageDecided, stageAgentRestart, stageOldGone, stageCreated, stageBound, stageAttempt, stageBarrierLifted, stageRunning}

// Milestone is when a stage was first and last reached, counted from the worker's exit: First
// by one pod, All by every pod (for the controller's stages, the one time they happen).
type Milestone struct {
	Stage string    `json:"stage"`
	First *Duration `json:"firstSeconds,omitempty"`
	All   *Duration `json:"allSeconds,omitempty"`
}

// podBase is what a pod was before the exit.
type podBase struct{ agentRestarts, workerRestarts int32 }

// observer follows the benchmark's pods and JobSet through informer events and times the stages
// of the group restart. Before it is armed it only counts pods whose worker runs.
type observer struct {
	n int

	mu       sync.Mutex
	running  map[types.UID]bool // before arming: pods whose worker runs
	started  chan struct{}      // closed when n workers run
	armed    bool
	exitAt   time.Time
	base     map[types.UID]podBase
	jsBase   jobsetv1alpha2.JobSetStatus
	reached  map[types.UID]map[string]bool
	counts   map[string]int
	first    map[string]time.Time
	all      map[string]time.Time
	replaced int
	done     chan struct{} // closed when n workers run again
}

func newObserver(n int) *observer {
	return &observer{n: n, running: map[types.UID]bool{}, started: make(chan struct{}), done: make(chan struct{})}
}

// handlers are the informers' event handlers.
func (o *observer) podHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.pod(obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { o.pod(obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				o.podGone(p)
			}
		},
	}
}

func (o *observer) jobSetHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.jobSet(obj) },
		UpdateFunc: func(_, obj any) { o.jobSet(obj) },
	}
}

// arm records the pods' state before the exit (pods is the informer's content) and starts timing.
func (o *observer) arm(pods []*corev1.Pod, js *jobsetv1alpha2.JobSet, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.base = map[types.UID]podBase{}
	for _, p := range pods {
		o.base[p.UID] = podBase{agentRestarts: restarts(p, agent.ContainerName), workerRestarts: restarts(p, workerContainer)}
	}
	o.jsBase = *js.Status.DeepCopy()
	o.reached, o.counts, o.first, o.all = map[types.UID]map[string]bool{}, map[string]int{}, map[string]time.Time{}, map[string]time.Time{}
	o.exitAt, o.armed = at, true
}

func (o *observer) pod(p *corev1.Pod) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.armed {
		if workerRuns(p) && !o.running[p.UID] {
			o.running[p.UID] = true
			if len(o.running) == o.n {
				close(o.started)
			}
		}
		return
	}
	base, old := o.base[p.UID]
	if !old {
		if o.reach(p.UID, stageCreated, now) {
			o.replaced++
		}
		if p.Spec.NodeName != "" {
			o.reach(p.UID, stageBound, now)
		}
	} else {
		if restarts(p, agent.ContainerName) > base.agentRestarts {
			o.reach(p.UID, stageAgentRestart, now)
		}
		if p.Annotations[jobsetv1alpha2.InPlaceRestartAttemptKey] == fmt.Sprint(ptr.Deref(o.jsBase.CurrentInPlaceRestartAttempt, 0)+1) {
			o.reach(p.UID, stageAttempt, now)
		}
	}
	if p.DeletionTimestamp == nil && workerRuns(p) && (!old || restarts(p, workerContainer) > base.workerRestarts) {
		if o.reach(p.UID, stageRunning, now) && o.counts[stageRunning] == o.n {
			close(o.done)
		}
	}
}

func (o *observer) podGone(p *corev1.Pod) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, old := o.base[p.UID]; o.armed && old {
		o.reach(p.UID, stageOldGone, now)
	}
}

func (o *observer) jobSet(obj any) {
	now := time.Now()
	js, err := toJobSet(obj)
	if err != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.armed {
		return
	}
	if js.Status.Restarts > o.jsBase.Restarts ||
		ptr.Deref(js.Status.PreviousInPlaceRestartAttempt, -1) > ptr.Deref(o.jsBase.PreviousInPlaceRestartAttempt, -1) {
		o.reach("", stageDecided, now)
	}
	if ptr.Deref(js.Status.CurrentInPlaceRestartAttempt, -1) > ptr.Deref(o.jsBase.CurrentInPlaceRestartAttempt, -1) {
		o.reach("", stageBarrierLifted, now)
	}
}

// reach records that uid ("" for the JobSet) reached stage at now, once; it reports whether this
// was the first time. o.mu is held.
func (o *observer) reach(uid types.UID, stage string, now time.Time) bool {
	if o.reached[uid] == nil {
		o.reached[uid] = map[string]bool{}
	}
	if o.reached[uid][stage] {
		return false
	}
	o.reached[uid][stage] = true
	o.counts[stage]++
	if o.counts[stage] == 1 {
		o.first[stage] = now
	}
	if uid == "" || o.counts[stage] == o.n {
		o.all[stage] = now
	}
	return true
}

// milestones returns the stages reached, in order.
func (o *observer) milestones() []Milestone {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ms []Milestone
	since := func(t time.Time) *Duration {
		if t.IsZero() {
			return nil
		}
		return ptr.To(Duration(t.Sub(o.exitAt)))
	}
	for _, stage := range stageOrder {
		if o.counts[stage] == 0 {
			continue
		}
		m := Milestone{Stage: stage, All: since(o.all[stage])}
		if !slices.Contains([]string{stageDecided, stageBarrierLifted}, stage) {
			m.First = since(o.first[stage])
		}
		ms = append(ms, m)
	}
	return ms
}

// progress says how far the restart got, for a timeout's error.
func (o *observer) progress() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := fmt.Sprintf("%d of %d workers running again", o.counts[stageRunning], o.n)
	for _, stage := range stageOrder {
		if stage != stageRunning && o.counts[stage] > 0 {
			s += fmt.Sprintf("; %s: %d", stage, o.counts[stage])
		}
	}
	return s
}

// workerRuns reports whether the pod's worker container is running.
func workerRuns(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == workerContainer {
			return cs.State.Running != nil
		}
	}
	return false
}

// restarts is the restart count of the pod's container name (init containers included).
func restarts(p *corev1.Pod, name string) int32 {
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range list {
			if cs.Name == name {
				return cs.RestartCount
			}
		}
	}
	return 0
}

// toJobSet converts a dynamic informer's object.
func toJobSet(obj any) (*jobsetv1alpha2.JobSet, error) {
	u, ok := obj.(runtime.Unstructured)
	if !ok {
		return nil, fmt.Errorf("not an unstructured object: %T", obj)
	}
	js := &jobsetv1alpha2.JobSet{}
	return js, runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), js)
}
