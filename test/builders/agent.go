package builders

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
	agentconfig "github.com/restartbed/restartbed/config/agent"
)

// AgentContainerName is the agent sidecar's name in JobSet's in-place-restart examples.
const AgentContainerName = "in-place-restart-agent"

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
		InitContainers: []corev1.Container{{
			Name: AgentContainerName, Image: "registry.k8s.io/jobset/in-place-restart-agent:v0.12.0",
			RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), RestartPolicyRules: RestartAllOnFailure(),
			Env: []corev1.EnvVar{
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "JOBSET_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
					FieldPath: "metadata.labels['" + jobsetv1alpha2.JobSetNameKey + "']"}}},
			},
			StartupProbe: &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 600, ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Path: "/barrier-is-down", Port: intstr.FromInt32(8081)}}},
		}},
		Containers: []corev1.Container{{
			Name: "worker", Image: "busybox", Command: []string{"sh", "-c", "sleep 3600"},
			RestartPolicy: ptr.To(corev1.ContainerRestartPolicyNever), RestartPolicyRules: RestartAllOnFailure(),
		}},
	}
}
