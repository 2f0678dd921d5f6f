package controlplane

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

func jobSet(name, ns string) *jobsetv1alpha2.JobSet {
	return &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: jobsetv1alpha2.JobSetSpec{
			FailurePolicy: &jobsetv1alpha2.FailurePolicy{MaxRestarts: 3},
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
				Name: "workers",
				Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
					Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						Containers:    []corev1.Container{{Name: "worker", Image: "busybox"}},
					},
				}}},
			}},
		},
	}
}

var _ = Describe("restartbed's JobSet CRD", Label("crd"), func() {
	It("is installed with upstream's defaults", func(ctx context.Context) {
		js := jobSet("defaults", newNamespace(ctx))
		Expect(k8s.Create(ctx, js)).To(Succeed())
		Expect(js.Spec.FailurePolicy.RestartStrategy).To(Equal(jobsetv1alpha2.Recreate))
		Expect(js.Spec.ReplicatedJobs[0].Replicas).To(Equal(int32(1)))
		Expect(js.Spec.ReplicatedJobs[0].GroupName).To(Equal("default"))
	})

	It("keeps failurePolicy immutable, as upstream's CEL rule does", func(ctx context.Context) {
		js := jobSet("immutable", newNamespace(ctx))
		Expect(k8s.Create(ctx, js)).To(Succeed())
		js.Spec.FailurePolicy.RestartStrategy = jobsetv1alpha2.InPlaceRestart
		err := k8s.Update(ctx, js)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(Equal(`JobSet.jobset.x-k8s.io "immutable" is invalid: spec.failurePolicy: Invalid value: Value is immutable`))
	})

	It("rejects an unknown restart strategy with the enum", func(ctx context.Context) {
		js := jobSet("enum", newNamespace(ctx))
		js.Spec.FailurePolicy.RestartStrategy = "RestartPod"
		err := k8s.Create(ctx, js)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring(
			`spec.failurePolicy.restartStrategy: Unsupported value: "RestartPod": supported values: "Recreate", "BlockingRecreate", "InPlaceRestart"`))
	})

	It("keeps its status fields nil until set and stores them through the status subresource", func(ctx context.Context) {
		js := jobSet("status", newNamespace(ctx))
		Expect(k8s.Create(ctx, js)).To(Succeed())
		Expect(js.Status.CurrentInPlaceRestartAttempt).To(BeNil())
		attempt := int32(2)
		js.Status.CurrentInPlaceRestartAttempt = &attempt
		Expect(k8s.Status().Update(ctx, js)).To(Succeed())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(js), js)).To(Succeed())
		Expect(js.Status.CurrentInPlaceRestartAttempt).To(PointTo(Equal(int32(2))))
	})
})
