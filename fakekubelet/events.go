package fakekubelet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Event reasons the kubelet writes (k8s.io/kubernetes/pkg/kubelet/events) that this package
// records itself; package images has those of pulls (Pulling, Pulled, ...).
const (
	eventCreated   = "Created"
	eventStarted   = "Started"
	eventKilling   = "Killing"
	eventBackOff   = "BackOff"
	eventFailed    = "Failed"
	eventUnhealthy = "Unhealthy"
	// eventFailedPostStartHook: a container's postStart hook failed; the kubelet kills it.
	eventFailedPostStartHook = "FailedPostStartHook"
	// eventFailedPreStopHook: a container's preStop hook failed; the kill goes on.
	eventFailedPreStopHook = "FailedPreStopHook"
	// eventFailedMount: a volume of the pod could not be set up.
	eventFailedMount = "FailedMount"
	// eventSandboxChanged: the pod's sandbox stopped under it; the kubelet makes a new one.
	eventSandboxChanged = "SandboxChanged"
)

// What each kubelet's event pipeline holds to, as the kubelet's: client-go's broadcaster keeps
// at most 1000 events waiting and drops the next ones; the kubelet's event client sends at most
// eventRecordQPS (50) a second with a burst of eventBurst (100); a write that fails for want of
// the apiserver is tried 12 times, 10 s apart, the first wait random.
const (
	eventQueueLimit = 1000
	eventQPS        = 50
	eventBurst      = 100
	eventTries      = 12
	eventRetryAfter = 10 * time.Second
)

// eventWriters bounds the Event writes in flight for all nodes at once. A cluster has a writer
// per kubelet; here the nodes share these, each node's events still written one at a time and in
// order, so that a burst on one node waits behind that node's own events only.
const eventWriters = StatusWorkers

// events records Events as each node's kubelet does (source component "kubelet", host the node):
// every node has its own correlator (the kubelet's aggregation into counts, its spam filter), its
// own queue of at most eventQueueLimit and its own rate limit, as every kubelet has its own
// broadcaster and event client. An event is made and correlated in the goroutine that records
// it, and only one to write is queued: one the spam filter drops (a startup probe failing every
// second while an agent waits at its barrier, 299 times in 300) costs its correlation and
// nothing else, where client-go's recorder would pass it through its broadcaster's goroutines
// first.
type events struct {
	clock clock.WithTicker
	log   klog.Logger
	ids   *identities
	// lost reports whether a node's events cannot reach the apiserver (a partition): the
	// kubelet's recorder retries for a while and drops them, so restartbed drops them at once.
	lost func(node string) bool
	// queue holds the names of the nodes with events to write; it hands each to one writer at a
	// time.
	queue workqueue.TypedDelayingInterface[string]
	done  sync.WaitGroup

	mu     sync.Mutex
	byNode map[string]*nodeEvents
}

// pendingEvent is an event made and not yet written.
type pendingEvent struct {
	ev *corev1.Event
	// correlated is the correlator's verdict, made at the first try only: a retried write is
	// the same event, not a repeat to count.
	correlated *record.EventCorrelateResult
}

// nodeEvents is one node's kubelet's event pipeline.
type nodeEvents struct {
	correlator *correlator
	// order makes the node's events queued in the order they were correlated: a repeat's patch
	// is written after the event it counts.
	order   sync.Mutex
	limiter flowcontrol.PassiveRateLimiter
	// pending are the events made and not yet written, oldest first; tries counts the failed
	// writes of the first.
	pending []*pendingEvent
	tries   int
	// dropped counts the events lost to a full queue, for the log.
	dropped int
}

func newEvents(ctx context.Context, clk clock.WithTicker, ids *identities, lost func(node string) bool) *events {
	e := &events{
		clock: clk,
		log:   klog.FromContext(ctx),
		ids:   ids,
		lost:  lost,
		queue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{
			Name: "restartbed-kubelet-events", Clock: clk}),
		byNode: map[string]*nodeEvents{},
	}
	for range eventWriters {
		e.done.Go(func() {
			for e.writeNext(ctx) {
			}
		})
	}
	return e
}

// node returns the node's pipeline, made at its first event.
func (e *events) node(name string) *nodeEvents {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.byNode[name]
	if n == nil {
		n = &nodeEvents{
			correlator: newCorrelator(e.clock, corev1.EventSource{Component: "kubelet", Host: name}),
			limiter:    flowcontrol.NewTokenBucketPassiveRateLimiterWithClock(eventQPS, eventBurst, e.clock),
		}
		e.byNode[name] = n
	}
	return n
}

