package controlplane

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
	"github.com/restartbed/restartbed/timing"
)

// The Job controller runs on the cluster's clock, so its pod-failure backoff can be watched to
// the step: nothing is replaced while the clock stands still, however long that takes.
var _ = Describe("the pod-failure backoff on the cluster's clock", Label("job", "backoff"), Ordered, func() {
	var (
		frozen *envtest.Cluster
		clock  *clocktesting.FakeClock
	)
	BeforeAll(func(ctx context.Context) {
		clock = clocktesting.NewFakeClock(time.Now())
		frozen = specs.StartCluster(ctx, envtest.Options{Clock: clock})
	}, NodeTimeout(specs.StartTimeout))

	It("replaces a failed pod exactly when the backoff has run out, doubling it for the next", func(ctx context.Context) {
		backoff := timing.Fast().JobPodFailureBackOff
		c := frozen.Client
		job := builders.MakeJob("backoff", "default").Parallelism(1).BackoffLimit(6).
			PodReplacementPolicy(batchv1.Failed).Obj()
		Expect(c.Create(ctx, job)).To(Succeed())

		for failures := 1; failures <= 2; failures++ {
			By("failing the running pod on a whole second")
			var pods []string
			Eventually(func(g Gomega) {
				clock.Step(10 * time.Millisecond) // the controller batches some syncs
				pods = activePodNames(ctx, g, c, job)
				g.Expect(pods).To(HaveLen(1))
			}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
			// The API keeps whole seconds of the finish time, and upstream measures from it.
			failedAt := clock.Now().Truncate(time.Second).Add(time.Second)
			clock.SetTime(failedAt)
			markFailed(ctx, c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pods[0], Namespace: job.Namespace}}, failedAt)

			By("letting the controller's batch period pass until it has counted the failure")
			Eventually(func(g Gomega) {
				clock.Step(10 * time.Millisecond)
				g.Expect(c.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
				g.Expect(job.Status.Failed).To(Equal(int32(failures)))
			}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
			wait := backoff << (failures - 1)
			Expect(clock.Since(failedAt)).To(BeNumerically("<", wait), "the batching used up the backoff; the test cannot tell")

			By("standing just short of the backoff: no replacement")
			clock.SetTime(failedAt.Add(wait - 10*time.Millisecond))
			Consistently(func(g Gomega) {
				g.Expect(activePodNames(ctx, g, c, job)).To(BeEmpty())
			}).WithContext(ctx).WithTimeout(time.Second).WithPolling(Interval).Should(Succeed())

			By("reaching it: the replacement comes within one batch period")
			// A sync that finds the backoff nearly over re-queues itself no sooner than the
			// batch period, so the replacement is due by then at the latest.
			clock.SetTime(failedAt.Add(wait + timing.Fast().JobSyncBatchPeriod))
			Eventually(func(g Gomega) {
				g.Expect(activePodNames(ctx, g, c, job)).To(HaveLen(1))
			}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		}
	})
})

func activePodNames(ctx context.Context, g Gomega, c client.Client, job *batchv1.Job) []string {
	var names []string
	for _, p := range activePods(podsIn(ctx, g, c, job)) {
		names = append(names, p.Name)
	}
	return names
}
