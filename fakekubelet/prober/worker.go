package prober

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/restartbed/restartbed/fakekubelet/container"
	"github.com/restartbed/restartbed/fakekubelet/restart"
	"github.com/restartbed/restartbed/fakekubelet/status"
	"github.com/restartbed/restartbed/internal/clockctx"
)

// worker runs one probe of one container of one pod, as the kubelet's probe worker
// (pkg/kubelet/prober/worker.go).
type worker struct {
	m   *Manager
	key key
	// pod and container are as the kubelet saw them when it added the pod; a tick reads what it
	// needs of them from key and deleting, which stay in the worker's own memory.
	pod       *corev1.Pod
	container *corev1.Container
	spec      *corev1.Probe
	// status reads the container's status as the kubelet last generated it.
	status func() (corev1.PodPhase, status.ContainerView, bool)
	// deleting: the pod had a deletion timestamp when the kubelet added it.
	deleting bool
	// delay is how long the worker waits before its first probe (a kubelet just started).
	delay time.Duration
	// restart is when the kubelet that made the worker started, and what its restart keeps.
	restart status.KubeletRestart

	// wake interrupts the worker's wait, to end it (end) or to probe now (trigger); ended says
	// which. One channel for both keeps a tick's select to two cases: with thousands of workers
	// in one process, each case more was a lock more a tick.
	wake  chan struct{}
	ended atomic.Bool

	// id is the instance probed, "" before the first.
	id string
	// lastResult and resultRun count the probe's consecutive equal results.
	lastResult Result
	resultRun  int32
	// onHold: a liveness failure or a startup result was recorded for the instance; nothing
	// more is probed until a new instance runs.
	onHold bool
}

// end stops the worker; it forgets its result as it returns.
func (w *worker) end() {
	if w.ended.CompareAndSwap(false, true) {
		w.trigger()
	}
}

// trigger wakes the worker, for a probe now (Manager.StatusSet) or to see that it ended, unless
// a wake is pending already, which it will see.
func (w *worker) trigger() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *worker) period() time.Duration {
	return time.Duration(max(w.spec.PeriodSeconds, 1)) * time.Second
}

func (w *worker) run() {
	defer func() { w.m.removeWorker(w, w.id) }()
	clk := w.m.opts.Clock
	if w.delay > 0 {
		// A trigger does not cut the delay short; it is kept for after the first probe.
		triggered := false
		t := clk.NewTimer(w.delay)
		for waiting := true; waiting; {
			select {
			case <-t.C():
				waiting = false
			case <-w.wake:
				if w.ended.Load() {
					t.Stop()
					return
				}
				triggered = true
			}
		}
		if triggered {
			w.trigger()
		}
	}
	if w.ended.Load() || !w.probeOnce() {
		return
	}
	// The ticks land on multiples of tickGrid, so the runtime wakes for many workers at once
	// instead of for each: that wake-up was most of what a worker cost between probes with
	// thousands in one process (a node runs a few).
	period, now := w.period(), clk.Now()
	next := alignUp(now.Add(period))
	timer := clk.NewTimer(next.Sub(now))
	defer timer.Stop()
	for {
		select {
		case <-timer.C():
			// As a ticker, the ticks missed while the probe ran are dropped.
			now := clk.Now()
			for !next.After(now) {
				next = next.Add(period)
			}
			timer.Reset(next.Sub(now))
		case <-w.wake:
		}
		if w.ended.Load() || !w.probeOnce() {
			return
		}
	}
}

// tickGrid is what the workers' ticks are aligned to. Probe periods are whole seconds, so a
// worker's probes stay a period apart; its first tick comes at most this much late.
const tickGrid = 20 * time.Millisecond

// alignUp is t, or the next multiple of tickGrid after it.
func alignUp(t time.Time) time.Time {
	if off := time.Duration(t.UnixNano() % int64(tickGrid)); off > 0 {
		return t.Add(tickGrid - off)
	}
	return t
}

