package status

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/restartbed/restartbed/fakekubelet/container"
	"github.com/restartbed/restartbed/fakekubelet/restart"
)

// ApplyProbeResults is what the kubelet's status manager does with a startup or readiness
// result while the pod's sync cannot run (SetContainerStartup and SetContainerReadiness in
// pkg/kubelet/status/status_manager.go): it takes the last generated status (in.Old) and changes
// only the started and ready flags of the running containers whose probe found otherwise, and
// the ContainersReady and Ready conditions that follow from them. It reports whether anything
// changed. Containers without the probe are left alone: their flags change only with a sync.
// This is not applyProbes on the old status: there a started container without a readiness
// probe is ready at once, here a startup result moves the started flag only.
func ApplyProbeResults(in Input) (corev1.PodStatus, bool) {
	if in.Probes == nil {
		return in.Old, false
	}
	s := *in.Old.DeepCopy()
	changed := false
	apply := func(containers []corev1.Container, statuses []corev1.ContainerStatus, isInit bool) {
		for i := range containers {
			c := &containers[i]
			st := restart.StatusOf(statuses, c.Name)
			if st == nil || st.State.Running == nil || st.ContainerID == "" {
				continue
			}
			id := container.InstanceID(st.ContainerID)
			if c.StartupProbe != nil && (in.Probes.StartupKnown(id) || in.KubeletRestart.ChangeStatus) {
				if started := in.Probes.Started(id); st.Started == nil || *st.Started != started {
					st.Started = &started
					changed = true
				}
			}
			if c.ReadinessProbe != nil && (!isInit || restart.IsSidecar(c)) && (in.Probes.ReadinessKnown(id) || in.KubeletRestart.ChangeStatus) {
				if ready := in.Probes.Ready(id); st.Ready != ready {
					st.Ready = ready
					changed = true
				}
			}
		}
	}
	apply(in.Pod.Spec.InitContainers, s.InitContainerStatuses, true)
	apply(in.Pod.Spec.Containers, s.ContainerStatuses, false)
	if !changed {
		return in.Old, false
	}
	g := generator{in: in}
	all := slices.Concat(s.InitContainerStatuses, s.ContainerStatuses)
	containersReady := g.containersReady(all, s.Phase)
	for _, cond := range []corev1.PodCondition{g.podReady(containersReady, s.Conditions), containersReady} {
		if i := slices.IndexFunc(s.Conditions, func(c corev1.PodCondition) bool { return c.Type == cond.Type }); i >= 0 {
			s.Conditions[i] = cond
		} else {
			s.Conditions = append(s.Conditions, cond)
		}
	}
	g.keepTransitionTimes(s.Conditions)
	return s, true
}
