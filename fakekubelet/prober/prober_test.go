package prober

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/fakekubelet/release"
	"github.com/restartbed/restartbed/fakekubelet/status"
	"github.com/restartbed/restartbed/internal/clocktest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fake is the kubelet around a Manager: its last status of one pod, and a target whose exec
// probes answer as told.
type fake struct {
	mu sync.Mutex
	// phase and statuses are the kubelet's last status of the pod.
	phase    corev1.PodPhase
	statuses map[string]status.ContainerView
	// exits are what the next exec probes of each container exit with, in order (0 passes);
	// block, when set, holds every exec of the container until it is closed.
	exits map[string][]int
	block map[string]chan struct{}
	execs []string
	// updates are the results reported, as "kind=result".
	updates []string
	events  []string
	// messages are the events' messages, formatted.
	messages []string
}

func (f *fake) Status(_ types.UID, name string) func() (corev1.PodPhase, status.ContainerView, bool) {
	return func() (corev1.PodPhase, status.ContainerView, bool) {
		f.mu.Lock()
		defer f.mu.Unlock()
		cs, ok := f.statuses[name]
		return f.phase, cs, ok
	}
}

func (f *fake) HTTPGet(context.Context, types.UID, int32, string, http.Header) (int, error) {
	return 0, errors.New("connection refused")
}

func (f *fake) Listening(types.UID, int32) bool { return false }

func (f *fake) Serves(types.UID, int32) bool { return false }

func (f *fake) Exec(ctx context.Context, _ types.UID, name string, _ []string) (int, string, error) {
	f.mu.Lock()
	f.execs = append(f.execs, name)
	block := f.block[name]
	code := 0
	if q := f.exits[name]; len(q) > 0 {
		code, f.exits[name] = q[0], q[1:]
	}
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return -1, "", ctx.Err()
		}
	}
	return code, "", nil
}

func (f *fake) running(name, id string, started bool, since time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses[name] = status.ContainerView{ID: "containerd://" + id, Started: started, Running: true, StartedAt: since}
}

func (f *fake) exited(name, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses[name] = status.ContainerView{ID: "containerd://" + id}
}

func (f *fake) willExit(name string, codes ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exits[name] = append(f.exits[name], codes...)
}

func (f *fake) takeUpdates() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.updates
	f.updates = nil
	return out
}

func newFake(t *testing.T, minor uint) (*fake, *Manager, *clocktesting.FakeClock) {
	f := &fake{phase: corev1.PodRunning, statuses: map[string]status.ContainerView{}, exits: map[string][]int{}, block: map[string]chan struct{}{}}
	clk := clocktesting.NewFakeClock(t0)
	ctx, cancel := context.WithCancel(context.Background())
	m := New(ctx, Options{Clock: clk, Target: f, Status: f.Status, Release: release.Minor(minor),
		Updated: func(_ types.UID, kind Kind, r Result) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.updates = append(f.updates, kind.String()+"="+r.String())
		},
		Unhealthy: func(_ *corev1.Pod, c *corev1.Container, format string, args ...any) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.events = append(f.events, c.Name+": "+format)
			f.messages = append(f.messages, fmt.Sprintf(format, args...))
		}})
	t.Cleanup(func() {
		cancel()
		m.Wait()
	})
	return f, m, clk
}

func execProbe(period, success, failure, delay int32) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check"}}},
		PeriodSeconds: period, SuccessThreshold: success, FailureThreshold: failure, InitialDelaySeconds: delay, TimeoutSeconds: 1}
}

// newWorker returns a worker of the manager that no goroutine runs: the test calls its ticks.
func newWorker(m *Manager, pod *corev1.Pod, c *corev1.Container, kind Kind) *worker {
	w := m.newWorker(pod, c, kind, time.Time{})
	m.mu.Lock()
	m.workers.put(w)
	m.mu.Unlock()
	return w
}

func onePod(c corev1.Container) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid"}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
}

