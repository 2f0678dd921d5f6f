package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/restartbed/restartbed/fakekubelet/restart"
)

// Manager publishes the pod statuses the kubelet generates, as the kubelet's status manager does:
// for each pod the latest status is written with one strategic-merge patch against the last
// status written (the kubelet's patch, carrying the pod's UID so that a replacement pod of the
// same name is never touched), writes for one pod never overlap or reorder, a status set while another is being written is
// written next, and a status set twice before it could be written is written once. A status that
// would make the apiserver refuse the patch — a terminal phase left, a container revived that may
// not restart — is never sent. While a pod is held (its node is cut off from the apiserver)
// nothing is written for it and its latest status waits; Reconnect publishes it against what the
// API holds by then.
type Manager struct {
	client func(node string) typedcorev1.PodsGetter
	rules  restart.Rules
	held   func(types.UID) bool
	queue  workqueue.TypedRateLimitingInterface[types.UID]

	mu   sync.Mutex
	pods map[types.UID]*podStatus

	writes atomic.Int64
}

// podStatus is what the manager knows of one pod.
type podStatus struct {
	namespace, name string
	spec            *corev1.PodSpec
	// desired is the latest status set, version counts the Sets.
	desired corev1.PodStatus
	version uint64
	// changes counts what a ContainerReader must read again after: the Sets and the Forget.
	// It is written under the Manager's lock and read without it.
	changes atomic.Uint64
	// published is the status the API holds as far as we know (the base of the next patch), and
	// publishedVersion the version it came from.
	published        corev1.PodStatus
	publishedVersion uint64
	// waiters wait for a version to be published.
	waiters []statusWaiter
	// gone: the pod was deleted or replaced; nothing more is written.
	gone bool
}

type statusWaiter struct {
	version uint64
	done    chan error
}

// ErrPodGone is returned to waiters whose pod was deleted or replaced by another with its name.
var ErrPodGone = errors.New("the pod is gone")

// Options configure a Manager.
type Options struct {
	// Client is how the kubelet of a node writes the status of its pods (node identities:
	// package fakekubelet). Required; OneClient serves every node with one client.
	Client func(node string) typedcorev1.PodsGetter
	// Rules say which containers may restart, for the transition check.
	Rules restart.Rules
	// Held reports whether a pod's statuses must wait: its kubelet cannot reach the apiserver.
	// Optional.
	Held func(types.UID) bool
	// Clock times the retries of failed writes. Default: the real clock.
	Clock clock.WithTicker
}

// Retries of a pod's failed write back off from retryBase to retryMax. The kubelet retries
// every pod whose status it could not write at its next batch sync, 10 s later (syncPeriod in
// pkg/kubelet/status/status_manager.go); the first retries come sooner here, the last no later.
const (
	retryBase = 5 * time.Millisecond
	retryMax  = 10 * time.Second
)

// OneClient writes every node's pod status with c.
func OneClient(c typedcorev1.PodsGetter) func(string) typedcorev1.PodsGetter {
	return func(string) typedcorev1.PodsGetter { return c }
}

// New returns a Manager; Run starts its writers.
func New(opts Options) (*Manager, error) {
	if opts.Client == nil {
		return nil, errors.New("status: Options.Client is required")
	}
	held := opts.Held
	if held == nil {
		held = func(types.UID) bool { return false }
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Manager{
		client: opts.Client,
		rules:  opts.Rules,
		held:   held,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](retryBase, retryMax),
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "restartbed-pod-status", Clock: clk}),
		pods: map[types.UID]*podStatus{},
	}, nil
}

// Set records status as the pod's latest and queues its publication; it returns at once. pod is
// the pod as last seen in the API: its status is the base of the first patch.
func (m *Manager) Set(pod *corev1.Pod, status corev1.PodStatus) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.pods[pod.UID]
	if ps == nil {
		ps = &podStatus{namespace: pod.Namespace, name: pod.Name, published: *pod.Status.DeepCopy()}
		m.pods[pod.UID] = ps
	} else if ps.version > 0 && apiequality.Semantic.DeepEqual(ps.desired, status) {
		// The kubelet regenerates a pod's status on every event, its own writes included; an
		// unchanged status costs no queueing and no patch computation.
		return ps.version
	}
	ps.spec = &pod.Spec
	ps.desired = *status.DeepCopy()
	ps.version++
	ps.changes.Add(1)
	m.queue.Add(pod.UID)
	return ps.version
}

