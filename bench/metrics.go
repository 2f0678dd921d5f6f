package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// The apiserver's own counters, read from its /metrics endpoint: they see every client,
// restartbed's components and the in-process agents alike.
const (
	metricRequests = "apiserver_request_total"
	metricRejected = "apiserver_flowcontrol_rejected_requests_total"
	metricWait     = "apiserver_flowcontrol_request_wait_duration_seconds"
	// The watch events the apiserver sent, each to one watcher, and their sizes, by resource.
	metricWatchEvents = "apiserver_watch_events_total"
	metricWatchSizes  = "apiserver_watch_events_sizes"
)

// writeVerbs are the request verbs that change state, as reports name them.
var writeVerbs = map[string]bool{"CREATE": true, "UPDATE": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true}

// reportedVerb names the apiserver metrics' HTTP verbs as Kubernetes names the operations.
var reportedVerb = map[string]string{"POST": "CREATE", "PUT": "UPDATE"}

// background are the resources nodes write whatever pods do: heartbeats. They are reported apart
// from a restart's writes.
var background = map[string]bool{"leases": true, "nodes/status": true, "nodes": true}

// requestKey identifies a kind of request: "PATCH pods/status".
type requestKey struct {
	Verb     string
	Resource string // resource[/subresource]
}

func (k requestKey) String() string { return k.Verb + " " + k.Resource }

// apiCounts is a reading of the apiserver's counters.
type apiCounts struct {
	// requests by kind; throttled counts the 429s among them.
	requests, throttled map[requestKey]float64
	// rejected counts API Priority and Fairness's rejections by priority level and reason.
	rejected map[string]float64
	// waitSeconds and waited sum the time requests spent queued in APF, by priority level.
	waitSeconds, waited map[string]float64
	// watchEvents and watchBytes count the watch events sent, by resource.
	watchEvents, watchBytes map[string]float64
}

// readCounts scrapes the apiserver's /metrics.
func readCounts(ctx context.Context, cs kubernetes.Interface) (*apiCounts, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the apiserver's metrics: %w", err)
	}
	return parseCounts(bytes.NewReader(raw))
}

// parseCounts reads the counters bench uses from a Prometheus text exposition.
func parseCounts(r io.Reader) (*apiCounts, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing the apiserver's metrics: %w", err)
	}
	c := &apiCounts{requests: map[requestKey]float64{}, throttled: map[requestKey]float64{},
		rejected: map[string]float64{}, waitSeconds: map[string]float64{}, waited: map[string]float64{},
		watchEvents: map[string]float64{}, watchBytes: map[string]float64{}}
	if f := families[metricRequests]; f != nil {
		for _, m := range f.GetMetric() {
			l := labels(m)
			res := l["resource"]
			if l["subresource"] != "" {
				res += "/" + l["subresource"]
			}
			verb := l["verb"]
			if v, ok := reportedVerb[verb]; ok {
				verb = v
			}
			k := requestKey{Verb: verb, Resource: res}
			c.requests[k] += m.GetCounter().GetValue()
			if l["code"] == "429" {
				c.throttled[k] += m.GetCounter().GetValue()
			}
		}
	}
	if f := families[metricRejected]; f != nil {
		for _, m := range f.GetMetric() {
			l := labels(m)
			c.rejected[l["priority_level"]+" ("+l["reason"]+")"] += m.GetCounter().GetValue()
		}
	}
	if f := families[metricWait]; f != nil {
		for _, m := range f.GetMetric() {
			l := labels(m)
			c.waitSeconds[l["priority_level"]] += m.GetHistogram().GetSampleSum()
			c.waited[l["priority_level"]] += float64(m.GetHistogram().GetSampleCount())
		}
	}
	if f := families[metricWatchEvents]; f != nil {
		for _, m := range f.GetMetric() {
			c.watchEvents[labels(m)["resource"]] += m.GetCounter().GetValue()
		}
	}
	if f := families[metricWatchSizes]; f != nil {
		for _, m := range f.GetMetric() {
			c.watchBytes[labels(m)["resource"]] += m.GetHistogram().GetSampleSum()
		}
	}
	return c, nil
}

func labels(m *dto.Metric) map[string]string {
	l := make(map[string]string, len(m.GetLabel()))
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// since returns what was counted between before and c.
func (c *apiCounts) since(before *apiCounts) *apiCounts {
	return &apiCounts{requests: increase(c.requests, before.requests), throttled: increase(c.throttled, before.throttled),
		rejected: increase(c.rejected, before.rejected), waitSeconds: increase(c.waitSeconds, before.waitSeconds), waited: increase(c.waited, before.waited),
		watchEvents: increase(c.watchEvents, before.watchEvents), watchBytes: increase(c.watchBytes, before.watchBytes)}
}

// whole rounds counters for a report; nil if there are none.
func whole(m map[string]float64) map[string]int64 {
	if len(m) == 0 {
		return nil
	}
	w := make(map[string]int64, len(m))
	for k, v := range m {
		w[k] = int64(v)
	}
	return w
}

// increase returns the counters that grew from then to now, by how much.
func increase[K comparable](now, then map[K]float64) map[K]float64 {
	d := map[K]float64{}
	for k, v := range now {
		if v -= then[k]; v > 0 {
			d[k] = v
		}
	}
	return d
}

// writes returns the write requests counted, without the nodes' heartbeats, by kind.
func (c *apiCounts) writes() map[string]int64 {
	w := map[string]int64{}
	for k, v := range c.requests {
		if writeVerbs[k.Verb] && !background[k.Resource] {
			w[k.String()] += int64(v)
		}
	}
	return w
}

// heartbeats returns the nodes' writes counted.
func (c *apiCounts) heartbeats() int64 {
	var n int64
	for k, v := range c.requests {
		if writeVerbs[k.Verb] && background[k.Resource] {
			n += int64(v)
		}
	}
	return n
}

// flowControl returns API Priority and Fairness's rejections and mean queue waits; its maps are
// nil where there are none.
func (c *apiCounts) flowControl() FlowControl {
	fc := FlowControl{Rejected: whole(c.rejected)}
	for level, n := range c.waited {
		if n > 0 && c.waitSeconds[level] > 0 {
			if fc.QueueWait == nil {
				fc.QueueWait = map[string]Duration{}
			}
			fc.QueueWait[level] = Duration(c.waitSeconds[level] / n * float64(time.Second))
		}
	}
	return fc
}

// throttledBy returns the 429s by kind.
func (c *apiCounts) throttledBy() map[string]int64 {
	t := map[string]int64{}
	for k, v := range c.throttled {
		t[k.String()] += int64(v)
	}
	return t
}

// sortedKeys returns m's keys in order, for stable reports.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// Writes counts the apiserver's write requests by kind ("PATCH pods/status"), without the nodes'
// heartbeats: what a workload cost the control plane, for other harnesses (hack/kwokcompare).
type Writes map[string]int64

// ReadWrites reads the apiserver's write counts now.
func ReadWrites(ctx context.Context, cs kubernetes.Interface) (Writes, error) {
	c, err := readCounts(ctx, cs)
	if err != nil {
		return nil, err
	}
	return c.writes(), nil
}

// Since is what was written after before.
func (w Writes) Since(before Writes) Writes {
	d := Writes{}
	for k, v := range w {
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

// Total is the number of writes.
func (w Writes) Total() int64 {
	var n int64
	for _, v := range w {
		n += v
	}
	return n
}