// TestThresholds: a worker turns probe outcomes into results with the probe's thresholds,
// starting from each kind's initial value, and reports only changes; a liveness failure and a
// startup result hold the worker until a new instance runs.
func TestThresholds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kind  Kind
		exits []int
		// want are the updates after each tick.
		want [][]string
		// final is the instance's result at the end.
		final Result
	}{
		{name: "startup succeeds once and holds", kind: Startup, exits: []int{1, 0, 1},
			want: [][]string{{"Startup=Unknown"}, {"Startup=Success"}, nil, nil}, final: Success},
		{name: "startup fails at its threshold", kind: Startup, exits: []int{1, 1, 1, 0},
			want: [][]string{{"Startup=Unknown"}, {"Startup=Failure"}, nil, nil}, final: Failure},
		{name: "liveness tolerates failures below the threshold", kind: Liveness, exits: []int{1, 0, 1, 0},
			want: [][]string{{"Liveness=Success"}, nil, nil, nil}, final: Success},
		{name: "liveness fails at its threshold and holds", kind: Liveness, exits: []int{1, 1, 0, 0},
			want: [][]string{{"Liveness=Success"}, {"Liveness=Failure"}, nil, nil}, final: Failure},
		{name: "readiness needs its success threshold", kind: Readiness, exits: []int{0, 0, 1, 0},
			want: [][]string{{"Readiness=Failure"}, {"Readiness=Success"}, nil, nil}, final: Success},
		{name: "readiness falls at its failure threshold and rises again", kind: Readiness, exits: []int{0, 0, 1, 1, 0, 0},
			want: [][]string{{"Readiness=Failure"}, {"Readiness=Success"}, nil, {"Readiness=Failure"}, nil, {"Readiness=Success"}}, final: Success},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, m, _ := newFake(t, 37)
			probe := execProbe(1, 2, 2, 0)
			c := corev1.Container{Name: "c"}
			switch tc.kind {
			case Startup:
				c.StartupProbe, probe.SuccessThreshold = probe, 1
			case Liveness:
				c.LivenessProbe, probe.SuccessThreshold = probe, 1
			case Readiness:
				c.ReadinessProbe = probe
			}
			pod := onePod(c)
			w := newWorker(m, pod, &pod.Spec.Containers[0], tc.kind)
			f.running("c", "c1", tc.kind != Startup, t0)
			f.willExit("c", tc.exits...)
			// The first tick takes the instance, with the kind's initial value, and probes.
			for i, want := range tc.want {
				if !w.probeOnce() {
					t.Fatalf("tick %d: the worker ended", i)
				}
				if got := f.takeUpdates(); !slices.Equal(got, want) {
					t.Errorf("tick %d: updates %q, want %q", i, got, want)
				}
			}
			if got := m.Results(pod.UID).Of("c1", tc.kind); got != tc.final {
				t.Errorf("result %s, want %s", got, tc.final)
			}
		})
	}
}

// TestNewInstance: a new instance drops the old one's result and starts over from the initial
// value; an instance that is not running is not ready and not live.
func TestNewInstance(t *testing.T) {
	f, m, _ := newFake(t, 37)
	c := corev1.Container{Name: "c", LivenessProbe: execProbe(1, 1, 1, 0)}
	pod := onePod(c)
	w := newWorker(m, pod, &pod.Spec.Containers[0], Liveness)
	f.running("c", "c1", true, t0)
	f.willExit("c", 1)
	w.probeOnce()
	if got := m.Results(pod.UID).Failed("c1"); got != "liveness" {
		t.Fatalf("Failed(c1) = %q, want liveness", got)
	}
	w.probeOnce() // on hold: no probe
	f.exited("c", "c1")
	w.probeOnce()
	f.running("c", "c2", true, t0)
	w.probeOnce()
	r := m.Results(pod.UID)
	if r.Of("c1", Liveness) != None || r.Failed("c2") != "" || r.Of("c2", Liveness) != Success {
		t.Errorf("c1 %s, c2 %s: want the old result gone and the new instance live", r.Of("c1", Liveness), r.Of("c2", Liveness))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.execs) != 2 {
		t.Errorf("%d probes ran, want 2 (one per running instance, none on hold)", len(f.execs))
	}
}

