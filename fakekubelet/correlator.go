package fakekubelet

import (
	"container/list"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// The kubelet's event correlator's settings, client-go's defaults (record.CorrelatorOptions):
// an object may have 25 events from a source at once and one more every 5 minutes; 10 events
// that differ only in their message within 10 minutes are combined into one.
const (
	correlatorCacheSize = 4096
	spamBurst           = 25
	spamQPS             = 1. / 300.
	aggregateMaxEvents  = 10
	aggregateInterval   = 600 * time.Second
	// combinedPrefix starts the message of an event combined from similar ones
	// (record.EventAggregatorByReasonMessageFunc).
	combinedPrefix = "(combined from similar events): "
)

// correlator is one kubelet's event correlator: client-go's record.EventCorrelator with the
// kubelet's (default) options — its aggregator by reason, its count of repeats and its spam
// filter by object — deciding as client-go does, with its caches and their sizes, held to it by
// TestCorrelatorAsClientGo. It differs in what it costs and in two things it does:
//
//   - It keys its caches by structs of the event's fields where client-go joins them into
//     strings (the source, which is the kubelet's own, left out), and it makes the Event only
//     for one the spam filter lets through. A startup probe that fails every second while its
//     agent waits at the barrier is a repeat the filter drops 299 times in 300 after its first
//     25: such a repeat costs three cache lookups and allocates nothing. (client-go's joined
//     keys could, in principle, take two different events for one when their fields'
//     concatenations match; the structs cannot.)
//   - The strategic-merge patch that raises a repeat's count is made only for an event the
//     filter lets through, where client-go makes it for every repeat; and a written event never
//     lowers the count of its repeats (updateState).
type correlator struct {
	clock  clock.PassiveClock
	source corev1.EventSource

	mu sync.Mutex
	// aggregates are client-go's EventAggregator records: the messages an object's events of
	// one reason had within aggregateInterval of each other.
	aggregates *lruCache[aggregateKey, aggregateRecord]
	// seen is the count, first time, name and resource version of each event, as client-go's
	// event logger keeps them.
	seen *lruCache[eventKey, seenEvent]
	// spam are the spam filter's token buckets.
	spam *lruCache[objectKey, flowcontrol.PassiveRateLimiter]
}

// objectKey is what client-go's spam filter limits by (getSpamKey), less the source: the object
// and the event's type.
type objectKey struct {
	kind, namespace, name, uid, apiVersion string
	eventType                              string
}

// objectKeyOf is the key of the event about ref, of that type.
func objectKeyOf(ref *corev1.ObjectReference, eventType string) objectKey {
	return objectKey{kind: ref.Kind, namespace: ref.Namespace, name: ref.Name, uid: string(ref.UID), apiVersion: ref.APIVersion,
		eventType: eventType}
}

// aggregateKey is what client-go's aggregator combines by (EventAggregatorByReasonFunc), less
// the source and the reporting controller and instance, which are the source: the object, the
// type and the reason.
type aggregateKey struct {
	objectKey
	reason string
}

// eventKey is what client-go's correlator counts repeats by (getEventKey), less the source: the
// object with the container's field path, the type, the reason and the message. An event
// combined from similar ones is counted by its aggregate's key instead (combined, no field path,
// no message).
type eventKey struct {
	aggregateKey
	fieldPath, message string
	combined           bool
}

// aggregateRecord is an aggregateKey's messages and when the last of them was made.
type aggregateRecord struct {
	messages sets.Set[string]
	last     time.Time
}

// seenEvent is what the correlator knows of an event it has correlated or seen written.
type seenEvent struct {
	count           int32
	firstTimestamp  metav1.Time
	name            string
	resourceVersion string
}

// newCorrelator returns the correlator of the kubelet whose events have that source.
func newCorrelator(clk clock.PassiveClock, source corev1.EventSource) *correlator {
	return &correlator{
		clock:      clk,
		source:     source,
		aggregates: newLRUCache[aggregateKey, aggregateRecord](correlatorCacheSize),
		seen:       newLRUCache[eventKey, seenEvent](correlatorCacheSize),
		spam:       newLRUCache[objectKey, flowcontrol.PassiveRateLimiter](correlatorCacheSize),
	}
}

// correlate is record.EventCorrelator.EventCorrelate for the event the kubelet's recorder makes
// now about the object (recorder.makeEvent): combined with similar ones, counted as a repeat of
// one already made, or dropped by the spam filter (Skip, and no Event).
func (c *correlator) correlate(ref *corev1.ObjectReference, eventType, reason, message string) (*record.EventCorrelateResult, error) {
	now := c.clock.Now()
	object := objectKeyOf(ref, eventType)
	// The kubelet's recorder reports as its source.
	reportingController, reportingInstance := c.source.Component, c.source.Host

	c.mu.Lock()
	// The aggregator: the tenth message of a reason within its interval makes the event one
	// combined from similar events, counted under the aggregate's key; it forgets one of the
	// messages (any, as client-go's set pops) to stay at ten.
	agg := aggregateKey{objectKey: object, reason: reason}
	rec, _ := c.aggregates.get(agg)
	if now.Sub(rec.last) > aggregateInterval {
		rec = aggregateRecord{messages: sets.New[string]()}
	}
	rec.messages.Insert(message)
	rec.last = now
	c.aggregates.add(agg, rec)
	key := eventKey{aggregateKey: agg, fieldPath: ref.FieldPath, message: message}
	if uint(rec.messages.Len()) >= aggregateMaxEvents {
		rec.messages.PopAny()
		key = eventKey{aggregateKey: agg, combined: true}
		message, reportingController, reportingInstance = combinedPrefix+message, "", ""
	}

	// The count of repeats.
	last, _ := c.seen.get(key)
	seen := last
	if last.count > 0 {
		seen.count++
	} else {
		seen = seenEvent{count: 1, firstTimestamp: metav1.NewTime(now), name: eventName(ref, now)}
	}
	c.seen.add(key, seen)

	// The spam filter.
	bucket, ok := c.spam.get(object)
	if !ok {
		bucket = flowcontrol.NewTokenBucketPassiveRateLimiterWithClock(spamQPS, spamBurst, c.clock)
	}
	pass := bucket.TryAccept()
	c.spam.add(object, bucket)
	c.mu.Unlock()
	if !pass {
		return &record.EventCorrelateResult{Skip: true}, nil
	}

	namespace := ref.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	observed := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: seen.name, Namespace: namespace, ResourceVersion: seen.resourceVersion},
		InvolvedObject: *ref, Reason: reason, Message: message, Type: eventType, Source: c.source,
		FirstTimestamp: seen.firstTimestamp, LastTimestamp: metav1.NewTime(now), Count: seen.count,
		ReportingController: reportingController, ReportingInstance: reportingInstance,
	}
	result := &record.EventCorrelateResult{Event: observed}
	if last.count == 0 {
		return result, nil
	}
	// The patch client-go makes: what differs from the event with no count, no last time and no
	// message.
	base := *observed
	base.Count, base.LastTimestamp, base.Message = 0, metav1.NewTime(time.Unix(0, 0)), ""
	newData, _ := json.Marshal(observed)
	oldData, _ := json.Marshal(&base)
	var err error
	result.Patch, err = strategicpatch.CreateTwoWayMergePatch(oldData, newData, observed)
	return result, err
}

