package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// jobSetReader reads the agent's one JobSet as the released agent's cache does: a LIST filtered
// by name in the apiserver, then a WATCH from the list's resourceVersion. Every agent of a group
// receives every change of its JobSet — thousands of agents, hundreds of changes in one group
// restart — so each object is decoded into the few fields the agent acts on (observedJobSet),
// never into the whole JobSet with its pod templates and managed fields.
type jobSetReader struct {
	client          rest.Interface
	namespace, name string
}

func newJobSetReader(cfg *rest.Config, namespace, name string) (*jobSetReader, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.APIPath = "/apis"
	cfg.GroupVersion = &jobsetv1alpha2.GroupVersion
	cfg.ContentType, cfg.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON // a CRD speaks JSON
	// The serializer only reads the apiserver's error Statuses; objects are decoded below.
	statuses := runtime.NewScheme()
	metav1.AddToGroupVersion(statuses, jobsetv1alpha2.GroupVersion)
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(statuses).WithoutConversion()
	c, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &jobSetReader{client: c, namespace: namespace, name: name}, nil
}

// observedJobSet is what the agent reads of its JobSet (docs/jobset.md, "Agent": the disable annotation,
// the failure policy's restart strategy, the two in-place attempts).
type observedJobSet struct {
	Metadata observedMeta   `json:"metadata"`
	Spec     observedSpec   `json:"spec"`
	Status   observedStatus `json:"status"`
}

type observedMeta struct {
	Name            string            `json:"name"`
	Namespace       string            `json:"namespace"`
	ResourceVersion string            `json:"resourceVersion"`
	Annotations     map[string]string `json:"annotations"`
}

type observedSpec struct {
	FailurePolicy *struct {
		RestartStrategy jobsetv1alpha2.JobSetRestartStrategy `json:"restartStrategy"`
	} `json:"failurePolicy"`
}

type observedStatus struct {
	CurrentInPlaceRestartAttempt  *int32 `json:"currentInPlaceRestartAttempt"`
	PreviousInPlaceRestartAttempt *int32 `json:"previousInPlaceRestartAttempt"`
}

// watchObject is a watch event's object, decoded in the same pass as the event: a JobSet's
// observed fields, or an error event's Status message. The two share the key "status" (an object
// in a JobSet, a string in a Status), so that is kept raw and decoded once the type is known.
// (Decoding the object as raw bytes first and then again scanned each event's three to four
// kilobytes four times, the agents' largest cost at 1000 pods.)
type watchObject struct {
	Metadata observedMeta    `json:"metadata"`
	Spec     observedSpec    `json:"spec"`
	Status   json.RawMessage `json:"status"`
	Message  string          `json:"message"`
}

// jobSet is the observation as the JobSet the agent reconciles, holding only those fields.
func (o *observedJobSet) jobSet() *jobsetv1alpha2.JobSet {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: o.Metadata.Name, Namespace: o.Metadata.Namespace,
		ResourceVersion: o.Metadata.ResourceVersion, Annotations: o.Metadata.Annotations}}
	if fp := o.Spec.FailurePolicy; fp != nil {
		js.Spec.FailurePolicy = &jobsetv1alpha2.FailurePolicy{RestartStrategy: fp.RestartStrategy}
	}
	js.Status.CurrentInPlaceRestartAttempt = o.Status.CurrentInPlaceRestartAttempt
	js.Status.PreviousInPlaceRestartAttempt = o.Status.PreviousInPlaceRestartAttempt
	return js
}

func (r *jobSetReader) request() *rest.Request {
	return r.client.Get().Namespace(r.namespace).Resource("jobsets").
		Param("fieldSelector", fields.OneTermEqualSelector("metadata.name", r.name).String())
}