// TestGates: no probe before the initial delay; the startup probe only until the container has
// started, the others only after; a terminal pod ends the worker.
func TestGates(t *testing.T) {
	f, m, clk := newFake(t, 37)
	c := corev1.Container{Name: "c", StartupProbe: execProbe(1, 1, 1, 5), ReadinessProbe: execProbe(1, 1, 1, 5)}
	pod := onePod(c)
	startup, readiness := newWorker(m, pod, &pod.Spec.Containers[0], Startup), newWorker(m, pod, &pod.Spec.Containers[0], Readiness)
	f.running("c", "c1", false, t0)
	execs := func() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.execs) }
	startup.probeOnce()
	readiness.probeOnce()
	if n := execs(); n != 0 {
		t.Fatalf("%d probes ran within the initial delay", n)
	}
	clk.Step(5 * time.Second)
	readiness.probeOnce()
	if n := execs(); n != 0 {
		t.Fatalf("the readiness probe ran before the container started")
	}
	startup.probeOnce()
	if n := execs(); n != 1 || !m.Results(pod.UID).Started("c1") {
		t.Fatalf("%d probes, started %t: want the startup probe to run and succeed", n, m.Results(pod.UID).Started("c1"))
	}
	f.running("c", "c1", true, t0)
	startup.probeOnce()
	readiness.probeOnce()
	if n := execs(); n != 2 || !m.Results(pod.UID).Ready("c1") {
		t.Fatalf("%d probes, ready %t: want only the readiness probe to run once started", n, m.Results(pod.UID).Ready("c1"))
	}
	f.mu.Lock()
	f.phase = corev1.PodSucceeded
	f.mu.Unlock()
	if readiness.probeOnce() {
		t.Error("the worker goes on after the pod ended")
	}
}

// TestTerminating: when the pod terminates, its regular containers' liveness and startup workers
// end (a sidecar's go on), and before 1.37 an exec readiness probe errors and keeps its result.
func TestTerminating(t *testing.T) {
	for _, minor := range []uint{35, 37} {
		t.Run(release.Minor(minor).String(), func(t *testing.T) {
			f, m, clk := newFake(t, minor)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid"}, Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "side", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), LivenessProbe: execProbe(1, 1, 1, 0)}},
				Containers:     []corev1.Container{{Name: "main", LivenessProbe: execProbe(1, 1, 1, 0), ReadinessProbe: execProbe(1, 1, 1, 0)}}}}
			f.running("main", "m1", true, t0)
			f.running("side", "s1", true, t0)
			before := clk.Waiters()
			m.AddPod(pod, t0.Add(-time.Hour))
			clocktest.WaitForWaiters(t, clk, before+3, "the three workers' tickers")
			m.mu.Lock()
			main := m.workers.get(key{pod: pod.UID, container: "main", kind: Readiness})
			m.mu.Unlock()
			m.Terminating(pod.UID)
			deadline := time.Now().Add(clocktest.Deadline)
			for {
				m.mu.Lock()
				mainLive := m.workers.get(key{pod: pod.UID, container: "main", kind: Liveness}) != nil
				sideLive := m.workers.get(key{pod: pod.UID, container: "side", kind: Liveness}) != nil
				m.mu.Unlock()
				if !mainLive {
					if !sideLive {
						t.Fatal("the sidecar's liveness worker ended with the pod's termination")
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("main's liveness worker goes on while the pod terminates")
				}
				time.Sleep(time.Millisecond)
			}
			ready := m.Results(pod.UID).Ready("m1")
			f.willExit("main", 1)
			f.mu.Lock()
			f.events = nil
			f.mu.Unlock()
			main.probeOnce()
			f.mu.Lock()
			events := slices.Clone(f.events)
			f.mu.Unlock()
			errored := slices.Contains(events, "main: %s probe errored and resulted in unknown state: %s")
			if want := minor < 37; errored != want {
				t.Errorf("events %q: errored %t, want %t", events, errored, want)
			}
			if minor < 37 && m.Results(pod.UID).Ready("m1") != ready {
				t.Error("an errored probe changed the result")
			}
		})
	}
}

