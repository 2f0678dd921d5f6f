package prober

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/restartbed/restartbed/fakekubelet/container"
	"github.com/restartbed/restartbed/fakekubelet/release"
	"github.com/restartbed/restartbed/fakekubelet/restart"
	"github.com/restartbed/restartbed/fakekubelet/status"
)

// Target is what probes reach: the pods' network and containers (the runtime).
type Target interface {
	// HTTPGet sends a GET to what the pod serves on port and returns the status code; an error
	// means nothing answers.
	HTTPGet(ctx context.Context, pod types.UID, port int32, path string, header http.Header) (int, error)
	// Listening reports whether something in the pod serves port.
	Listening(pod types.UID, port int32) bool
	// Serves is Listening without a connection: whether a connection to port would be taken.
	Serves(pod types.UID, port int32) bool
	// Exec runs argv in the named container and returns its exit code and output.
	Exec(ctx context.Context, pod types.UID, container string, argv []string) (int, string, error)
}

// ContainerStatus returns a reader for one worker of the pod's (regular or init) container: each
// call of the reader returns the phase of the pod and what the status of the container says, as
// the kubelet last generated them (its status manager's), false when the kubelet holds no status
// for the pod or the status none for the container. The worker calls its reader every tick and
// from its own goroutine only (status.Manager.ContainerReader).
type ContainerStatus func(pod types.UID, container string) func() (corev1.PodPhase, status.ContainerView, bool)

// Options configure a Manager.
type Options struct {
	// Clock is the kubelet's clock: probe periods, initial delays and timeouts run on it.
	Clock clock.WithTicker
	// Target runs the probes.
	Target Target
	// Status is where workers find the instance to probe.
	Status ContainerStatus
	// Release says what the release's workers do differently.
	Release release.Kubelet
	// ChangeStatusOnKubeletRestart is the ChangeContainerStatusOnKubeletRestart gate: off (the
	// default since 1.35), a worker created by a restart of the kubelet gives a container that
	// ran before it no initial result, so that its status keeps what it had (KEP-5278).
	ChangeStatusOnKubeletRestart bool
	// Updated is told of each change of a result; it is called from a worker and must not
	// block.
	Updated func(pod types.UID, kind Kind, r Result)
	// PodIP returns the pod's sandbox IP, which failure messages name.
	PodIP func(pod types.UID) string
	// Unhealthy records the kubelet's Unhealthy event of a failed or errored probe.
	Unhealthy func(pod *corev1.Pod, c *corev1.Container, format string, args ...any)
	// Rand spreads the first probes of the workers a kubelet restart creates over their
	// period, as the kubelet does. Default: a source seeded at random.
	Rand rand.Source
}

// Manager runs the probe workers of every pod of the kubelet. Its methods are safe for
// concurrent use.
type Manager struct {
	opts Options
	// ctx ends every worker.
	ctx context.Context
	wg  sync.WaitGroup

	mu      sync.Mutex
	workers workerSet
	results map[types.UID]map[string][3]Result
	// execs holds, by pod, the context its exec probes run in before 1.37: the pod's
	// termination ends it (release.Kubelet.ExecProbesWhileTerminating).
	execs map[types.UID]execScope
	rand  *rand.Rand
}

type key struct {
	pod       types.UID
	container string
	kind      Kind
}

// workerSet holds the workers by pod, so that a pod's are found without going through every
// pod's.
type workerSet map[types.UID]map[key]*worker

func (s workerSet) get(k key) *worker { return s[k.pod][k] }

func (s workerSet) put(w *worker) {
	byKey := s[w.key.pod]
	if byKey == nil {
		byKey = map[key]*worker{}
		s[w.key.pod] = byKey
	}
	byKey[w.key] = w
}

func (s workerSet) remove(k key) {
	delete(s[k.pod], k)
	if len(s[k.pod]) == 0 {
		delete(s, k.pod)
	}
}

// New returns a Manager whose workers run until ctx ends; Wait waits for them then.
func New(ctx context.Context, opts Options) *Manager {
	if opts.Rand == nil {
		opts.Rand = rand.NewPCG(rand.Uint64(), rand.Uint64())
	}
	m := &Manager{opts: opts, ctx: ctx, workers: workerSet{}, results: map[types.UID]map[string][3]Result{},
		execs: map[types.UID]execScope{}, rand: rand.New(opts.Rand)}
	context.AfterFunc(ctx, m.endAll)
	return m
}

// endAll ends every worker: the context of New ended. AddPod starts none after it.
func (m *Manager) endAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, byKey := range m.workers {
		for _, w := range byKey {
			w.end()
		}
	}
}

// Wait waits for every worker to end, once the context of New has ended.
func (m *Manager) Wait() { m.wg.Wait() }

// AddPod starts a worker for each probe of the pod's regular and sidecar containers that has
// none, as the kubelet does when it first sees a pod. kubeletStart is when the pod's kubelet
// (re)started: a worker created within one period of it waits a random part of the period
// before its first probe. A worker that ended is not started again: AddPod belongs to a pod's
// first sync after the kubelet (re)started.
func (m *Manager) AddPod(pod *corev1.Pod, kubeletStart time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx.Err() != nil {
		return
	}
	for _, c := range probedContainers(pod) {
		for _, kind := range kinds {
			if probeOf(c, kind) == nil || m.workers.get(key{pod: pod.UID, container: c.Name, kind: kind}) != nil {
				continue
			}
			w := m.newWorker(pod, c, kind, kubeletStart)
			period := w.period()
			if m.opts.Clock.Since(kubeletStart) < period {
				w.delay = time.Duration(m.rand.Float64() * float64(period))
			}
			m.workers.put(w)
			m.wg.Go(w.run)
		}
	}
}

