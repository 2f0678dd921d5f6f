package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
	"github.com/restartbed/restartbed/test/specs"
)

// plainJobSet runs replicas single-pod Jobs of one busybox container running script; a failed
// pod fails its Job.
func plainJobSet(ns, name string, replicas int32, script string) *jobsetv1alpha2.JobSet {
	return &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "workers", Replicas: replicas,
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](0),
				CompletionMode: ptr.To(batchv1.IndexedCompletion),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "worker", Image: "busybox", Command: []string{"sh", "-c", script}}}}},
			}}}}},
	}
}

func condition(js *jobsetv1alpha2.JobSet, t jobsetv1alpha2.JobSetConditionType) *metav1.Condition {
	return meta.FindStatusCondition(js.Status.Conditions, string(t))
}

// eventuallyFailed waits until the JobSet is Failed with the reason and a message starting with
// prefix (the first failed Job's index varies); js holds the JobSet as last read.
func eventuallyFailed(ctx context.Context, js *jobsetv1alpha2.JobSet, reason, prefix string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), js)).To(Succeed())
		failed := condition(js, jobsetv1alpha2.JobSetFailed)
		g.Expect(failed).NotTo(BeNil())
		g.Expect(failed.Reason).To(Equal(reason))
		g.Expect(failed.Message).To(HavePrefix(prefix))
		g.Expect(js.Status.TerminalState).To(Equal("Failed"))
	}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
}

// runningPod returns the name of a running pod of the JobSet's current attempt.
func runningPod(ctx context.Context, g Gomega, js *jobsetv1alpha2.JobSet, attempt string) string {
	return runningPodWith(ctx, g, js.Namespace, client.MatchingLabels{
		jobsetv1alpha2.JobSetNameKey: js.Name, jobsetv1alpha2.RestartsKey: attempt}, "attempt "+attempt).Name
}

// runningPodOf returns the running pod of one Job.
func runningPodOf(ctx context.Context, g Gomega, namespace, job string) *corev1.Pod {
	return runningPodWith(ctx, g, namespace, client.MatchingLabels{batchv1.JobNameLabel: job}, "Job "+job)
}

// runningPodWith returns a pod with the labels whose worker container runs and that is not being
// deleted; what names the pods in the failure message.
func runningPodWith(ctx context.Context, g Gomega, namespace string, labels client.MatchingLabels, what string) *corev1.Pod {
	var pods corev1.PodList
	g.Expect(cluster.Client.List(ctx, &pods, client.InNamespace(namespace), labels)).To(Succeed())
	for i := range pods.Items {
		p := &pods.Items[i]
		if cs := specs.ContainerStatus(p, "worker"); cs != nil && cs.State.Running != nil && p.DeletionTimestamp == nil {
			return p
		}
	}
	g.Expect("a running pod").To(BeEmpty(), "no running pod of "+what)
	return &corev1.Pod{}
}