// list returns the JobSet, nil if it does not exist, and the list's resourceVersion.
func (r *jobSetReader) list(ctx context.Context) (*jobsetv1alpha2.JobSet, string, error) {
	result := r.request().Do(ctx)
	if err := result.Error(); err != nil { // the apiserver's Status, as a typed client reports it
		return nil, "", fmt.Errorf("listing JobSet %s/%s: %w", r.namespace, r.name, err)
	}
	raw, _ := result.Raw() // its error is the one Error() just reported as nil
	var list struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Items []observedJobSet `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, "", fmt.Errorf("listing JobSet %s/%s: %w", r.namespace, r.name, err)
	}
	if len(list.Items) == 0 {
		return nil, list.Metadata.ResourceVersion, nil
	}
	return list.Items[0].jobSet(), list.Metadata.ResourceVersion, nil
}

// watchEvent is one event of the watch: the JobSet (nil for a bookmark), or the apiserver's
// message for an error.
type watchEvent struct {
	Type    watch.EventType
	JobSet  *jobsetv1alpha2.JobSet
	Message string
}

// watch watches the JobSet from resourceVersion and calls f for each event until the watch ends
// (nil), ctx ends (nil), the stream fails or f returns an error.
func (r *jobSetReader) watch(ctx context.Context, resourceVersion string, f func(watchEvent) (stop bool, err error)) error {
	stream, err := r.request().Param("watch", "true").Param("resourceVersion", resourceVersion).
		Param("allowWatchBookmarks", "true").Stream(ctx)
	if err != nil {
		return fmt.Errorf("watching JobSet %s/%s: %w", r.namespace, r.name, err)
	}
	defer stream.Close()
	return readWatch(ctx, stream, r.namespace+"/"+r.name, f)
}

// readWatch decodes the watch events of the JobSet named (namespace/name) from stream and calls f
// for each until the stream ends (nil), ctx ends (nil), the stream fails or f returns an error.
//
// The apiserver writes one event per line (its JSON encoder ends each with a newline, and JSON
// it writes holds no other), so events are framed by lines before they are decoded; a line that
// is not whole JSON is an error. Framing by newline is a byte search, while finding the end of
// a JSON value means scanning it.
func readWatch(ctx context.Context, stream io.Reader, named string, f func(watchEvent) (stop bool, err error)) error {
	lines := newLineReader(stream)
	for {
		line, readErr := lines.next()
		if readErr != nil && ctx.Err() != nil {
			return nil
		}
		if len(bytes.TrimSpace(line)) > 0 {
			ev, err := decodedEvents.decode(line)
			if err != nil {
				return fmt.Errorf("watch of JobSet %s: %w", named, err)
			}
			if stop, err := f(ev); stop || err != nil {
				return err
			}
		}
		switch {
		case errors.Is(readErr, io.EOF):
			return nil
		case readErr != nil:
			return fmt.Errorf("watch of JobSet %s: %w", named, readErr)
		}
	}
}

// decodeEvent decodes one watch event.
func decodeEvent(line []byte) (watchEvent, error) {
	var e struct {
		Type   watch.EventType `json:"type"`
		Object watchObject     `json:"object"`
	}
	if err := json.Unmarshal(line, &e); err != nil {
		return watchEvent{}, err
	}
	ev := watchEvent{Type: e.Type}
	switch e.Type {
	case watch.Added, watch.Modified, watch.Deleted:
		o := observedJobSet{Metadata: e.Object.Metadata, Spec: e.Object.Spec}
		if len(e.Object.Status) > 0 {
			if err := json.Unmarshal(e.Object.Status, &o.Status); err != nil {
				return watchEvent{}, fmt.Errorf("status: %w", err)
			}
		}
		ev.JobSet = o.jobSet()
	case watch.Error:
		ev.Message = e.Object.Message
	case watch.Bookmark:
	default:
		return watchEvent{}, fmt.Errorf("unknown event type %q", e.Type)
	}
	return ev, nil
}

// lineReader splits a stream into lines, each without its newline; a line is valid until the
// next call.
type lineReader struct {
	r    *bufio.Reader
	long []byte // a line longer than r's buffer, gathered
}

func newLineReader(r io.Reader) *lineReader { return &lineReader{r: bufio.NewReaderSize(r, 8<<10)} }

// next returns the next line and, at the stream's end, its error (io.EOF or another), with the
// last line if it had no newline.
func (l *lineReader) next() ([]byte, error) {
	line, err := l.r.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
	l.long = append(l.long[:0], line...)
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = l.r.ReadSlice('\n')
		l.long = append(l.long, line...)
	}
	return bytes.TrimSuffix(l.long, []byte("\n")), err
}

// decodedEvents are the events this process decoded last. Every agent of a group receives the
// same bytes for each change of its JobSet (the apiserver serializes an event once for all its
// watchers), and the agents that share a process, hundreds or thousands in a kubelet shard,
// decode each event once instead of once an agent. Each agent still reads its own stream, as
// the apiserver's fan-out to every agent is real. The JobSets they hold are shared: read only.
var decodedEvents = newEventMemo(64)

// eventMemo remembers the decoding of the last lines it decoded, by their bytes.
type eventMemo struct {
	seed maphash.Seed

	mu      sync.Mutex
	entries map[uint64]memoEntry
	ring    []uint64 // the keys, oldest first from next, to forget the oldest
	next    int
}

type memoEntry struct {
	line  []byte
	event watchEvent
}

func newEventMemo(size int) *eventMemo {
	return &eventMemo{seed: maphash.MakeSeed(), entries: make(map[uint64]memoEntry, size), ring: make([]uint64, 0, size)}
}

// decode decodes line as decodeEvent does, or returns what it returned for the same bytes.
// Errors are not remembered.
func (m *eventMemo) decode(line []byte) (watchEvent, error) {
	key := maphash.Bytes(m.seed, line)
	m.mu.Lock()
	e, ok := m.entries[key]
	m.mu.Unlock()
	if ok && bytes.Equal(e.line, line) {
		return e.event, nil
	}
	ev, err := decodeEvent(line)
	if err != nil {
		return ev, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.entries[key]; !ok {
		if len(m.ring) < cap(m.ring) {
			m.ring = append(m.ring, key)
		} else {
			delete(m.entries, m.ring[m.next])
			m.ring[m.next] = key
			m.next = (m.next + 1) % len(m.ring)
		}
	}
	m.entries[key] = memoEntry{line: bytes.Clone(line), event: ev}
	return ev, nil
}
