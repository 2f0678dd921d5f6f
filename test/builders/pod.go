package builders

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// PodBuilder builds a core/v1 Pod.
type PodBuilder struct{ pod corev1.Pod }

// MakePod returns a Pod with restartPolicy Never and no containers.
func MakePod(name, namespace string) *PodBuilder {
	return &PodBuilder{pod: corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever},
	}}
}

// Container appends a regular container.
func (b *PodBuilder) Container(c corev1.Container) *PodBuilder {
	b.pod.Spec.Containers = append(b.pod.Spec.Containers, c)
	return b
}

// InitContainer appends an init container; one with restartPolicy Always is a sidecar.
func (b *PodBuilder) InitContainer(c corev1.Container) *PodBuilder {
	b.pod.Spec.InitContainers = append(b.pod.Spec.InitContainers, c)
	return b
}

// RestartPolicy sets the pod-level restartPolicy.
func (b *PodBuilder) RestartPolicy(p corev1.RestartPolicy) *PodBuilder {
	b.pod.Spec.RestartPolicy = p
	return b
}

// EmptyDir adds an emptyDir volume.
func (b *PodBuilder) EmptyDir(name string) *PodBuilder {
	b.pod.Spec.Volumes = append(b.pod.Spec.Volumes, corev1.Volume{Name: name,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	return b
}

// Obj returns a copy of the Pod.
func (b *PodBuilder) Obj() *corev1.Pod { return b.pod.DeepCopy() }

// ContainerBuilder builds a core/v1 Container.
type ContainerBuilder struct{ c corev1.Container }

// MakeContainer returns a container running the busybox image.
func MakeContainer(name string) *ContainerBuilder {
	return &ContainerBuilder{c: corev1.Container{Name: name, Image: "busybox"}}
}

// RestartPolicy sets the container-level restartPolicy.
func (b *ContainerBuilder) RestartPolicy(p corev1.ContainerRestartPolicy) *ContainerBuilder {
	b.c.RestartPolicy = ptr.To(p)
	return b
}

// OnExitCodes appends a restart rule: action when the exit code matches operator values.
func (b *ContainerBuilder) OnExitCodes(action corev1.ContainerRestartRuleAction,
	op corev1.ContainerRestartRuleOnExitCodesOperator, values ...int32) *ContainerBuilder {
	b.c.RestartPolicyRules = append(b.c.RestartPolicyRules, corev1.ContainerRestartRule{
		Action:    action,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: op, Values: values},
	})
	return b
}

// Shell makes the container run script with sh -c, as busybox e2e pods do.
func (b *ContainerBuilder) Shell(script string) *ContainerBuilder {
	b.c.Command = []string{"/bin/sh", "-c", script}
	return b
}

// Mount mounts a pod volume.
func (b *ContainerBuilder) Mount(volume, path string) *ContainerBuilder {
	b.c.VolumeMounts = append(b.c.VolumeMounts, corev1.VolumeMount{Name: volume, MountPath: path})
	return b
}

// StartupExec sets a startup probe that runs argv every second.
func (b *ContainerBuilder) StartupExec(argv ...string) *ContainerBuilder {
	b.c.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: argv}},
		PeriodSeconds: 1, FailureThreshold: 30}
	return b
}

// Obj returns a copy of the container.
func (b *ContainerBuilder) Obj() corev1.Container { return *b.c.DeepCopy() }