// updateState is record.EventCorrelator.UpdateState: the event as the apiserver wrote it. The
// kubelet's recorder correlates each event right before its write; restartbed's as it is made
// (events.record), so repeats made while this one waited to be written have counted past it
// already, and its count does not set them back. Like client-go's, it counts a written combined
// event by its own message, not by its aggregate.
func (c *correlator) updateState(ev *corev1.Event) {
	key := eventKey{aggregateKey: aggregateKey{objectKey: objectKeyOf(&ev.InvolvedObject, ev.Type), reason: ev.Reason},
		fieldPath: ev.InvolvedObject.FieldPath, message: ev.Message}
	written := seenEvent{count: ev.Count, firstTimestamp: ev.FirstTimestamp, name: ev.Name, resourceVersion: ev.ResourceVersion}
	c.mu.Lock()
	defer c.mu.Unlock()
	if last, ok := c.seen.get(key); ok && last.count > written.count {
		written.count = last.count
	}
	c.seen.add(key, written)
}

// eventName is the name client-go's recorder gives an event: its object's name and the time in
// hexadecimal nanoseconds.
func eventName(ref *corev1.ObjectReference, now time.Time) string {
	return ref.Name + "." + strconv.FormatInt(now.UnixNano(), 16)
}

// lruCache is the cache client-go's correlator keeps each of its records in (k8s.io/utils/lru,
// golang-lru's): at most size entries, the least recently read or written forgotten first. Its
// keys and values are typed, so that a lookup hashes the key's fields rather than an interface
// holding them. It is not safe for concurrent use.
type lruCache[K comparable, V any] struct {
	size  int
	order *list.List // of *lruEntry[K, V], the most recent first
	items map[K]*list.Element
}

type lruEntry[K comparable, V any] struct {
	key   K
	value V
}

func newLRUCache[K comparable, V any](size int) *lruCache[K, V] {
	return &lruCache[K, V]{size: size, order: list.New(), items: map[K]*list.Element{}}
}

// get returns the key's value and makes it the most recent.
func (c *lruCache[K, V]) get(key K) (V, bool) {
	e, ok := c.items[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*lruEntry[K, V]).value, true
}

// add sets the key's value and makes it the most recent, forgetting the least recent entry if
// the cache is over its size.
func (c *lruCache[K, V]) add(key K, value V) {
	if e, ok := c.items[key]; ok {
		c.order.MoveToFront(e)
		e.Value.(*lruEntry[K, V]).value = value
		return
	}
	c.items[key] = c.order.PushFront(&lruEntry[K, V]{key: key, value: value})
	if c.order.Len() > c.size {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*lruEntry[K, V]).key)
	}
}
