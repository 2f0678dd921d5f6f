package agent

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// The agent sidecar's container name and image in JobSet's in-place-restart examples.
const (
	ContainerName = "in-place-restart-agent"
	Image         = "registry.k8s.io/jobset/in-place-restart-agent:v0.12.0"
)

// Sidecar is the agent as JobSet's sidecar-mode example runs it: an init container with
// restartPolicy Always and the given restart rules, POD_NAME and JOBSET_NAME from the downward
// API (the JobSet's name from the pod's jobset-name label), and its barrier as the startup probe,
// every second for up to ten minutes.
func Sidecar(rules []corev1.ContainerRestartRule) corev1.Container {
	return corev1.Container{
		Name: ContainerName, Image: Image,
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), RestartPolicyRules: rules,
		Env: []corev1.EnvVar{
			{Name: EnvPodName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: EnvJobSetName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
				FieldPath: "metadata.labels['" + jobsetv1alpha2.JobSetNameKey + "']"}}},
		},
		StartupProbe: &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 600, ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: DefaultStartupProbePath, Port: intstr.FromInt32(DefaultStartupProbePort)}}},
	}
}
