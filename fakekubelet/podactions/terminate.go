package podactions

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/restartbed/restartbed/fakekubelet/container"
	"github.com/restartbed/restartbed/fakekubelet/restart"
)

// syncTerminatingPod plans a sync of a terminating pod (syncTerminatingPod): it publishes the
// status and stops every running container, as killPod does. It reports whether none runs any
// more, having then planned the sandbox's stop: the pod is terminated.
func (p *planner) syncTerminatingPod() (terminated bool) {
	pod, rt := p.in.Pod, p.in.Runtime
	if rt == nil {
		return true // nothing ever ran here, or a previous kubelet's runtime is gone
	}
	// A pod that terminates without being deleted (its phase turned terminal) still waits for
	// a postStart hook under way; a deletion does not, nor does any termination wait for a
	// sync's kill.
	if pod.DeletionTimestamp == nil && p.postStartRunning() {
		return false
	}
	if !running(rt) {
		p.out.StopSandbox = true // and the status published is the one generated once it has stopped
		return true
	}
	gen := p.in.Status
	if restart.IsTerminal(gen.Phase) && !restart.IsTerminal(pod.Status.Phase) {
		// The status manager holds a terminal phase back while the pod could have running
		// containers (mergePodStatus in pkg/kubelet/status/status_manager.go): the API keeps
		// the phase, reason and message it has until the last container has stopped.
		gen.Phase, gen.Reason, gen.Message = pod.Status.Phase, pod.Status.Reason, pod.Status.Message
	}
	p.out.Publish, p.out.Status = PublishAsync, gen
	p.stopAll()
	return false
}

// syncTerminatedPod plans a sync of a terminated pod (syncTerminatedPod): it publishes the final
// status, generated once the sandbox had stopped; a deleted pod's is waited into the API, and
// then the deletion finishes (the status manager's canBeDeleted). Nothing ever starts again.
func (p *planner) syncTerminatedPod() {
	deleted := p.in.Pod.DeletionTimestamp != nil
	p.out.FinishDeletion = deleted
	if p.in.Runtime == nil {
		return // no status to generate: a terminal pod stays as the API has it
	}
	p.out.Publish, p.out.Status = PublishAsync, p.in.Status
	if deleted {
		p.out.Publish = PublishAndWait
	}
}

// stopAll stops the pod's running containers as the kubelet kills a pod
// (killContainersWithSyncResult and its terminationOrdering): every container at once, each
// after its preStop hook; a sidecar's SIGTERM then waits, within its grace, for the regular
// containers and for the sidecars after it. A terminating pod's grace counts from the start of
// its termination; SyncPod's KillPod gives each container the whole grace.
func (p *planner) stopAll() {
	pod, rt := p.in.Pod, p.in.Runtime
	since := p.in.TerminatingAt
	if since.IsZero() {
		since = p.in.Now
	}
	remaining := max(podGrace(pod)-p.in.Now.Sub(since), p.in.MinGrace)
	running := func(c *corev1.Container) *container.Status {
		if latest := rt.Latest(c.Name); latest != nil && latest.State == container.Running {
			return latest
		}
		return nil
	}
	// The regular containers go first; a running init container that is not a sidecar waits
	// for nothing and nothing waits for it.
	var before []string
	for i := range pod.Spec.Containers {
		if inst := running(&pod.Spec.Containers[i]); inst != nil {
			p.kill(&pod.Spec.Containers[i], inst, remaining, "", true)
			before = append(before, inst.ID)
		}
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; !restart.IsSidecar(c) {
			if inst := running(c); inst != nil {
				p.kill(c, inst, remaining, "", true)
			}
		}
	}
	for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
		c := &pod.Spec.InitContainers[i]
		inst := running(c)
		if inst == nil || !restart.IsSidecar(c) {
			continue
		}
		if p.kill(c, inst, remaining, "", true) {
			p.out.Kill[len(p.out.Kill)-1].After = slices.Clone(before)
		}
		before = append(before, inst.ID)
	}
}