// SetAndWait sets the status and waits until it, or a later one, is in the API: for the states
// a reader must be able to observe, however briefly they last. For a held pod it returns at once:
// a kubelet cut off from the apiserver goes on without it, and a later status may replace this
// one before the partition ends, as it would on a cluster.
func (m *Manager) SetAndWait(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus) error {
	version := m.Set(pod, status)
	done := make(chan error, 1)
	m.mu.Lock()
	ps := m.pods[pod.UID]
	switch {
	case m.held(pod.UID):
		done <- nil
	case ps.gone:
		done <- ErrPodGone
	case ps.publishedVersion >= version:
		done <- nil
	default:
		ps.waiters = append(ps.waiters, statusWaiter{version: version, done: done})
	}
	m.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Latest returns the last status set for the pod: the kubelet's "old status" for the next
// generation. After a restart of the kubelet there is none, and the API's status is used.
func (m *Manager) Latest(uid types.UID) (corev1.PodStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.pods[uid]
	if ps == nil {
		return corev1.PodStatus{}, false
	}
	return *ps.desired.DeepCopy(), true
}

// ContainerView is what the kubelet's last status says of one container: what a probe worker
// reads, copied without the rest of the container's status.
type ContainerView struct {
	// ID is the instance's container ID ("containerd://..."), "" before one was created.
	ID string
	// Running: the instance runs, since StartedAt.
	Running   bool
	StartedAt time.Time
	// Started is the status's started flag.
	Started bool
}

// ContainerReader returns a function that returns the pod's phase and the named (regular or init)
// container's view in the last status set for the pod, false when there is none for either. It
// is for one reader that asks often, a probe worker every period: it keeps what it last read and
// reads the status again only after the pod's status was set or forgotten, so that most calls
// read one counter instead of taking the Manager's lock and looking the pod up among thousands
// (on a large heap, those lookups' cache misses were most of what a waiting probe cost). The
// function is not safe for concurrent use.
func (m *Manager) ContainerReader(uid types.UID, name string) func() (corev1.PodPhase, ContainerView, bool) {
	r := &containerReader{m: m, uid: uid, name: name}
	return r.read
}

// containerReader is the state of one ContainerReader.
type containerReader struct {
	m       *Manager
	uid     types.UID
	name    string
	ps      *podStatus // the pod's entry last read; nil when there was none
	changes uint64     // ps.changes when it was read
	phase   corev1.PodPhase
	view    ContainerView
	found   bool
}

func (r *containerReader) read() (corev1.PodPhase, ContainerView, bool) {
	if r.ps != nil && r.ps.changes.Load() == r.changes {
		return r.phase, r.view, r.found
	}
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	r.ps, r.phase, r.view, r.found = r.m.pods[r.uid], "", ContainerView{}, false
	if r.ps == nil {
		return "", ContainerView{}, false
	}
	r.changes = r.ps.changes.Load()
	s := &r.ps.desired
	r.phase = s.Phase
	for _, statuses := range [][]corev1.ContainerStatus{s.ContainerStatuses, s.InitContainerStatuses} {
		if cs := restart.StatusOf(statuses, r.name); cs != nil {
			r.view = ContainerView{ID: cs.ContainerID, Running: cs.State.Running != nil, Started: cs.Started != nil && *cs.Started}
			if r.view.Running {
				r.view.StartedAt = cs.State.Running.StartedAt.Time
			}
			r.found = true
			break
		}
	}
	return r.phase, r.view, r.found
}

// Reconnect is for a kubelet that can reach the apiserver again: apiPod is the pod as the API
// holds it now (other components may have written its status meanwhile: the node controller's
// Ready=False, a DisruptionTarget condition). It becomes the base of the next patch, and the
// latest status is published against it if it differs.
func (m *Manager) Reconnect(apiPod *corev1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.pods[apiPod.UID]
	if ps == nil || ps.gone {
		return
	}
	ps.published = *apiPod.Status.DeepCopy()
	m.queue.Add(apiPod.UID)
}

// Forget drops a pod that left the API; its waiters learn it is gone.
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ps := m.pods[uid]; ps != nil {
		ps.gone = true
		ps.changes.Add(1)
		answerWaiters(ps, ErrPodGone)
		delete(m.pods, uid)
	}
}

// answerWaiters answers the waiters that the published version satisfies, or all with err; m.mu is held.
func answerWaiters(ps *podStatus, err error) {
	kept := ps.waiters[:0]
	for _, w := range ps.waiters {
		if err != nil || w.version <= ps.publishedVersion {
			w.done <- err
			continue
		}
		kept = append(kept, w)
	}
	ps.waiters = kept
}

// Writes counts the status patches sent, for benchmarks (status writes per pod start).
func (m *Manager) Writes() int64 { return m.writes.Load() }

// Run publishes with the given number of workers until ctx ends.
func (m *Manager) Run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for m.publishNext(ctx) {
			}
		})
	}
	<-ctx.Done()
	m.queue.ShutDown()
	wg.Wait()
}

