package bench

import (
	"context"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/restartbed/restartbed/agent"
	"github.com/restartbed/restartbed/builtins"
	"github.com/restartbed/restartbed/fakekubelet/program"
)

// agentTracker runs the agent as the benchmark's agent program and follows each agent process
// through its requests: when it started, when its JobSet watch was open, and what the apiserver
// answered it on the way, so that a report can say what a restart of thousands of agents cost
// them.
type agentTracker struct {
	inner program.Program

	mu      sync.Mutex
	started []time.Time // process starts
	// watched is, for each process whose watch opened, the time from its start to the watch.
	watched  []time.Duration
	requests int
	// throttled counts 429 answers, retried by client-go after the Retry-After the apiserver set.
	throttled int
	// retryAfter sums the Retry-After seconds of the 429s: time spent waiting, not asking.
	retryAfter time.Duration
	failed     int // other error answers

	// streams are the agents' open watch streams, which a herd measurement breaks.
	streams map[*watchStream]*agentProcess
	// herd is the last break of the streams, while agents are still coming back.
	herd *herdMark
}

// agentProcess is one run of an agent's container.
type agentProcess struct {
	start time.Time
	// watched: its first watch opened; broken: a herd measurement broke its watch, rewatched:
	// it opened one again since.
	watched, broken, rewatched bool
}

// herdMark is one break of every open watch and the agents' return.
type herdMark struct {
	at   time.Time
	want int
	// back holds, for each agent whose watch was broken, the time to its next open watch.
	back []time.Duration
	done chan struct{} // closed when every one is back
}

func newAgentTracker(jitter bool) *agentTracker {
	backoff := agent.DefaultBackoff()
	if !jitter {
		backoff.Jitter = 0
	}
	return &agentTracker{inner: builtins.AgentProgram(builtins.AgentOptions{Backoff: backoff}), streams: map[*watchStream]*agentProcess{}}
}

// Run runs one agent process with its requests counted.
func (t *agentTracker) Run(ctx context.Context, c *program.Container) int {
	proc := &agentProcess{start: time.Now()}
	t.mu.Lock()
	t.started = append(t.started, proc.start)
	t.mu.Unlock()
	counted := *c
	counted.Config = rest.CopyConfig(c.Config)
	counted.Config.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if t.observe(req, resp, err) {
				resp.Body = t.watchOpened(proc, resp.Body)
			}
			return resp, err
		})
	})
	return t.inner.Run(ctx, &counted)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// observe counts one request and its answer; it reports whether the answer opened a watch.
func (t *agentTracker) observe(req *http.Request, resp *http.Response, err error) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.requests++
	switch {
	case err != nil:
		t.failed++
	case resp.StatusCode == http.StatusTooManyRequests:
		t.throttled++
		if d, perr := time.ParseDuration(resp.Header.Get("Retry-After") + "s"); perr == nil {
			t.retryAfter += d
		}
	case resp.StatusCode >= 400:
		t.failed++
	default:
		return req.Method == http.MethodGet && req.URL.Query().Get("watch") == "true"
	}
	return false
}

// watchOpened records a watch the process opened and returns its stream, breakable by a herd
// measurement.
func (t *agentTracker) watchOpened(proc *agentProcess, body io.ReadCloser) io.ReadCloser {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !proc.watched {
		proc.watched = true
		t.watched = append(t.watched, now.Sub(proc.start))
	}
	if h := t.herd; h != nil && proc.broken && !proc.rewatched {
		proc.rewatched = true
		h.back = append(h.back, now.Sub(h.at))
		if len(h.back) == h.want {
			close(h.done)
		}
	}
	s := &watchStream{ReadCloser: body, tracker: t}
	t.streams[s] = proc
	return s
}

// watchStream is an agent's open watch.
type watchStream struct {
	io.ReadCloser
	tracker *agentTracker
}

func (s *watchStream) Close() error {
	s.tracker.mu.Lock()
	delete(s.tracker.streams, s)
	s.tracker.mu.Unlock()
	return s.ReadCloser.Close()
}

// breakWatches closes every open watch stream at once, as a dropped connection or an apiserver
// rollout does: each agent reads an error and, after its backoff, lists and watches again.
func (t *agentTracker) breakWatches() *herdMark {
	t.mu.Lock()
	h := &herdMark{at: time.Now(), done: make(chan struct{})}
	var broken []*watchStream
	for s, proc := range t.streams {
		if !proc.broken {
			proc.broken = true
			h.want++
		}
		broken = append(broken, s)
	}
	t.herd = h
	if h.want == 0 {
		close(h.done)
	}
	t.mu.Unlock()
	for _, s := range broken {
		_ = s.Close()
	}
	return h
}

// herdBack returns how long each agent took to watch again, so far.
func (t *agentTracker) herdBack(h *herdMark) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(h.back)
}

// AgentStats is what the agents' processes met between two marks of a run.
type AgentStats struct {
	// Jitter says whether the agents' retry backoff was jittered.
	Jitter bool `json:"jitter"`
	// Processes is the number of agent processes started.
	Processes int `json:"processes"`
	RequestStats
	// ToWatch is the time from a process's start to its open JobSet watch, over the processes
	// whose watch opened: median, 90th percentile, maximum.
	ToWatch Quantiles `json:"toWatch"`
}

// RequestStats count agents' requests and the answers: Throttled the 429s, Failed other
// errors, RetryAfter the sum of the waits the 429s asked for.
type RequestStats struct {
	Requests   int      `json:"requests"`
	Throttled  int      `json:"throttled"`
	Failed     int      `json:"failed"`
	RetryAfter Duration `json:"retryAfterSeconds"`
}

// Quantiles summarise durations.
type Quantiles struct {
	P50 Duration `json:"p50Seconds"`
	P90 Duration `json:"p90Seconds"`
	Max Duration `json:"maxSeconds"`
}

func quantiles(ds []time.Duration) Quantiles {
	if len(ds) == 0 {
		return Quantiles{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) Duration { return Duration(s[int(q*float64(len(s)-1))]) }
	return Quantiles{P50: at(0.5), P90: at(0.9), Max: Duration(s[len(s)-1])}
}

// mark is a position in the tracker's records.
type mark struct {
	started, watched, requests, throttled, failed int
	retryAfter                                    time.Duration
}

func (t *agentTracker) mark() mark {
	t.mu.Lock()
	defer t.mu.Unlock()
	return mark{len(t.started), len(t.watched), t.requests, t.throttled, t.failed, t.retryAfter}
}

// since returns the statistics of what happened after m.
func (t *agentTracker) since(m mark, jitter bool) *AgentStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return &AgentStats{Jitter: jitter, Processes: len(t.started) - m.started, RequestStats: RequestStats{
		Requests: t.requests - m.requests, Throttled: t.throttled - m.throttled, Failed: t.failed - m.failed,
		RetryAfter: Duration(t.retryAfter - m.retryAfter),
	}, ToWatch: quantiles(t.watched[m.watched:])}
}
