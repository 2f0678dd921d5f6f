package builders

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/agent"
	agentconfig "github.com/restartbed/restartbed/config/agent"
)

// RestartAllOnFailure is the rule of JobSet's sidecar-mode example: any nonzero exit restarts
// every container of the pod in place.
func RestartAllOnFailure() []corev1.ContainerRestartRule {
	return []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpNotIn, Values: []int32{0}}}}
}

// SidecarModePodSpec is the pod of JobSet's sidecar-mode example: the agent as a sidecar whose
// startup probe is the barrier (its JobSet's name read from the pod's jobset-name label) and a
// busybox worker sleeping; a nonzero exit of either restarts all containers.
func SidecarModePodSpec() corev1.PodSpec {
	return corev1.PodSpec{
		RestartPolicy:      corev1.RestartPolicyNever,
		ServiceAccountName: agentconfig.ServiceAccountName,
		InitContainers:     []corev1.Container{agent.Sidecar(RestartAllOnFailure())},
		Containers: []corev1.Container{{
			Name: "worker", Image: "busybox", Command: []string{"sh", "-c", "sleep 3600"},
			RestartPolicy: ptr.To(corev1.ContainerRestartPolicyNever), RestartPolicyRules: RestartAllOnFailure(),
		}},
	}
}