func (m *Manager) publishNext(ctx context.Context) bool {
	uid, shutdown := m.queue.Get()
	if shutdown {
		return false
	}
	defer m.queue.Done(uid)
	if err := m.publish(ctx, uid); err != nil && ctx.Err() == nil {
		klog.FromContext(ctx).Error(err, "Publishing pod status failed; will retry", "podUID", uid)
		m.queue.AddRateLimited(uid) // backs off; the workqueue keeps one writer per pod
		return true
	}
	m.queue.Forget(uid)
	return true
}

// publish writes the pod's latest status if it differs from what the API holds.
func (m *Manager) publish(ctx context.Context, uid types.UID) error {
	m.mu.Lock()
	ps := m.pods[uid]
	if ps == nil || ps.gone || m.held(uid) {
		m.mu.Unlock()
		return nil // a held pod's status waits for Reconnect
	}
	namespace, name, spec := ps.namespace, ps.name, ps.spec
	old, desired, version := *ps.published.DeepCopy(), *ps.desired.DeepCopy(), ps.version
	m.mu.Unlock()

	if err := m.allowed(spec, &old, &desired); err != nil {
		// A bug in the emulation, not something to retry: the kubelet refuses it the same way.
		klog.FromContext(ctx).Error(err, "Refusing to publish a pod status the apiserver forbids",
			"pod", klog.KRef(namespace, name))
		m.mu.Lock()
		answerWaiters(ps, fmt.Errorf("status of pod %s/%s not published: %w", namespace, name, err))
		m.mu.Unlock()
		return nil
	}

	patch, unchanged, err := Patch(uid, old, desired)
	if err != nil {
		return fmt.Errorf("computing the status patch of pod %s/%s: %w", namespace, name, err)
	}
	var updated *corev1.Pod
	if !unchanged {
		node := ""
		if spec != nil {
			node = spec.NodeName
		}
		updated, err = m.client(node).Pods(namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	}
	switch {
	case apierrors.IsNotFound(err), replaced(err):
		m.Forget(uid)
		return nil
	case err != nil:
		return fmt.Errorf("patching the status of pod %s/%s: %w", namespace, name, err)
	}
	if !unchanged {
		m.writes.Add(1)
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if updated != nil {
		ps.published = updated.Status
	} else {
		ps.published = desired
	}
	ps.publishedVersion = version
	answerWaiters(ps, nil)
	return nil
}

// Patch is the strategic merge patch from old to desired that the kubelet sends: the
// status difference plus the pod's UID, which makes the apiserver refuse the patch for another
// pod of the same name. (Upstream's PatchPodStatus builds the same patch but flattens the error,
// which restartbed must classify.)
func Patch(uid types.UID, old, desired corev1.PodStatus) ([]byte, bool, error) {
	oldData, err := json.Marshal(corev1.Pod{Status: old})
	if err != nil {
		return nil, false, err
	}
	newData, err := json.Marshal(corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: desired})
	if err != nil {
		return nil, false, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, corev1.Pod{})
	if err != nil {
		return nil, false, err
	}
	uidOnly := fmt.Sprintf(`{"metadata":{"uid":%q}}`, uid)
	return patch, string(patch) == uidOnly, nil
}

// replaced reports whether a patch failed because the pod was replaced by another of the same
// name: the patch carries the old UID, which the apiserver refuses as a change of an immutable
// field.
func replaced(err error) bool {
	if !apierrors.IsInvalid(err) {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, cause := range status.Status().Details.Causes {
		if cause.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

// allowed checks what the apiserver's status-update validation would refuse: a terminal phase
// left, and a container moved from terminated back to running or waiting when it may not restart
// (any move is allowed for a pod that could restart all its containers).
func (m *Manager) allowed(spec *corev1.PodSpec, old, desired *corev1.PodStatus) error {
	if restart.IsTerminal(old.Phase) && desired.Phase != old.Phase {
		return fmt.Errorf("phase may not change from %s to %s", old.Phase, desired.Phase)
	}
	if spec == nil || m.rules.CouldRestartAll(spec) {
		return nil
	}
	check := func(containers []corev1.Container, olds, news []corev1.ContainerStatus, field string) error {
		for i := range containers {
			c := &containers[i]
			before, after := restart.StatusOf(olds, c.Name), restart.StatusOf(news, c.Name)
			if before == nil || after == nil || before.State.Terminated == nil || after.State.Terminated != nil {
				continue
			}
			if restart.IsSidecar(c) || m.rules.ShouldRestart(c, spec.RestartPolicy, before.State.Terminated.ExitCode) {
				continue
			}
			return fmt.Errorf("%s %q may not be transitioned to non-terminated state", field, c.Name)
		}
		return nil
	}
	if err := check(spec.InitContainers, old.InitContainerStatuses, desired.InitContainerStatuses, "init container"); err != nil {
		return err
	}
	return check(spec.Containers, old.ContainerStatuses, desired.ContainerStatuses, "container")
}
