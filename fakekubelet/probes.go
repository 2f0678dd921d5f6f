package fakekubelet

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/restartbed/restartbed/fakekubelet/prober"
	"github.com/restartbed/restartbed/fakekubelet/status"
)

// probeUpdated is the probe workers' report of a changed result: a readiness or startup result
// and a liveness failure bring a sync, as the kubelet's sync loop handles its results managers'
// updates (a liveness success changes nothing a sync does).
func (p *pods) probeUpdated(uid types.UID, kind prober.Kind, r prober.Result) {
	if kind == prober.Liveness && r != prober.Failure {
		return
	}
	p.queue.Add(uid)
}

// publishProbeResults is what the kubelet's status manager does with a readiness or startup
// result at once, while the pod's sync waits for a relist (SetContainerReadiness and
// SetContainerStartup): the started and ready flags of the last status, and the conditions that
// follow from them, change and are published.
func (p *pods) publishProbeResults(pod *corev1.Pod, hostIP string) {
	if !statusProbed(pod.Spec.InitContainers) && !statusProbed(pod.Spec.Containers) {
		return // the common case: nothing to publish, and no status to copy
	}
	old, ok := p.status.Latest(pod.UID)
	if !ok {
		return // no status generated yet: the first sync publishes them
	}
	s, changed := status.ApplyProbeResults(status.Input{Pod: pod, Old: old, HostIP: hostIP, Rules: p.rules, Release: p.release,
		Probes: p.prober.Results(pod.UID), KubeletRestart: p.restartKeeps(pod.Spec.NodeName), Now: p.clock.Now()})
	if changed {
		p.setStatus(pod, s)
	}
}

// statusProbed reports whether a container has a probe whose result shows in the status:
// startup or readiness.
func statusProbed(cs []corev1.Container) bool {
	for i := range cs {
		if cs[i].StartupProbe != nil || cs[i].ReadinessProbe != nil {
			return true
		}
	}
	return false
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
		code, err := p.rt.HTTPGet(ctx, pod.UID, prober.PortOf(c, h.HTTPGet.Port), h.HTTPGet.Path, prober.Header(h.HTTPGet.HTTPHeaders))
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
