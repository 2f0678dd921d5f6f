package controlplane

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/test/builders"
)

var _ = Describe("the upstream Job controller", Label("job"), func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	It("creates a Job's pods with the job-tracking finalizer and a controller reference", func(ctx context.Context) {
		job := builders.MakeJob("train", ns).Parallelism(2).Obj()
		Expect(k8s.Create(ctx, job)).To(Succeed())

		Eventually(func(g Gomega) {
			pods := podsOf(ctx, g, job)
			g.Expect(pods).To(HaveLen(2))
			for _, p := range pods {
				g.Expect(p.Finalizers).To(ContainElement(batchv1.JobTrackingFinalizer))
				g.Expect(p.GenerateName).To(Equal("train-"))
				g.Expect(metav1.GetControllerOf(&p)).To(PointTo(MatchFields(IgnoreExtras, Fields{
					"Kind": Equal("Job"), "UID": Equal(job.UID),
				})))
			}
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
			g.Expect(job.Status.Active).To(Equal(int32(2)))
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("under podReplacementPolicy Failed, replaces a terminating pod only once it has failed", func(ctx context.Context) {
		job := builders.MakeJob("failed-policy", ns).Parallelism(1).
			PodReplacementPolicy(batchv1.Failed).Obj()
		Expect(k8s.Create(ctx, job)).To(Succeed())
		pod := onlyPod(ctx, job)
		bindAndDeleteGracefully(ctx, pod)

		// The controller has seen the terminating pod and, in the same sync, decided not to
		// replace it: the status it wrote counts the pod as terminating and none as active.
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
			g.Expect(job.Status.Terminating).To(Equal(ptr.To[int32](1)))
			g.Expect(job.Status.Active).To(BeZero())
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(podsOfNow(ctx, job)).To(HaveLen(1))

		// Failed long ago, so the pod-failure backoff has run out: the replacement comes at once.
		markFailed(ctx, k8s, pod, time.Now().Add(-time.Hour))
		Eventually(func(g Gomega) {
			g.Expect(activePods(podsOf(ctx, g, job))).To(HaveLen(1))
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
			g.Expect(job.Status.Failed).To(Equal(int32(1)))
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("under podReplacementPolicy TerminatingOrFailed, replaces a terminating pod at once", func(ctx context.Context) {
		job := builders.MakeJob("terminating-policy", ns).Parallelism(1).
			PodReplacementPolicy(batchv1.TerminatingOrFailed).Obj()
		Expect(k8s.Create(ctx, job)).To(Succeed())
		pod := onlyPod(ctx, job)
		// Upstream takes the deletion time (deletionTimestamp − grace) as the finish time, so
		// the replacement waits out the first pod-failure backoff: one second in this profile.
		bindAndDeleteGracefully(ctx, pod)

		Eventually(func(g Gomega) {
			pods := podsOf(ctx, g, job)
			g.Expect(pods).To(HaveLen(2))
			g.Expect(activePods(pods)).To(HaveLen(1))
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
			g.Expect(job.Status.Failed).To(Equal(int32(1)), "a terminating pod counts as failed under TerminatingOrFailed")
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("fails the Job with BackoffLimitExceeded once more pods failed than backoffLimit allows", func(ctx context.Context) {
		job := builders.MakeJob("limited", ns).Parallelism(1).BackoffLimit(0).Obj()
		Expect(k8s.Create(ctx, job)).To(Succeed())
		markFailed(ctx, k8s, onlyPod(ctx, job), time.Now().Add(-time.Hour))

		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
			g.Expect(job.Status.Conditions).To(ContainElement(MatchFields(IgnoreExtras, Fields{
				"Type":    Equal(batchv1.JobFailed),
				"Status":  Equal(corev1.ConditionTrue),
				"Reason":  Equal(batchv1.JobReasonBackoffLimitExceeded),
				"Message": Equal("Job has reached the specified backoff limit"),
			})))
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})
})

// onlyPod waits for the single pod of a Job with parallelism 1.
func onlyPod(ctx context.Context, job *batchv1.Job) *corev1.Pod {
	GinkgoHelper()
	var pod corev1.Pod
	Eventually(func(g Gomega) {
		pods := podsOf(ctx, g, job)
		g.Expect(pods).To(HaveLen(1))
		pod = pods[0]
	}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	return &pod
}

func podsOfNow(ctx context.Context, job *batchv1.Job) []corev1.Pod {
	GinkgoHelper()
	return podsOf(ctx, Default, job)
}

// activePods keeps the pods upstream counts as active: not terminal and not being deleted.
func activePods(pods []corev1.Pod) []corev1.Pod {
	var active []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
			active = append(active, p)
		}
	}
	return active
}

// bindAndDeleteGracefully binds the pod to a node, so the apiserver keeps it while it
// terminates (an unscheduled pod is deleted at once), and deletes it with a grace period.
// No kubelet runs here, so it stays terminating until the spec marks it Failed.
func bindAndDeleteGracefully(ctx context.Context, pod *corev1.Pod) {
	GinkgoHelper()
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		Target:     corev1.ObjectReference{Kind: "Node", Name: "node-0"},
	}
	Expect(cluster.Clientset.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})).To(Succeed())
	Expect(k8s.Delete(ctx, pod, client.GracePeriodSeconds(3600))).To(Succeed())
}

// markFailed writes the status a kubelet writes when the pod's only container exits 1.
func markFailed(ctx context.Context, c client.Client, pod *corev1.Pod, finishedAt time.Time) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		pod.Status.Phase = corev1.PodFailed
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name:  pod.Spec.Containers[0].Name,
			Image: pod.Spec.Containers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode:   1,
				Reason:     "Error",
				StartedAt:  metav1.NewTime(finishedAt.Add(-time.Second)),
				FinishedAt: metav1.NewTime(finishedAt),
			}},
		}}
		g.Expect(c.Status().Update(ctx, pod)).To(Succeed())
	}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
}