// record makes an event about the object on the node, as a kubelet's recorder makes it, and
// correlates it: one to write goes to the node's queue, unless the queue is full (a kubelet's
// broadcaster then drops it before its correlator sees it); one the spam filter drops ends here.
func (e *events) record(node string, ref *corev1.ObjectReference, eventType, reason, format string, args ...any) {
	if e.lost(node) {
		return
	}
	n := e.node(node)
	n.order.Lock()
	defer n.order.Unlock()
	e.mu.Lock()
	full := len(n.pending) >= eventQueueLimit
	if full {
		n.dropped++
	}
	e.mu.Unlock()
	if full {
		return
	}
	result, err := n.correlator.correlate(ref, eventType, reason, fmt.Sprintf(format, args...))
	if err != nil {
		e.log.Error(err, "Correlating an event failed", "reason", reason)
	}
	if result == nil || result.Skip {
		return
	}
	e.mu.Lock()
	n.pending = append(n.pending, &pendingEvent{ev: result.Event, correlated: result})
	e.mu.Unlock()
	e.queue.Add(node)
}

// writeNext writes the events of the next node with some waiting, within its rate limit, until
// the node has none left or must wait; it reports false once the pipeline is shut down.
func (e *events) writeNext(ctx context.Context) bool {
	name, shutdown := e.queue.Get()
	if shutdown {
		return false
	}
	defer e.queue.Done(name)
	for {
		e.mu.Lock()
		n := e.byNode[name]
		if n == nil || len(n.pending) == 0 {
			e.mu.Unlock()
			return true
		}
		if n.dropped > 0 {
			klog.FromContext(ctx).Info("Dropped events: the node's queue was full", "node", name, "events", n.dropped)
			n.dropped = 0
		}
		if !n.limiter.TryAccept() {
			e.mu.Unlock()
			e.queue.AddAfter(name, time.Second/eventQPS) // when the next token is in the bucket
			return true
		}
		p, tries := n.pending[0], n.tries
		e.mu.Unlock()

		written := e.write(ctx, n, p)
		e.mu.Lock()
		if written || tries+1 >= eventTries {
			if !written {
				klog.FromContext(ctx).Error(nil, "Unable to write event (retry limit exceeded)", "node", name, "reason", p.ev.Reason,
					"object", klog.KRef(p.ev.InvolvedObject.Namespace, p.ev.InvolvedObject.Name))
			}
			n.pending[0] = nil
			n.pending, n.tries = n.pending[1:], 0
			e.mu.Unlock()
			continue
		}
		n.tries++
		e.mu.Unlock()
		delay := eventRetryAfter
		if tries == 0 {
			delay = time.Duration(rand.Float64() * float64(delay)) // kubelets apart after an outage
		}
		e.queue.AddAfter(name, delay)
		return true
	}
}

// write sends one event through the node's correlator: dropped by its spam filter, a patch of
// the count of one already written, or a new one. It reports false when the write should be
// tried again: the apiserver could not be reached.
func (e *events) write(ctx context.Context, n *nodeEvents, p *pendingEvent) bool {
	ev := p.ev
	if e.lost(ev.Source.Host) {
		return true // cut off since it was made
	}
	result := p.correlated
	events := e.ids.client(ev.Source.Host).CoreV1().Events(result.Event.Namespace)
	var (
		written *corev1.Event
		err     error
	)
	update := result.Event.Count > 1
	if update {
		written, err = events.Patch(ctx, result.Event.Name, types.StrategicMergePatchType, result.Patch, metav1.PatchOptions{})
	}
	if !update || apierrors.IsNotFound(err) {
		created := result.Event.DeepCopy()
		created.ResourceVersion = ""
		written, err = events.Create(ctx, created, metav1.CreateOptions{})
	}
	if err == nil {
		n.correlator.updateState(written)
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		// The apiserver refused it (already exists, its namespace terminating, invalid): trying
		// again would be refused again.
		klog.FromContext(ctx).V(5).Info("Server rejected event", "reason", ev.Reason, "err", err)
		return true
	}
	klog.FromContext(ctx).V(2).Info("Unable to write event; will retry", "reason", ev.Reason, "err", err)
	return false
}

// forgetNode drops what the node's kubelet held of its events, unwritten ones included: the
// kubelet process restarted, or the node is let go.
func (e *events) forgetNode(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.byNode, name)
}

// container records an event about one container of the pod, as the kubelet does: the object is
// the pod with the container's field path.
func (e *events) container(pod *corev1.Pod, c *corev1.Container, eventType, reason, format string, args ...any) {
	ref := podRef(pod)
	ref.FieldPath = fieldPath(pod, c.Name)
	e.record(pod.Spec.NodeName, ref, eventType, reason, format, args...)
}

// pod records an event about the pod as a whole.
func (e *events) pod(pod *corev1.Pod, eventType, reason, format string, args ...any) {
	e.record(pod.Spec.NodeName, podRef(pod), eventType, reason, format, args...)
}

func podRef(pod *corev1.Pod) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion}
}

// fieldPath is the path of the pod's container of that name in its spec, as the kubelet's
// container references have it.
func fieldPath(pod *corev1.Pod, name string) string {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return fmt.Sprintf("spec.initContainers{%s}", name)
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return fmt.Sprintf("spec.ephemeralContainers{%s}", name)
		}
	}
	return fmt.Sprintf("spec.containers{%s}", name)
}

// stop ends the writers; events not yet written are lost, as a kubelet's
// are when it stops.
func (e *events) stop() {
	e.queue.ShutDown()
	e.done.Wait()
}
