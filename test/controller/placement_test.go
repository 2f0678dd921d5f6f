package controller

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
	"github.com/restartbed/restartbed/test/specs"
)

// jobsOf lists the JobSet's Jobs of a replicated Job by name.
func jobsOf(ctx context.Context, g Gomega, js *jobsetv1alpha2.JobSet, rj string) map[string]batchv1.Job {
	var jobs batchv1.JobList
	g.Expect(cluster.Client.List(ctx, &jobs, client.InNamespace(js.Namespace), client.MatchingLabels{
		jobsetv1alpha2.JobSetNameKey: js.Name, jobsetv1alpha2.ReplicatedJobNameKey: rj})).To(Succeed())
	out := map[string]batchv1.Job{}
	for _, j := range jobs.Items {
		out[j.Name] = j
	}
	return out
}

var _ = Describe("Per-Job restarts, ordered resume, exclusive placement and volume claims", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = specs.NewNamespace(ctx, cluster) })

	It("with a RestartJob rule, recreates only the failed Job and counts it towards maxRestarts", func(ctx context.Context) {
		js := plainJobSet(ns, "perjob", 2, "sleep 3600")
		js.Spec.FailurePolicy = &jobsetv1alpha2.FailurePolicy{MaxRestarts: 1,
			Rules: []jobsetv1alpha2.FailurePolicyRule{{Name: "one", Action: jobsetv1alpha2.RestartJob}}}
		Expect(cluster.Client.Create(ctx, js)).To(Succeed())
		var victim *corev1.Pod
		var survivor batchv1.Job
		Eventually(func(g Gomega) {
			victim = runningPodOf(ctx, g, ns, "perjob-workers-1")
			survivor = jobsOf(ctx, g, js, "workers")["perjob-workers-0"]
			g.Expect(survivor.UID).NotTo(BeEmpty())
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(cluster.Kubelet.ExitContainer(ns, victim.Name, "worker", 1)).To(Succeed())

		By("the failed Job comes back at its own attempt 1; the JobSet's attempt and the other Job stay")
		Eventually(func(g Gomega) {
			g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), js)).To(Succeed())
			g.Expect(js.Status.Restarts).To(BeZero())
			g.Expect(js.Status.ReplicatedJobsStatus).To(ConsistOf(And(
				HaveField("JobRestarts", Equal([]int32{0, 1})), HaveField("JobRestartsCountTowardsMax", Equal([]int32{0, 1})))))
			jobs := jobsOf(ctx, g, js, "workers")
			g.Expect(jobs["perjob-workers-0"].UID).To(Equal(survivor.UID))
			g.Expect(jobs["perjob-workers-1"].Labels).To(HaveKeyWithValue(jobsetv1alpha2.JobRestartsKey, "1"))
			victim = runningPodOf(ctx, g, ns, "perjob-workers-1")
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Eventually(func() []string { return specs.EventMessages(ctx, cluster.Clientset, ns, "perjob") }).WithTimeout(Timeout).WithPolling(Interval).
			Should(ContainElement("RestartJobFailurePolicyAction: applying RestartJob failure policy action (first failed job: perjob-workers-1)"))

		By("the next failure finds the budget spent")
		Expect(cluster.Kubelet.ExitContainer(ns, victim.Name, "worker", 1)).To(Succeed())
		eventuallyFailed(ctx, js, "ReachedMaxRestarts", "jobset failed due to reaching max number of restarts (first failed job: perjob-workers-1)")
	})

	It("resumes in order, merging what a queue changed in the suspended template (startupPolicy InOrder)", func(ctx context.Context) {
		js := plainJobSet(ns, "queued", 1, "sleep 3600")
		js.Spec.ReplicatedJobs[0].Name = "driver"
		// The driver is ready only once /tmp/go exists in its container.
		js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1,
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/go"}}}}
		workers := *plainJobSet(ns, "queued", 2, "sleep 3600").Spec.ReplicatedJobs[0].DeepCopy()
		js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, workers)
		js.Spec.StartupPolicy = &jobsetv1alpha2.StartupPolicy{StartupPolicyOrder: jobsetv1alpha2.InOrder}
		js.Spec.Suspend = ptr.To(true)
		Expect(cluster.Client.Create(ctx, js)).To(Succeed())

		By("suspended, every Job exists, suspended")
		Eventually(func(g Gomega) {
			all := jobsOf(ctx, g, js, "workers")
			for name, j := range jobsOf(ctx, g, js, "driver") {
				all[name] = j
			}
			g.Expect(all).To(HaveLen(3))
			for _, j := range all {
				g.Expect(j.Spec.Suspend).To(Equal(ptr.To(true)), j.Name)
			}
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())

		By("a queue admits the JobSet: it labels the workers' pods and resumes")
		// As a queue does: the controller writes the JobSet's status meanwhile, so retry on conflict.
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), js); err != nil {
				return err
			}
			js.Spec.ReplicatedJobs[1].Template.Spec.Template.Labels = map[string]string{"queue": "team-a"}
			js.Spec.Suspend = ptr.To(false)
			return cluster.Client.Update(ctx, js)
		})).To(Succeed())

		var driver *corev1.Pod
		Eventually(func(g Gomega) { driver = runningPodOf(ctx, g, ns, "queued-driver-0") }).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Consistently(func(g Gomega) {
			for _, j := range jobsOf(ctx, g, js, "workers") {
				g.Expect(j.Spec.Suspend).To(Equal(ptr.To(true)), "workers resume only after the driver has started")
			}
		}).WithTimeout(2 * time.Second).WithPolling(Interval).Should(Succeed())
		Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), js)).To(Succeed())
		Expect(condition(js, jobsetv1alpha2.JobSetStartupPolicyInProgress)).To(HaveField("Status", metav1.ConditionTrue))

		code, _, err := cluster.Kubelet.Exec(ctx, ns, driver.Name, "worker", []string{"touch", "/tmp/go"})
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(BeZero())
		Eventually(func(g Gomega) {
			for _, name := range []string{"queued-workers-0", "queued-workers-1"} {
				g.Expect(runningPodOf(ctx, g, ns, name).Labels).To(HaveKeyWithValue("queue", "team-a"))
			}
			g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), js)).To(Succeed())
			g.Expect(condition(js, jobsetv1alpha2.JobSetStartupPolicyCompleted)).To(HaveField("Status", metav1.ConditionTrue))
			g.Expect(condition(js, jobsetv1alpha2.JobSetSuspended)).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "ResumeJobs")))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("places each Job on the nodes labelled with its name under the nodeSelector strategy", func(ctx context.Context) {
		js := plainJobSet(ns, "exclusive", 2, "sleep 3600")
		js.Annotations = map[string]string{jobsetv1alpha2.ExclusiveKey: "kubernetes.io/hostname", jobsetv1alpha2.NodeSelectorStrategyKey: "true"}
		var nodes corev1.NodeList
		Expect(cluster.Client.List(ctx, &nodes)).To(Succeed())
		Expect(len(nodes.Items)).To(BeNumerically(">=", 4))
		// Job i gets node 3-i, where the scheduler's spreading would not put it on its own.
		for i := range 2 {
			node := &nodes.Items[len(nodes.Items)-1-i]
			patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, jobsetv1alpha2.NamespacedJobKey, fmt.Sprintf("%s_exclusive-workers-%d", ns, i))
			Expect(cluster.Client.Patch(ctx, node, client.RawPatch(client.Merge.Type(), []byte(patch)))).To(Succeed())
			DeferCleanup(func(ctx context.Context) {
				unlabel := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, jobsetv1alpha2.NamespacedJobKey)
				Expect(cluster.Client.Patch(ctx, node, client.RawPatch(client.Merge.Type(), []byte(unlabel)))).To(Succeed())
			})
		}
		Expect(cluster.Client.Create(ctx, js)).To(Succeed())
		Eventually(func(g Gomega) {
			for i := range 2 {
				pod := runningPodOf(ctx, g, ns, fmt.Sprintf("exclusive-workers-%d", i))
				g.Expect(pod.Spec.NodeName).To(Equal(nodes.Items[len(nodes.Items)-1-i].Name))
				g.Expect(pod.Spec.Tolerations).To(ContainElement(HaveField("Key", jobsetv1alpha2.NoScheduleTaintKey)))
			}
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("creates the volume claims and shares them between the Jobs' pods", func(ctx context.Context) {
		js := plainJobSet(ns, "ckpt", 2, `if [ "$JOB_COMPLETION_INDEX" = 0 ]; then echo step-40 > /ckpt/latest; fi; sleep 3600`)
		js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "ckpt", MountPath: "/ckpt"}}
		js.Spec.VolumeClaimPolicies = []jobsetv1alpha2.VolumeClaimPolicy{{Templates: []corev1.PersistentVolumeClaim{{
			ObjectMeta: metav1.ObjectMeta{Name: "ckpt"},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		}}}}
		Expect(cluster.Client.Create(ctx, js)).To(Succeed())
		var pvc corev1.PersistentVolumeClaim
		Eventually(func() error {
			return cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ckpt-ckpt"}, &pvc)
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(metav1.GetControllerOf(&pvc)).To(HaveField("Name", "ckpt"), "the default retention policy Delete makes the JobSet its owner")
		Expect(pvc.Labels).To(HaveKeyWithValue(jobsetv1alpha2.JobSetNameKey, "ckpt"))
		Eventually(func(g Gomega) {
			reader := runningPodOf(ctx, g, ns, "ckpt-workers-1")
			code, out, err := cluster.Kubelet.Exec(ctx, ns, reader.Name, "worker", []string{"cat", "/ckpt/latest"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(code).To(BeZero())
			g.Expect(out).To(Equal("step-40\n"))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})
})