var _ = Describe("Recreate and the failure policy", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = specs.NewNamespace(ctx, cluster) })

	It("completes a JobSet whose Jobs all succeed", func(ctx context.Context) {
		js := plainJobSet(ns, "done", 2, "sleep 1")
		Expect(cluster.Client.Create(ctx, js)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), js)).To(Succeed())
			g.Expect(condition(js, jobsetv1alpha2.JobSetCompleted)).To(And(Not(BeNil()), HaveField("Reason", "AllJobsCompleted"),
				HaveField("Message", "jobset completed successfully")))
			g.Expect(js.Status.TerminalState).To(Equal("Completed"))
			g.Expect(js.Status.ReplicatedJobsStatus).To(ConsistOf(HaveField("Succeeded", BeEquivalentTo(2))))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		var svc corev1.Service
		Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "done"}, &svc)).To(Succeed())
		Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
	})

	It("fails at once without a failure policy", func(ctx context.Context) {
		js := plainJobSet(ns, "fragile", 2, "sleep 3600")
		Expect(cluster.Client.Create(ctx, js)).To(Succeed())
		var victim string
		Eventually(func(g Gomega) { victim = runningPod(ctx, g, js, "0") }).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(cluster.Kubelet.ExitContainer(ns, victim, "worker", 1)).To(Succeed())
		eventuallyFailed(ctx, js, "FailedJobs", "jobset failed due to one or more job failures (first failed job: fragile-workers-")
	})

	It("recreates every Job on a failure, counting restarts, until maxRestarts", func(ctx context.Context) {
		js := plainJobSet(ns, "recreate", 2, "sleep 3600")
		js.Spec.FailurePolicy = &jobsetv1alpha2.FailurePolicy{MaxRestarts: 1}
		Expect(cluster.Client.Create(ctx, js)).To(Succeed())

		var victim string
		Eventually(func(g Gomega) { victim = runningPod(ctx, g, js, "0") }).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(cluster.Kubelet.ExitContainer(ns, victim, "worker", 1)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), js)).To(Succeed())
			g.Expect(js.Status.Restarts).To(BeEquivalentTo(1))
			g.Expect(js.Status.RestartsCountTowardsMax).To(BeEquivalentTo(1))
			g.Expect(condition(js, jobsetv1alpha2.JobSetRestarting)).To(Not(BeNil()))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(condition(js, jobsetv1alpha2.JobSetRestarting).Reason).To(BeElementOf("DefaultFailurePolicy", "JobsReady"))

		By("the new generation runs, and its failure exhausts maxRestarts")
		Eventually(func(g Gomega) { victim = runningPod(ctx, g, js, "1") }).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(cluster.Kubelet.ExitContainer(ns, victim, "worker", 1)).To(Succeed())
		eventuallyFailed(ctx, js, "ReachedMaxRestarts", "jobset failed due to reaching max number of restarts (first failed job: recreate-workers-")
		Expect(condition(js, jobsetv1alpha2.JobSetRestarting)).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "JobSetFailed")))
		Eventually(func(g Gomega) {
			var jobs batchv1.JobList
			g.Expect(cluster.Client.List(ctx, &jobs, client.InNamespace(ns))).To(Succeed())
			for _, j := range jobs.Items {
				g.Expect(j.DeletionTimestamp != nil || j.Status.Active == 0).To(BeTrue(), "the finished JobSet's active Jobs are deleted")
			}
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("with BlockingRecreate, creates no Job of the new attempt while one of the old exists", func(ctx context.Context) {
		js := plainJobSet(ns, "blocking", 3, "sleep 3600")
		js.Spec.FailurePolicy = &jobsetv1alpha2.FailurePolicy{MaxRestarts: 2, RestartStrategy: jobsetv1alpha2.BlockingRecreate}
		// sh as PID 1 ignores SIGTERM: a short grace keeps the old Jobs' foreground deletion short.
		js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		// Every state of the namespace's Jobs, from an informer: the attempts present together.
		var mu sync.Mutex
		var overlaps []string
		factory := informers.NewSharedInformerFactoryWithOptions(cluster.Clientset, 0, informers.WithNamespace(ns))
		store := factory.Batch().V1().Jobs().Informer().GetStore()
		check := func(any) {
			attempts := map[string]bool{}
			for _, obj := range store.List() {
				attempts[obj.(*batchv1.Job).Labels[jobsetv1alpha2.RestartsKey]] = true
			}
			if len(attempts) > 1 {
				mu.Lock()
				overlaps = append(overlaps, fmt.Sprint(attempts))
				mu.Unlock()
			}
		}
		_, err := factory.Batch().V1().Jobs().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: check, UpdateFunc: func(_, obj any) { check(obj) }, DeleteFunc: check})
		Expect(err).NotTo(HaveOccurred())
		stop := make(chan struct{})
		DeferCleanup(func() { close(stop) })
		factory.Start(stop)
		factory.WaitForCacheSync(stop)

		Expect(cluster.Client.Create(ctx, js)).To(Succeed())
		var victim string
		Eventually(func(g Gomega) { victim = runningPod(ctx, g, js, "0") }).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(cluster.Kubelet.ExitContainer(ns, victim, "worker", 1)).To(Succeed())
		Eventually(func(g Gomega) {
			var jobs batchv1.JobList
			g.Expect(cluster.Client.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.RestartsKey: "1"})).To(Succeed())
			g.Expect(jobs.Items).To(HaveLen(3))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		mu.Lock()
		defer mu.Unlock()
		Expect(overlaps).To(BeEmpty(), "Jobs of two attempts existed together")
	})

	It("fails the JobSet by a FailJobSet rule when a pod failure policy fails its Job (seed Story 2)", func(ctx context.Context) {
		js := plainJobSet(ns, "story2", 2, "sleep 3600")
		tmpl := &js.Spec.ReplicatedJobs[0].Template.Spec
		tmpl.BackoffLimit = ptr.To[int32](6)
		tmpl.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			Action:      batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{7}},
		}}}
		js.Spec.FailurePolicy = &jobsetv1alpha2.FailurePolicy{MaxRestarts: 3, Rules: []jobsetv1alpha2.FailurePolicyRule{{
			Name: "failOnUnrecoverable", Action: jobsetv1alpha2.FailJobSet, OnJobFailureReasons: []string{batchv1.JobReasonPodFailurePolicy}}}}
		Expect(cluster.Client.Create(ctx, js)).To(Succeed())
		var victim string
		Eventually(func(g Gomega) { victim = runningPod(ctx, g, js, "0") }).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(cluster.Kubelet.ExitContainer(ns, victim, "worker", 7)).To(Succeed())
		eventuallyFailed(ctx, js, "FailJobSetFailurePolicyAction", "applying FailJobSet failure policy action (first failed job: story2-workers-")
		Expect(js.Status.Restarts).To(BeZero())
	})

	It("creates a replicated Job's Jobs only once the ones it depends on are ready", func(ctx context.Context) {
		js := plainJobSet(ns, "ordered", 1, "sleep 3600")
		js.Spec.ReplicatedJobs[0].Name = "driver"
		workers := *js.Spec.ReplicatedJobs[0].DeepCopy()
		workers.Name, workers.Replicas = "workers", 2
		workers.DependsOn = []jobsetv1alpha2.DependsOn{{Name: "driver", Status: jobsetv1alpha2.DependencyReady}}
		// The driver starts only when /tmp/go exists in its container: until then it is not ready.
		js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1,
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/go"}}}}
		js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, workers)
		Expect(cluster.Client.Create(ctx, js)).To(Succeed())
		jobsOf := func(rj string) func() int {
			return func() int {
				var jobs batchv1.JobList
				Expect(cluster.Client.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.ReplicatedJobNameKey: rj})).To(Succeed())
				return len(jobs.Items)
			}
		}
		var driver string
		Eventually(func(g Gomega) { driver = runningPod(ctx, g, js, "0") }).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Consistently(jobsOf("workers")).WithTimeout(2 * time.Second).WithPolling(Interval).Should(BeZero())
		code, _, err := cluster.Kubelet.Exec(ctx, ns, driver, "worker", []string{"touch", "/tmp/go"})
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(BeZero())
		Eventually(jobsOf("workers")).WithTimeout(Timeout).WithPolling(Interval).Should(Equal(2))
	})

	It("suspends and resumes the Jobs with the Suspended condition", func(ctx context.Context) {
		js := plainJobSet(ns, "paused", 1, "sleep 3600")
		js.Spec.Suspend = ptr.To(true)
		Expect(cluster.Client.Create(ctx, js)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), js)).To(Succeed())
			g.Expect(condition(js, jobsetv1alpha2.JobSetSuspended)).To(And(Not(BeNil()), HaveField("Reason", "SuspendedJobs")))
			var job batchv1.Job
			g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "paused-workers-0"}, &job)).To(Succeed())
			g.Expect(job.Spec.Suspend).To(Equal(ptr.To(true)))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(cluster.Client.Patch(ctx, js, client.RawPatch(client.Merge.Type(), []byte(`{"spec":{"suspend":false}}`)))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), js)).To(Succeed())
			g.Expect(condition(js, jobsetv1alpha2.JobSetSuspended)).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "ResumeJobs")))
			g.Expect(runningPod(ctx, g, js, "0")).NotTo(BeEmpty())
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})
})