// probeOnce is one tick of the worker; it reports whether the worker goes on.
func (w *worker) probeOnce() bool {
	m := w.m
	phase, cs, ok := w.status()
	if restart.IsTerminal(phase) {
		return false // the pod is done: nothing of it runs again
	}
	if !ok || cs.ID == "" {
		return true // not created yet
	}
	if id := container.InstanceID(cs.ID); id != w.id {
		// A new instance: the old one's result goes, the new one's starts at the initial
		// value, and the counts start over.
		if w.id != "" {
			m.forget(w, w.id)
		}
		w.id, w.lastResult, w.resultRun, w.onHold = id, None, 0, false
		switch {
		case !cs.Running || !w.restart.RanBefore(cs.StartedAt):
			m.set(w, id, initial(w.key.kind))
		case w.key.kind == Startup && cs.Started && restart.IsSidecar(w.container):
			// A sidecar that had started keeps started with a result, which the start of the
			// containers after it reads (kubernetes#136910).
			m.set(w, id, Success)
		}
		// A container that ran before the kubelet restarted gets no initial result: its status
		// keeps its started and ready flags until a probe has run (status.KubeletRestart).
	}
	if w.onHold {
		return true
	}
	if !cs.Running {
		// Not running (exited, or a restart pending): not ready, not live. Upstream's worker
		// ends here when the container will not run again; this one waits for the pod to end,
		// which no status can tell apart.
		m.set(w, w.id, Failure)
		return true
	}
	if w.deleting && w.key.kind != Readiness {
		// The kubelet (re)started with the pod already deleting: a quiet shutdown.
		m.set(w, w.id, Success)
		return false
	}
	if m.opts.Clock.Since(cs.StartedAt) < time.Duration(w.spec.InitialDelaySeconds)*time.Second {
		return true
	}
	// The startup probe runs until the container has started, the others only after.
	if cs.Started == (w.key.kind == Startup) {
		return true
	}
	ok, output, err := w.probe()
	if err != nil {
		m.opts.Unhealthy(w.pod, w.container, "%s probe errored and resulted in unknown state: %s", w.key.kind, err)
		return true
	}
	if !ok {
		m.opts.Unhealthy(w.pod, w.container, "%s probe failed: %s", w.key.kind, output)
	}
	result := Failure
	if ok {
		result = Success
	}
	if result == w.lastResult {
		w.resultRun++
	} else {
		w.lastResult, w.resultRun = result, 1
	}
	if (result == Failure && w.resultRun < max(w.spec.FailureThreshold, 1)) ||
		(result == Success && w.resultRun < max(w.spec.SuccessThreshold, 1)) {
		return true
	}
	m.set(w, w.id, result)
	if (w.key.kind == Liveness && result == Failure) || w.key.kind == Startup {
		w.onHold, w.resultRun = true, 0
	}
	return true
}

// initial is a probe's result for an instance not probed yet.
func initial(kind Kind) Result {
	switch kind {
	case Liveness:
		return Success
	case Readiness:
		return Failure
	}
	return Unknown
}

// probe runs the probe once against the worker's instance: httpGet calls what the pod serves on
// the port (2xx and 3xx pass), tcpSocket and grpc pass while something serves the port, exec
// runs in the container (exit 0 passes). An error is a probe that could not run (its context
// ended), which leaves the result as it was.
func (w *worker) probe() (bool, string, error) {
	m, uid, c := w.m, w.pod.UID, w.container
	timeout := time.Duration(max(w.spec.TimeoutSeconds, 1)) * time.Second
	h := w.spec.ProbeHandler
	switch {
	case h.HTTPGet != nil:
		port := PortOf(c, h.HTTPGet.Port)
		if !m.opts.Target.Serves(uid, port) {
			// Refused at once, with no timeout to arm: the startup probe of every agent waiting
			// at its barrier fails so every second.
			addr := net.JoinHostPort(podIP(w), strconv.Itoa(int(port)))
			return false, "Get " + strconv.Quote("http://"+addr+h.HTTPGet.Path) + ": dial tcp " + addr + ": connect: connection refused", nil
		}
		ctx, cancel := clockctx.WithTimeout(m.ctx, m.opts.Clock, timeout)
		defer cancel()
		code, err := m.opts.Target.HTTPGet(ctx, uid, port, h.HTTPGet.Path, Header(h.HTTPGet.HTTPHeaders))
		switch {
		case err != nil:
			return false, fmt.Sprintf("Get %q: %v", fmt.Sprintf("http://%s:%d%s", podIP(w), port, h.HTTPGet.Path), err), nil
		case code < 200 || code >= 400:
			return false, fmt.Sprintf("HTTP probe failed with statuscode: %d", code), nil
		}
		return true, "", nil
	case h.TCPSocket != nil:
		port := PortOf(c, h.TCPSocket.Port)
		if !m.opts.Target.Listening(uid, port) {
			return false, fmt.Sprintf("dial tcp %s:%d: connect: connection refused", podIP(w), port), nil
		}
		return true, "", nil
	case h.GRPC != nil:
		if !m.opts.Target.Listening(uid, h.GRPC.Port) {
			return false, fmt.Sprintf("timeout: failed to connect service %q within %ds", fmt.Sprintf(":%d", h.GRPC.Port), max(w.spec.TimeoutSeconds, 1)), nil
		}
		return true, "", nil
	case h.Exec != nil:
		parent := m.execContext(uid)
		if err := parent.Err(); err != nil {
			return false, "", err
		}
		ctx, cancel := clockctx.WithTimeout(parent, m.opts.Clock, timeout)
		defer cancel()
		code, out, err := m.opts.Target.Exec(ctx, uid, c.Name, h.Exec.Command)
		if err != nil {
			if perr := parent.Err(); perr != nil {
				return false, "", perr
			}
			return false, err.Error(), nil
		}
		return code == 0, out, nil
	}
	return false, "the probe has no handler", nil
}

// podIP is the pod's IP for failure messages: the one the kubelet's last status shows.
func podIP(w *worker) string {
	if ip := w.m.opts.PodIP; ip != nil {
		return ip(w.pod.UID)
	}
	return ""
}

// PortOf resolves a probe's or a lifecycle handler's port, by number or by the container's port
// name; -1 when the container has no port of that name.
func PortOf(c *corev1.Container, port intstr.IntOrString) int32 {
	if port.Type == intstr.Int {
		return port.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == port.StrVal {
			return cp.ContainerPort
		}
	}
	return -1
}

// Header is an HTTP probe's or lifecycle handler's headers.
func Header(hs []corev1.HTTPHeader) http.Header {
	out := http.Header{}
	for _, h := range hs {
		out.Add(h.Name, h.Value)
	}
	return out
}
