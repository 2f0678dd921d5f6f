package builders

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// JobBuilder builds a batch/v1 Job.
type JobBuilder struct{ job batchv1.Job }

// MakeJob returns a Job with one pod that runs one container, restartPolicy Never.
func MakeJob(name, namespace string) *JobBuilder {
	return &JobBuilder{job: batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
				},
			},
		},
	}}
}

// Parallelism sets spec.parallelism and, when unset, spec.completions to the same value.
func (b *JobBuilder) Parallelism(n int32) *JobBuilder {
	b.job.Spec.Parallelism = ptr.To(n)
	if b.job.Spec.Completions == nil {
		b.job.Spec.Completions = ptr.To(n)
	}
	return b
}

// BackoffLimit sets spec.backoffLimit.
func (b *JobBuilder) BackoffLimit(n int32) *JobBuilder {
	b.job.Spec.BackoffLimit = ptr.To(n)
	return b
}

// PodReplacementPolicy sets spec.podReplacementPolicy.
func (b *JobBuilder) PodReplacementPolicy(p batchv1.PodReplacementPolicy) *JobBuilder {
	b.job.Spec.PodReplacementPolicy = ptr.To(p)
	return b
}

// Obj returns a copy of the Job.
func (b *JobBuilder) Obj() *batchv1.Job { return b.job.DeepCopy() }
