package fakekubelet

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"

	"github.com/restartbed/restartbed/fakekubelet/container"
	"github.com/restartbed/restartbed/fakekubelet/podactions"
	"github.com/restartbed/restartbed/fakekubelet/restart"
	"github.com/restartbed/restartbed/internal/clockctx"
)

// probeKind is one of a container's three probes.
type probeKind int

const (
	startupProbe probeKind = iota
	livenessProbe
	readinessProbe
)

// probeState is what the kubelet's probe workers know of one container instance.
type probeState struct {
	started bool // the startup probe succeeded
	ready   bool // the readiness probe's current result
	// failed names the liveness or startup probe that failed at its threshold.
	failed    string
	next      [3]time.Time
	successes [3]int32
	failures  [3]int32
}

// Started implements status.ProbeResults.
func (s *podState) Started(id string) bool { ps := s.probes[id]; return ps != nil && ps.started }

// Ready implements status.ProbeResults.
func (s *podState) Ready(id string) bool { ps := s.probes[id]; return ps != nil && ps.ready }

// Failed implements podactions.ProbeResults.
func (s *podState) Failed(id string) string {
	if ps := s.probes[id]; ps != nil {
		return ps.failed
	}
	return ""
}

// String is the probe's name as the kubelet's events give it.
func (k probeKind) String() string {
	return [...]string{"Startup", "Liveness", "Readiness"}[k]
}

func (k probeKind) of(c *corev1.Container) *corev1.Probe {
	switch k {
	case startupProbe:
		return c.StartupProbe
	case livenessProbe:
		return c.LivenessProbe
	}
	return c.ReadinessProbe
}

// probe runs the probes that are due for the running containers the plan was made on and
// records their results; it acts on none of them. Like the kubelet's probe workers, which find
// the instance to probe in the status manager's cache, it probes only the instances that the
// status the kubelet holds (shown) has running: not one whose postStart hook still holds the
// sync that started it. A result that changes what the pod's next plan does (started, ready, a
// liveness or startup failure that kills the instance) brings a sync at once; the next due probe
// brings one then. While the pod terminates only readiness probes go on, as the kubelet's probe
// workers do (see release.Kubelet.ExecProbesWhileTerminating).
func (p *pods) probe(ctx context.Context, pod *corev1.Pod, st *podState, rt *container.PodStatus, shown *corev1.PodStatus, mode podactions.Probe) {
	now := p.clock.Now()
	kinds := []probeKind{startupProbe, livenessProbe, readinessProbe}
	if mode == podactions.ProbeTerminating {
		kinds = []probeKind{readinessProbe}
	}
	var nextDue time.Time
	changed := false
	for _, list := range []struct {
		specs    []corev1.Container
		statuses []corev1.ContainerStatus
	}{{pod.Spec.InitContainers, shown.InitContainerStatuses}, {pod.Spec.Containers, shown.ContainerStatuses}} {
		for i := range list.specs {
			c := &list.specs[i]
			inst := rt.Latest(c.Name)
			if inst == nil || inst.State != container.Running ||
				(c.StartupProbe == nil && c.LivenessProbe == nil && c.ReadinessProbe == nil) {
				continue
			}
			if cs := restart.StatusOf(list.statuses, c.Name); cs == nil || cs.State.Running == nil || container.InstanceID(cs.ContainerID) != inst.ID {
				continue
			}
			ps := st.probes[inst.ID]
			if ps == nil {
				ps = &probeState{started: c.StartupProbe == nil}
				st.probes[inst.ID] = ps
			}
			due := kinds
			if ps.failed != "" || st.stopIssued[inst.ID] {
				// Stopping (a failed probe, KillPod): the liveness and startup workers hold, the
				// readiness worker goes on until the container has stopped (prober/worker.go).
				due = []probeKind{readinessProbe}
			}
			for _, kind := range due {
				spec := kind.of(c)
				if spec == nil || (kind == startupProbe) == ps.started {
					continue // the startup probe runs until it succeeds, the others after
				}
				if ps.next[kind].IsZero() {
					ps.next[kind] = inst.StartedAt.Add(time.Duration(spec.InitialDelaySeconds) * time.Second)
				}
				if now.Before(ps.next[kind]) {
					nextDue = earliest(nextDue, ps.next[kind])
					continue
				}
				ps.next[kind] = now.Add(time.Duration(max(spec.PeriodSeconds, 1)) * time.Second)
				nextDue = earliest(nextDue, ps.next[kind])
				if mode == podactions.ProbeTerminating && spec.Exec != nil && !p.release.ExecProbesWhileTerminating() {
					// The probe ran in the pod's sync context, which the termination cancelled:
					// it errors, and the last result stands.
					p.events.container(pod, c, corev1.EventTypeWarning, eventUnhealthy, "%s probe errored and resulted in unknown state: %s", kind, context.Canceled)
					continue
				}
				ok, output := p.runProbe(ctx, pod, rt.IP, c, spec)
				if !ok {
					p.events.container(pod, c, corev1.EventTypeWarning, eventUnhealthy, "%s probe failed: %s", kind, output)
				}
				if ps.record(kind, spec, ok) {
					changed = true
				}
				if ps.failed != "" {
					klog.FromContext(ctx).V(2).Info("Probe failed; the container is to be killed", "pod", klog.KObj(pod), "container", c.Name, "probe", kind)
					break
				}
			}
		}
	}
	if changed {
		p.queue.Add(pod.UID)
	}
	if !nextDue.IsZero() {
		p.queue.AddAfter(pod.UID, nextDue.Sub(now))
	}
}