// newWorker makes the worker of the container's probe of that kind, which AddPod starts.
func (m *Manager) newWorker(pod *corev1.Pod, c *corev1.Container, kind Kind, kubeletStart time.Time) *worker {
	return &worker{m: m, key: key{pod: pod.UID, container: c.Name, kind: kind}, pod: pod, container: c, spec: probeOf(c, kind),
		status: m.opts.Status(pod.UID, c.Name), deleting: pod.DeletionTimestamp != nil, wake: make(chan struct{}, 1),
		restart: status.KubeletRestart{Start: kubeletStart, ChangeStatus: m.opts.ChangeStatusOnKubeletRestart}}
}

// probedContainers are the containers that get probe workers: the regular ones and the
// sidecars (probes on other init containers are invalid).
func probedContainers(pod *corev1.Pod) []*corev1.Container {
	var out []*corev1.Container
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		if restart.IsSidecar(&pod.Spec.InitContainers[i]) {
			out = append(out, &pod.Spec.InitContainers[i])
		}
	}
	return out
}

func probeOf(c *corev1.Container, kind Kind) *corev1.Probe {
	switch kind {
	case Startup:
		return c.StartupProbe
	case Liveness:
		return c.LivenessProbe
	}
	return c.ReadinessProbe
}

// Terminating is the pod's termination beginning, as syncTerminatingPod: the liveness and
// startup workers of its regular containers stop (sidecars' go on until they are killed), and
// before 1.37 its exec probes fail from now on, as the context they ran in ends.
func (m *Manager) Terminating(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, w := range m.workers[uid] {
		if (k.kind == Liveness || k.kind == Startup) && !restart.IsSidecar(w.container) {
			w.end()
		}
	}
	m.execScope(uid).cancel()
}

// RemovePod stops the pod's workers and forgets its results: the pod is gone, or the kubelet
// restarted and forgot it.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.workers[uid] {
		w.end()
	}
	delete(m.workers, uid)
	delete(m.results, uid)
	if e, ok := m.execs[uid]; ok {
		e.cancel()
		delete(m.execs, uid)
	}
}

// Results returns the pod's results now.
func (m *Manager) Results(uid types.UID) Results {
	m.mu.Lock()
	defer m.mu.Unlock()
	byID := m.results[uid]
	if len(byID) == 0 {
		return Results{}
	}
	out := make(map[string][3]Result, len(byID))
	for id, r := range byID {
		out[id] = r
	}
	return Results{byID: out}
}

// StatusSet is the kubelet's new status of the pod, as the status manager now holds it: the
// readiness worker of each started, running container whose readiness has not succeeded probes
// at once instead of at its next tick (UpdatePodStatus upstream).
func (m *Manager) StatusSet(uid types.UID, s *corev1.PodStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, statuses := range [][]corev1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
		for i := range statuses {
			cs := &statuses[i]
			if cs.State.Running == nil || cs.Started == nil || !*cs.Started || cs.Ready {
				continue
			}
			w := m.workers.get(key{pod: uid, container: cs.Name, kind: Readiness})
			if w == nil || m.results[uid][container.InstanceID(cs.ContainerID)][Readiness] == Success {
				continue
			}
			w.trigger()
		}
	}
}

// set records a worker's result for the instance and reports whether it changed.
func (m *Manager) set(w *worker, id string, r Result) bool {
	k := w.key
	m.mu.Lock()
	if m.workers.get(k) != w {
		m.mu.Unlock()
		return false // removed meanwhile: the pod's results are gone
	}
	byID := m.results[k.pod]
	if byID == nil {
		byID = map[string][3]Result{}
		m.results[k.pod] = byID
	}
	rs, ok := byID[id]
	if ok && rs[k.kind] == r {
		m.mu.Unlock()
		return false
	}
	rs[k.kind] = r
	byID[id] = rs
	m.mu.Unlock()
	if m.opts.Updated != nil {
		m.opts.Updated(k.pod, k.kind, r)
	}
	return true
}

// forget drops a worker's result for an instance it no longer probes.
func (m *Manager) forget(w *worker, id string) {
	k := w.key
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.workers.get(k) != w {
		return // removed meanwhile: the pod's results are gone, or a new worker's
	}
	byID := m.results[k.pod]
	rs, ok := byID[id]
	if !ok {
		return
	}
	rs[k.kind] = None
	if rs == ([3]Result{}) {
		delete(byID, id)
	} else {
		byID[id] = rs
	}
}

// removeWorker forgets a worker that ended, and its result.
func (m *Manager) removeWorker(w *worker, id string) {
	if id != "" {
		m.forget(w, id)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.workers.get(w.key) == w {
		m.workers.remove(w.key)
	}
}

// execScope is a pod's exec probes' context and what ends it.
type execScope struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// execScope returns the pod's exec scope, made on first use; m.mu is held.
func (m *Manager) execScope(uid types.UID) execScope {
	e, ok := m.execs[uid]
	if !ok {
		e.ctx, e.cancel = context.WithCancel(m.ctx)
		m.execs[uid] = e
	}
	return e
}

// execContext is the context exec probes of the pod run in: before 1.37 it ends when the pod
// terminates.
func (m *Manager) execContext(uid types.UID) context.Context {
	if m.opts.Release.ExecProbesWhileTerminating() {
		return m.ctx
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.execScope(uid).ctx
}
