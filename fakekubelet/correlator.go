package fakekubelet

import (
	"encoding/json"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
)

// The kubelet's event correlator's settings, client-go's defaults (record.CorrelatorOptions):
// an object may have 25 events from a source at once and one more every 5 minutes; 10 events
// that differ only in their message within 10 minutes are combined into one.
const (
	correlatorCacheSize      = 4096
	spamBurst                = 25
	spamQPS                  = 1. / 300.
	aggregateMaxEvents       = 10
	aggregateIntervalSeconds = 600
)

// correlator is one kubelet's event correlator: client-go's record.EventCorrelator with the
// kubelet's (default) options, built from client-go's own aggregator and spam filter, and
// deciding alike. Two things differ. The strategic-merge patch that raises a repeated event's
// count is made only for an event the spam filter lets through: client-go makes it for every
// repeat, and a probe that fails every second while a pod waits is a repeat the filter drops
// 299 times in 300 after its first 25; making those patches was most of what a waiting pod
// cost. And a written event never lowers the count of its repeats (updateState).
// TestCorrelatorAsClientGo holds the two to the same results.
type correlator struct {
	aggregator *record.EventAggregator
	spam       *record.EventSourceObjectSpamFilter

	mu sync.Mutex
	// seen is the count, first time, name and resource version of each event by its key, as
	// client-go's event logger keeps them.
	seen *lru.Cache
}

// seenEvent is what the correlator knows of an event it has correlated or seen written.
type seenEvent struct {
	count           int32
	firstTimestamp  metav1.Time
	name            string
	resourceVersion string
}

func newCorrelator(clk clock.PassiveClock) *correlator {
	return &correlator{
		aggregator: record.NewEventAggregator(correlatorCacheSize, record.EventAggregatorByReasonFunc,
			record.EventAggregatorByReasonMessageFunc, aggregateMaxEvents, aggregateIntervalSeconds, clk),
		spam: record.NewEventSourceObjectSpamFilter(correlatorCacheSize, spamBurst, spamQPS, clk, spamKey),
		seen: lru.New(correlatorCacheSize),
	}
}

// correlate is record.EventCorrelator.EventCorrelate: the event combined with similar ones,
// counted as a repeat of one already made, or dropped by the spam filter.
func (c *correlator) correlate(ev *corev1.Event) (*record.EventCorrelateResult, error) {
	aggregated, key := c.aggregator.EventAggregate(ev)
	seen := seenOf(aggregated)
	c.mu.Lock()
	var last seenEvent
	if v, ok := c.seen.Get(key); ok {
		last = v.(seenEvent)
	}
	if last.count > 0 {
		seen = last
		seen.count++
	}
	c.seen.Add(key, seen)
	c.mu.Unlock()
	// The spam filter keys on the source, the object and the type, which counting leaves as they
	// are: it can judge the event before it is copied.
	if c.spam.Filter(aggregated) {
		return &record.EventCorrelateResult{Skip: true}, nil
	}
	observed := *aggregated
	observed.Name, observed.ResourceVersion, observed.FirstTimestamp, observed.Count = seen.name, seen.resourceVersion,
		seen.firstTimestamp, seen.count
	result := &record.EventCorrelateResult{Event: &observed}
	if last.count == 0 {
		return result, nil
	}
	// The patch client-go makes: what differs from the event with no count, no last time and no
	// message.
	base := observed
	base.Count, base.LastTimestamp, base.Message = 0, metav1.NewTime(time.Unix(0, 0)), ""
	newData, _ := json.Marshal(&observed)
	oldData, _ := json.Marshal(&base)
	var err error
	result.Patch, err = strategicpatch.CreateTwoWayMergePatch(oldData, newData, &observed)
	return result, err
}

// updateState is record.EventCorrelator.UpdateState: the event as the apiserver wrote it. The
// kubelet's recorder correlates each event right before its write; restartbed's as it is made
// (events.record), so repeats made while this one waited to be written have counted past it
// already, and its count does not set them back.
func (c *correlator) updateState(ev *corev1.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key, written := eventKey(ev), seenOf(ev)
	if v, ok := c.seen.Get(key); ok && v.(seenEvent).count > written.count {
		written.count = v.(seenEvent).count
	}
	c.seen.Add(key, written)
}

// seenOf is what the correlator keeps of an event.
func seenOf(ev *corev1.Event) seenEvent {
	return seenEvent{count: ev.Count, firstTimestamp: ev.FirstTimestamp, name: ev.Name, resourceVersion: ev.ResourceVersion}
}

// eventKey is the key client-go's correlator counts repeats by: the source, the object with the
// container's field path, the type, reason and message.
func eventKey(ev *corev1.Event) string {
	o := &ev.InvolvedObject
	return strings.Join([]string{ev.Source.Component, ev.Source.Host, o.Kind, o.Namespace, o.Name, o.FieldPath, string(o.UID),
		o.APIVersion, ev.Type, ev.Reason, ev.Message}, "")
}

// spamKey is the key client-go's spam filter limits by: the source, the object and the type.
func spamKey(ev *corev1.Event) string {
	o := &ev.InvolvedObject
	return strings.Join([]string{ev.Source.Component, ev.Source.Host, o.Kind, o.Namespace, o.Name, string(o.UID), o.APIVersion,
		ev.Type}, "")
}