// record counts one result of the probe and reports whether what the plan reads changed:
// started, ready, or a liveness or startup failure at its threshold.
func (ps *probeState) record(kind probeKind, spec *corev1.Probe, ok bool) bool {
	if ok {
		ps.successes[kind]++
		ps.failures[kind] = 0
	} else {
		ps.failures[kind]++
		ps.successes[kind] = 0
	}
	switch {
	case kind == startupProbe && ok:
		ps.started = true
	case kind == readinessProbe && ok && !ps.ready && ps.successes[kind] >= max(spec.SuccessThreshold, 1):
		ps.ready = true
	case kind == readinessProbe && !ok && ps.ready && ps.failures[kind] >= max(spec.FailureThreshold, 1):
		ps.ready = false
	case kind != readinessProbe && !ok && ps.failures[kind] >= max(spec.FailureThreshold, 1):
		ps.failed = strings.ToLower(kind.String())
	default:
		return false
	}
	return true
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// runProbe runs one probe: httpGet calls what the pod serves on the port (2xx and 3xx pass),
// tcpSocket passes while something serves the port, exec runs in the container (exit 0 passes),
// grpc passes while something serves the port. Failure messages name the sandbox's IP, which
// the kubelet knows before its first status write has reached the pod object.
func (p *pods) runProbe(ctx context.Context, pod *corev1.Pod, podIP string, c *corev1.Container, spec *corev1.Probe) (bool, string) {
	ctx, cancel := clockctx.WithTimeout(ctx, p.clock, time.Duration(max(spec.TimeoutSeconds, 1))*time.Second)
	defer cancel()
	h := spec.ProbeHandler
	switch {
	case h.HTTPGet != nil:
		port := portOf(c, h.HTTPGet.Port)
		code, err := p.rt.HTTPGet(ctx, pod.UID, port, h.HTTPGet.Path, headers(h.HTTPGet.HTTPHeaders))
		switch {
		case err != nil:
			return false, fmt.Sprintf("Get %q: %v", fmt.Sprintf("http://%s:%d%s", podIP, port, h.HTTPGet.Path), err)
		case code < 200 || code >= 400:
			return false, fmt.Sprintf("HTTP probe failed with statuscode: %d", code)
		}
		return true, ""
	case h.TCPSocket != nil:
		port := portOf(c, h.TCPSocket.Port)
		if !p.rt.Listening(pod.UID, port) {
			return false, fmt.Sprintf("dial tcp %s:%d: connect: connection refused", podIP, port)
		}
		return true, ""
	case h.GRPC != nil:
		if !p.rt.Listening(pod.UID, h.GRPC.Port) {
			return false, fmt.Sprintf("timeout: failed to connect service %q within %ds", fmt.Sprintf(":%d", h.GRPC.Port), max(spec.TimeoutSeconds, 1))
		}
		return true, ""
	case h.Exec != nil:
		code, out, err := p.rt.Exec(ctx, pod.UID, c.Name, h.Exec.Command)
		if err != nil {
			return false, err.Error()
		}
		return code == 0, out
	}
	return false, "the probe has no handler"
}

// runHandler runs a lifecycle hook and says how it failed, as the kubelet's handler runner
// (pkg/kubelet/lifecycle/handlers.go): an exec that exits non-zero, an HTTP GET that cannot
// connect or answers with a status of 400 or more.
func (p *pods) runHandler(ctx context.Context, pod *corev1.Pod, c *corev1.Container, h *corev1.LifecycleHandler) error {
	switch {
	case h.Exec != nil:
		code, out, err := p.rt.Exec(ctx, pod.UID, c.Name, h.Exec.Command)
		if err == nil && code != 0 {
			err = fmt.Errorf("command %q exited with %d: %s", strings.Join(h.Exec.Command, " "), code, out)
		}
		return err
	case h.HTTPGet != nil:
		code, err := p.rt.HTTPGet(ctx, pod.UID, portOf(c, h.HTTPGet.Port), h.HTTPGet.Path, headers(h.HTTPGet.HTTPHeaders))
		if err == nil && code >= http.StatusBadRequest {
			err = fmt.Errorf("HTTP lifecycle hook (%s) returned status %d", h.HTTPGet.Path, code)
		}
		return err
	case h.Sleep != nil:
		timer := p.clock.NewTimer(time.Duration(h.Sleep.Seconds) * time.Second)
		defer timer.Stop()
		select {
		case <-timer.C():
		case <-ctx.Done():
		}
	}
	return nil
}

// portOf resolves a probe's port, by number or by the container's port name.
func portOf(c *corev1.Container, port intstr.IntOrString) int32 {
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

func headers(hs []corev1.HTTPHeader) http.Header {
	out := http.Header{}
	for _, h := range hs {
		out.Add(h.Name, h.Value)
	}
	return out
}