// TestHTTPProbeRefused: an HTTP probe of a port nothing serves fails at once, its event saying
// what the kubelet's says of a refused connection.
func TestHTTPProbeRefused(t *testing.T) {
	f, m, _ := newFake(t, 37)
	m.opts.PodIP = func(types.UID) string { return "10.64.0.7" }
	c := corev1.Container{Name: "agent", StartupProbe: &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 600,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/barrier-is-down", Port: intstr.FromInt32(8081)}}}}
	pod := onePod(c)
	w := newWorker(m, pod, &pod.Spec.Containers[0], Startup)
	f.running("agent", "a1", false, t0)
	w.probeOnce()
	want := `Startup probe failed: Get "http://10.64.0.7:8081/barrier-is-down": dial tcp 10.64.0.7:8081: connect: connection refused`
	if got := f.messages; len(got) != 1 || got[0] != want {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestSlowProbe: a probe that takes long holds up only its own worker: another pod's probe runs
// and reports meanwhile.
func TestSlowProbe(t *testing.T) {
	f, m, _ := newFake(t, 37)
	slow := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "slow", UID: "slow"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "stuck", ReadinessProbe: execProbe(1, 1, 1, 0)}}}}
	fast := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fast", UID: "fast"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "quick", ReadinessProbe: execProbe(1, 1, 1, 0)}}}}
	block := make(chan struct{})
	defer close(block)
	f.mu.Lock()
	f.block["stuck"] = block
	f.mu.Unlock()
	f.running("stuck", "s1", true, t0)
	f.running("quick", "q1", true, t0)
	m.AddPod(slow, t0.Add(-time.Hour))
	m.AddPod(fast, t0.Add(-time.Hour))
	deadline := time.Now().Add(clocktest.Deadline)
	for !m.Results("fast").Ready("q1") {
		if time.Now().After(deadline) {
			t.Fatal("the fast pod's readiness probe did not run while the slow one's was stuck")
		}
		time.Sleep(time.Millisecond)
	}
	if m.Results("slow").Ready("s1") {
		t.Error("the stuck probe reported")
	}
}

// TestKubeletRestartNoInitialResult: a worker of a restarted kubelet gives a container that ran
// before the restart no initial result, so that its status keeps its flags until a probe ends
// (KEP-5278); a sidecar that had started keeps a startup success; a container started since, or
// any container with the ChangeContainerStatusOnKubeletRestart gate on, starts from the initial
// value.
func TestKubeletRestartNoInitialResult(t *testing.T) {
	restarted := status.KubeletRestart{Start: t0.Add(time.Minute)}
	for _, tc := range []struct {
		name    string
		kind    Kind
		sidecar bool
		since   time.Time
		restart status.KubeletRestart
		want    Result
	}{
		{name: "readiness of a container that ran before", kind: Readiness, since: t0, restart: restarted, want: None},
		{name: "startup of a container that ran before", kind: Startup, since: t0, restart: restarted, want: None},
		{name: "startup of a sidecar that had started", kind: Startup, sidecar: true, since: t0, restart: restarted, want: Success},
		{name: "readiness of a container started since", kind: Readiness, since: t0.Add(55 * time.Second), restart: restarted, want: Failure},
		{name: "the gate on", kind: Readiness, since: t0,
			restart: status.KubeletRestart{Start: t0.Add(time.Minute), ChangeStatus: true}, want: Failure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, m, _ := newFake(t, 37)
			probe := execProbe(10, 1, 1, 100) // the first probe is far off: only the initial value shows
			c := corev1.Container{Name: "c"}
			if tc.kind == Startup {
				c.StartupProbe = probe
			} else {
				c.ReadinessProbe = probe
			}
			pod := onePod(c)
			if tc.sidecar {
				c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
				pod.Spec.InitContainers, pod.Spec.Containers = []corev1.Container{c}, nil
			}
			spec := &pod.Spec.Containers
			if tc.sidecar {
				spec = &pod.Spec.InitContainers
			}
			w := newWorker(m, pod, &(*spec)[0], tc.kind)
			w.restart = tc.restart
			f.running("c", "c1", tc.kind != Startup || tc.sidecar, tc.since)
			w.probeOnce()
			if got := m.Results(pod.UID).Of("c1", tc.kind); got != tc.want {
				t.Errorf("result %s, want %s", got, tc.want)
			}
		})
	}
}
