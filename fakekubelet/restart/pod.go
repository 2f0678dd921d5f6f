package restart

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/restartbed/restartbed/fakekubelet/container"
)

// ShouldStart reports whether the kubelet (re)starts container c now, given the runtime's
// instances: never for a pod being deleted; always when c has no instance; never while its
// newest instance runs; else as its exit and the restart rules decide (docs/reference/kubelet.md, "Deciding a restart").
func (r Rules) ShouldStart(c *corev1.Container, pod *corev1.Pod, rt *container.PodStatus) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	latest := rt.Latest(c.Name)
	switch {
	case latest == nil:
		return true
	case latest.State == container.Running:
		return false
	}
	return r.ShouldRestart(c, pod.Spec.RestartPolicy, latest.ExitCode)
}

// ShouldRestartAll reports whether the pod is in a RestartAllContainers (docs/reference/kubelet.md, "The trigger"): the
// API status says so, or the newest instance of some init or regular container exited with a
// code whose first matching rule restarts all containers, or the API shows such an exit.
func (r Rules) ShouldRestartAll(pod *corev1.Pod, rt *container.PodStatus, api *corev1.PodStatus) bool {
	if !r.RestartAll {
		return false
	}
	if api != nil {
		for _, c := range api.Conditions {
			if c.Type == corev1.AllContainersRestarting && c.Status == corev1.ConditionTrue {
				return true
			}
		}
	}
	var apiInit, apiRegular []corev1.ContainerStatus
	if api != nil {
		apiInit, apiRegular = api.InitContainerStatuses, api.ContainerStatuses
	}
	triggered := func(containers []corev1.Container, statuses []corev1.ContainerStatus) bool {
		for i := range containers {
			c := &containers[i]
			if s := rt.Latest(c.Name); s != nil && s.State == container.Exited && r.RestartsAll(c, s.ExitCode) {
				return true
			}
			if s := StatusOf(statuses, c.Name); s != nil && s.State.Terminated != nil && r.RestartsAll(c, s.State.Terminated.ExitCode) {
				return true
			}
		}
		return false
	}
	return triggered(pod.Spec.InitContainers, apiInit) || triggered(pod.Spec.Containers, apiRegular)
}

// CleanedUp reports whether no init or regular container of the pod has an instance left: the
// end of a RestartAllContainers cleanup.
func CleanedUp(pod *corev1.Pod, rt *container.PodStatus) bool {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if rt.Latest(list[i].Name) != nil {
				return false
			}
		}
	}
	return true
}

// HasRunningRegular reports whether some regular container has a running instance: the pod has
// been initialized, as the kubelet's getPhase and start logic see it.
func HasRunningRegular(spec *corev1.PodSpec, rt *container.PodStatus) bool {
	for i := range spec.Containers {
		if s := rt.Latest(spec.Containers[i].Name); s != nil && s.State == container.Running {
			return true
		}
	}
	return false
}
