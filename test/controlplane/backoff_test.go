package controlplane

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
	"github.com/restartbed/restartbed/timing"
)

// The Job controller runs in kube-controller-manager, with the profile's pod-failure backoff set
// through restartbed's thin main: a failed pod is replaced no sooner than the backoff, which
// doubles, and much sooner than upstream's default of 10 s.
var _ = Describe("the pod-failure backoff of the timing profile", Label("job", "backoff"), Ordered, func() {
	var tuned *envtest.Cluster
	profile := timing.Fast()
	profile.JobPodFailureBackOff = 3 * time.Second
	BeforeAll(func(ctx context.Context) {
		tuned = specs.StartCluster(ctx, envtest.Options{Timing: &profile})
	}, NodeTimeout(specs.StartTimeout))

	It("replaces a failed pod after the backoff, doubling it for the next", func(ctx context.Context) {
		c := tuned.Client
		ns := specs.NewNamespace(ctx, tuned)
		job := builders.MakeJob("backoff", ns).Parallelism(1).BackoffLimit(6).
			PodReplacementPolicy(batchv1.Failed).Obj()
		Expect(c.Create(ctx, job)).To(Succeed())

		for failures := 1; failures <= 2; failures++ {
			var pods []corev1.Pod
			Eventually(func(g Gomega) {
				pods = activePods(podsIn(ctx, g, c, job))
				g.Expect(pods).To(HaveLen(1))
			}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
			failedAt := time.Now()
			markFailed(ctx, c, &pods[0], failedAt)

			var replacement corev1.Pod
			Eventually(func(g Gomega) {
				active := activePods(podsIn(ctx, g, c, job))
				g.Expect(active).To(HaveLen(1))
				replacement = active[0]
			}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
			// The Job controller counts the backoff from the failed container's finish, which the
			// API keeps in whole seconds (failedAt truncated), and creates the replacement when it
			// has run out, a little late: the wait is the backoff plus that lateness, rounded
			// down, never less than the backoff. Upstream's default backoff would make it at
			// least upstream's: any wait below that shows the profile's backoff, however late
			// a loaded machine makes the controller (seven seconds of lateness for the first).
			waited := replacement.CreationTimestamp.Sub(failedAt.Truncate(time.Second))
			backoff := profile.JobPodFailureBackOff << (failures - 1)
			Expect(waited).To(BeNumerically(">=", backoff),
				"failure %d: replaced after %s, before the backoff of %s", failures, waited, backoff)
			upstream := timing.Realistic().JobPodFailureBackOff << (failures - 1)
			Expect(waited).To(BeNumerically("<", upstream),
				"failure %d: replaced after %s, as upstream's default backoff of %s would, not the profile's %s", failures, waited, upstream, backoff)
		}
	})
})
