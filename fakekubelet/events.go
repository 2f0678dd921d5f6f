package fakekubelet

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// Event reasons the kubelet writes (k8s.io/kubernetes/pkg/kubelet/events). restartbed records the
// ones about trouble and stops, and those of images (package images: Pulling, Pulled, ...); it
// does not record Created and Started yet, which would add two API writes to every container
// start.
const (
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
)

// events records Events as each node's kubelet (source component "kubelet", host the node),
// through one broadcaster for all nodes.
type events struct {
	broadcaster record.EventBroadcaster
	// lost reports whether a node's events cannot reach the apiserver (a partition): the
	// kubelet's recorder retries for a while and drops them, so restartbed drops them at once.
	lost   func(node string) bool
	mu     sync.Mutex
	byNode map[string]record.EventRecorder
}

func newEvents(ctx context.Context, ids *identities, lost func(node string) bool) *events {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(nodeSink{ids: ids})
	return &events{broadcaster: b, byNode: map[string]record.EventRecorder{}, lost: lost}
}

// nodeSink writes each event as the kubelet of the node that recorded it (its source's host).
type nodeSink struct{ ids *identities }

func (s nodeSink) sink(e *corev1.Event) record.EventSink {
	return &typedcorev1.EventSinkImpl{Interface: s.ids.client(e.Source.Host).CoreV1().Events("")}
}

func (s nodeSink) Create(e *corev1.Event) (*corev1.Event, error) { return s.sink(e).Create(e) }
func (s nodeSink) Update(e *corev1.Event) (*corev1.Event, error) { return s.sink(e).Update(e) }
func (s nodeSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.sink(e).Patch(e, data)
}

func (e *events) recorder(node string) record.EventRecorder {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.byNode[node]
	if r == nil {
		r = e.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: node})
		e.byNode[node] = r
	}
	return r
}

// container records an event about one container of the pod, as the kubelet does: the object is
// the pod with the container's field path.
func (e *events) container(pod *corev1.Pod, c *corev1.Container, eventType, reason, format string, args ...any) {
	if e.lost(pod.Spec.NodeName) {
		return
	}
	field := fmt.Sprintf("spec.containers{%s}", c.Name)
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			field = fmt.Sprintf("spec.initContainers{%s}", c.Name)
		}
	}
	ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion, FieldPath: field}
	e.recorder(pod.Spec.NodeName).Eventf(ref, eventType, reason, format, args...)
}

// pod records an event about the pod as a whole.
func (e *events) pod(pod *corev1.Pod, eventType, reason, format string, args ...any) {
	if e.lost(pod.Spec.NodeName) {
		return
	}
	ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion}
	e.recorder(pod.Spec.NodeName).Eventf(ref, eventType, reason, format, args...)
}

// stop flushes nothing more and ends the broadcaster's goroutines.
func (e *events) stop() { e.broadcaster.Shutdown() }
