package controlplane

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/test/builders"
)

var _ = Describe("the upstream garbage collector", Label("gc"), func() {
	It("finishes a foreground deletion of a Job: its pods go, then the Job", func(ctx context.Context) {
		ns := newNamespace(ctx)
		job := builders.MakeJob("doomed", ns).Parallelism(2).Obj()
		Expect(k8s.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(podsOf(ctx, g, job)).To(HaveLen(2))
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())

		Expect(k8s.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
		// While dependents remain, the Job stays with the foregroundDeletion finalizer.
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
		Expect(job.Finalizers).To(ContainElement(metav1.FinalizerDeleteDependents))

		Eventually(func(g Gomega) {
			g.Expect(podsOf(ctx, g, job)).To(BeEmpty())
			err := k8s.Get(ctx, client.ObjectKeyFromObject(job), job)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Job is still there: %v", job.Finalizers)
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("deletes pods whose owner is gone (background propagation)", func(ctx context.Context) {
		ns := newNamespace(ctx)
		owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: ns}}
		Expect(k8s.Create(ctx, owner)).To(Succeed())
		pod := builders.MakePod("dependent", ns).Container(builders.MakeContainer("main").Obj()).Obj()
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
		Expect(k8s.Create(ctx, pod)).To(Succeed())

		Expect(k8s.Delete(ctx, owner)).To(Succeed())
		Eventually(func(g Gomega) {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	// The fast profile's pod GC is upstream's controller run by restartbed's thin main with the
	// profile's period and quarantine, inside upstream's command once it has configured logging.
	It("deletes a pod bound to a node that does not exist, after the quarantine (pod GC)", func(ctx context.Context) {
		ns := newNamespace(ctx)
		pod := builders.MakePod("orphan", ns).Container(builders.MakeContainer("main").Obj()).Obj()
		pod.Spec.NodeName = "no-such-node"
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		created := time.Now()
		Eventually(func(g Gomega) {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the pod is still there: %s", pod.Status.Phase)
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(time.Since(created)).To(BeNumerically(">=", cluster.Timing.PodGCQuarantine), "deleted before the quarantine")
	})
})
