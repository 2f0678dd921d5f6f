package restart

import (
	corev1 "k8s.io/api/core/v1"
)

// ReasonRestartingAllContainers is the state reason the kubelet gives every container it removed
// for a RestartAllContainers; a container with it counts as restartable.
const ReasonRestartingAllContainers = "RestartingAllContainers"

// PhaseInput is what the kubelet's phase computation reads.
type PhaseInput struct {
	Spec *corev1.PodSpec
	// InitStatuses and Statuses are the container statuses about to be published.
	InitStatuses, Statuses []corev1.ContainerStatus
	// Initialized: some regular container has an instance in the runtime that has not exited.
	Initialized bool
	// Terminating: the pod is being torn down (its deletion or its terminal phase); then a pod
	// whose containers have all stopped is terminal whether or not they would restart.
	Terminating bool
}

// Phase computes the pod phase from container statuses as the 1.35 kubelet's getPhase does with
// the container-restart-rules gate on (docs/reference/kubelet.md, "Phase"); a RestartAllContainers rule match counts
// as restartable when that gate is on.
func (r Rules) Phase(in PhaseInput) corev1.PodPhase {
	var pendingInit, failedInitNotRestartable, pendingSidecar int
	var running, waiting, stopped, succeeded, stoppedNotRestartable, unknown int

	restartable := func(c *corev1.Container, t *corev1.ContainerStateTerminated) bool {
		return t.Reason == ReasonRestartingAllContainers || r.ShouldRestart(c, in.Spec.RestartPolicy, t.ExitCode)
	}

	for i := range in.Spec.InitContainers {
		c := &in.Spec.InitContainers[i]
		s := StatusOf(in.InitStatuses, c.Name)
		if IsSidecar(c) {
			switch {
			case s == nil:
				unknown++
			case s.State.Running != nil:
				running++
				if s.Started == nil || !*s.Started {
					pendingSidecar++
				}
			case s.State.Waiting != nil && s.LastTerminationState.Terminated == nil:
				pendingSidecar++
				waiting++
			}
			continue
		}
		var failed *corev1.ContainerStateTerminated
		switch {
		case s == nil, s.State.Running != nil:
			pendingInit++
		case s.State.Terminated != nil:
			failed = s.State.Terminated
		case s.State.Waiting != nil && s.LastTerminationState.Terminated != nil:
			failed = s.LastTerminationState.Terminated
		case s.State.Waiting != nil:
			pendingInit++
		}
		if failed != nil && failed.ExitCode != 0 && !restartable(c, failed) {
			failedInitNotRestartable++
		}
	}

	for i := range in.Spec.Containers {
		c := &in.Spec.Containers[i]
		s := StatusOf(in.Statuses, c.Name)
		switch {
		case s == nil:
			unknown++
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil:
			stopped++
			if s.State.Terminated.ExitCode == 0 {
				succeeded++
			}
			if !restartable(c, s.State.Terminated) {
				stoppedNotRestartable++
			}
		case s.State.Waiting != nil && s.LastTerminationState.Terminated != nil:
			stopped++
			if !restartable(c, s.LastTerminationState.Terminated) {
				stoppedNotRestartable++
			}
		case s.State.Waiting != nil:
			waiting++
		}
	}

	switch {
	case failedInitNotRestartable > 0:
		return corev1.PodFailed
	case pendingInit > 0 || (pendingSidecar > 0 && !in.Initialized) || waiting > 0:
		return corev1.PodPending
	case running > 0 && unknown == 0:
		return corev1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if !in.Terminating && stopped != stoppedNotRestartable {
			return corev1.PodRunning // something will start again
		}
		if stopped == succeeded {
			return corev1.PodSucceeded
		}
		return corev1.PodFailed
	}
	return corev1.PodPending
}

// StatusOf returns the status of the named container, or nil.
func StatusOf(statuses []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range statuses {
		if statuses[i].Name == name {
			return &statuses[i]
		}
	}
	return nil
}

// IsTerminal reports whether a pod phase is final: Succeeded or Failed. A pod never leaves it.
func IsTerminal(p corev1.PodPhase) bool {
	return p == corev1.PodSucceeded || p == corev1.PodFailed
}
