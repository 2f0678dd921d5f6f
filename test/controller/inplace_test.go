package controller

import (
	"context"
	"math"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/agent"
	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
)

// sidecarModeJobSet is JobSet's sidecar-mode example: replicas workers, each pod an agent sidecar
// whose startup probe is the barrier and a worker; any nonzero exit restarts all containers.
func sidecarModeJobSet(ns, name string, replicas, maxRestarts int32) *jobsetv1alpha2.JobSet {
	podSpec := builders.SidecarModePodSpec()
	return &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: jobsetv1alpha2.JobSetSpec{
			FailurePolicy: &jobsetv1alpha2.FailurePolicy{MaxRestarts: maxRestarts, RestartStrategy: jobsetv1alpha2.InPlaceRestart},
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "workers", Replicas: replicas, Template: batchv1.JobTemplateSpec{
				Spec: batchv1.JobSpec{
					Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](math.MaxInt32),
					PodReplacementPolicy: ptr.To(batchv1.Failed), CompletionMode: ptr.To(batchv1.IndexedCompletion),
					Template: corev1.PodTemplateSpec{Spec: podSpec},
				}}}},
		},
	}
}

// workerPods returns the JobSet's non-terminal pods by name.
func workerPods(ctx context.Context, g Gomega, js *jobsetv1alpha2.JobSet) []corev1.Pod {
	var pods corev1.PodList
	g.Expect(cluster.Client.List(ctx, &pods, client.InNamespace(js.Namespace),
		client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: js.Name})).To(Succeed())
	live := slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil })
	slices.SortFunc(live, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return live
}

// allRunning asserts every worker pod is Ready with the given restart count of its worker.
func allRunning(ctx context.Context, js *jobsetv1alpha2.JobSet, n int, restarts int32) func(Gomega) {
	return func(g Gomega) {
		pods := workerPods(ctx, g, js)
		g.Expect(pods).To(HaveLen(n))
		for i := range pods {
			g.Expect(specs.Condition(&pods[i], corev1.PodReady)).To(HaveField("Status", corev1.ConditionTrue), pods[i].Name)
			g.Expect(specs.ContainerStatus(&pods[i], "worker").RestartCount).To(Equal(restarts), pods[i].Name)
		}
	}
}

var _ = Describe("InPlaceRestart", func() {
	It("holds every worker behind the barrier, then restarts the whole group in place when one fails (KEP-467)", func(ctx context.Context) {
		ns := specs.NewNamespace(ctx, cluster)
		specs.ApplyAgentRBAC(ctx, cluster.Client, ns)
		js := sidecarModeJobSet(ns, "train", 3, 3)
		Expect(cluster.Client.Create(ctx, js)).To(Succeed())

		By("the pods start, report attempt 0, and the controller syncs them")
		Eventually(allRunning(ctx, js, 3, 0)).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), js)).To(Succeed())
		Expect(js.Status.CurrentInPlaceRestartAttempt).To(Equal(ptr.To[int32](0)))
		Expect(js.Status.PreviousInPlaceRestartAttempt).To(BeNil())
		var before []corev1.Pod
		Eventually(func(g Gomega) { before = workerPods(ctx, g, js); g.Expect(before).To(HaveLen(3)) }).Should(Succeed())
		// No worker started before every agent had written its attempt (which the controller needs
		// to set current): each worker's start is at or after the last agent write, by the
		// apiserver's managedFields time (both have a resolution of one second).
		var lastWrite time.Time
		for i := range before {
			for _, mf := range before[i].ManagedFields {
				if mf.Manager == agent.FieldOwner && mf.Time != nil && mf.Time.After(lastWrite) {
					lastWrite = mf.Time.Time
				}
			}
		}
		Expect(lastWrite.IsZero()).To(BeFalse(), "the agents' writes are in managedFields")
		for i := range before {
			started := specs.ContainerStatus(&before[i], "worker").State.Running.StartedAt.Time
			Expect(started.Before(lastWrite)).To(BeFalse(), "%s: worker started %v, last agent write %v", before[i].Name, started, lastWrite)
		}

		By("one worker fails; every pod restarts in place and the group syncs at attempt 1")
		Expect(cluster.Kubelet.ExitContainer(ns, before[1].Name, "worker", 3)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), js)).To(Succeed())
			g.Expect(js.Status.CurrentInPlaceRestartAttempt).To(Equal(ptr.To[int32](1)))
			g.Expect(js.Status.PreviousInPlaceRestartAttempt).To(Equal(ptr.To[int32](0)))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Eventually(allRunning(ctx, js, 3, 1)).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		var after []corev1.Pod
		Eventually(func(g Gomega) { after = workerPods(ctx, g, js) }).Should(Succeed())
		for i := range after {
			Expect(after[i].UID).To(Equal(before[i].UID), "restarted in place, not replaced")
			Expect(after[i].Status.PodIP).To(Equal(before[i].Status.PodIP))
			Expect(after[i].Spec.NodeName).To(Equal(before[i].Spec.NodeName))
		}
		Expect(js.Status.Restarts).To(BeZero(), "an in-place restart is not a JobSet restart")
	})

	It("converges with a replacement pod when a pod is deleted outright", func(ctx context.Context) {
		ns := specs.NewNamespace(ctx, cluster)
		specs.ApplyAgentRBAC(ctx, cluster.Client, ns)
		js := sidecarModeJobSet(ns, "lost", 2, 3)
		Expect(cluster.Client.Create(ctx, js)).To(Succeed())
		Eventually(allRunning(ctx, js, 2, 0)).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		var before []corev1.Pod
		Eventually(func(g Gomega) { before = workerPods(ctx, g, js) }).Should(Succeed())

		By("a pod vanishes with its node: the Job controller replaces it, its agent reports attempt 1")
		Expect(cluster.Client.Delete(ctx, &before[0], client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), js)).To(Succeed())
			g.Expect(js.Status.CurrentInPlaceRestartAttempt).To(Equal(ptr.To[int32](1)))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Eventually(func(g Gomega) {
			pods := workerPods(ctx, g, js)
			g.Expect(pods).To(HaveLen(2))
			for i := range pods {
				g.Expect(specs.Condition(&pods[i], corev1.PodReady)).To(HaveField("Status", corev1.ConditionTrue))
				g.Expect(pods[i].Annotations).To(HaveKeyWithValue(jobsetv1alpha2.InPlaceRestartAttemptKey, "1"))
			}
			g.Expect(pods).To(ContainElement(HaveField("UID", before[1].UID)), "the surviving pod restarted in place")
			g.Expect(pods).NotTo(ContainElement(HaveField("UID", before[0].UID)))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("restarts in main-container mode: the agent runs the worker and a Restart rule restarts it", func(ctx context.Context) {
		ns := specs.NewNamespace(ctx, cluster)
		specs.ApplyAgentRBAC(ctx, cluster.Client, ns)
		js := sidecarModeJobSet(ns, "main-mode", 2, 3)
		pod := &js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
		agentContainer := pod.InitContainers[0]
		pod.InitContainers = nil
		agentContainer.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
		agentContainer.RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart,
			ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpNotIn, Values: []int32{0}}}}
		agentContainer.StartupProbe = nil
		agentContainer.Env = append(agentContainer.Env, corev1.EnvVar{Name: agent.EnvWorkerCommand, Value: "sleep 3600"})
		pod.Containers = []corev1.Container{agentContainer}
		Expect(cluster.Client.Create(ctx, js)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), js)).To(Succeed())
			g.Expect(js.Status.CurrentInPlaceRestartAttempt).To(Equal(ptr.To[int32](0)))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		var before []corev1.Pod
		Eventually(func(g Gomega) { before = workerPods(ctx, g, js); g.Expect(before).To(HaveLen(2)) }).Should(Succeed())

		Expect(cluster.Kubelet.ExitContainer(ns, before[0].Name, agent.ContainerName, 3)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), js)).To(Succeed())
			g.Expect(js.Status.CurrentInPlaceRestartAttempt).To(Equal(ptr.To[int32](1)))
			pods := workerPods(ctx, g, js)
			g.Expect(pods).To(HaveLen(2))
			for i := range pods {
				cs := specs.ContainerStatus(&pods[i], agent.ContainerName)
				g.Expect(cs.RestartCount).To(BeEquivalentTo(1), pods[i].Name)
				g.Expect(cs.State.Running).NotTo(BeNil(), pods[i].Name)
				g.Expect(pods[i].UID).To(Equal(before[i].UID))
			}
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("seed Story 2 in released names: exit Z replaces the pod and the group re-syncs; exit Y fails the JobSet", func(ctx context.Context) {
		const recoverable, fatal = 3, 4 // the story's Z and Y
		ns := specs.NewNamespace(ctx, cluster)
		specs.ApplyAgentRBAC(ctx, cluster.Client, ns)
		js := sidecarModeJobSet(ns, "story2", 2, 5)
		js.Spec.FailurePolicy.Rules = []jobsetv1alpha2.FailurePolicyRule{{Name: "unrecoverable", Action: jobsetv1alpha2.FailJobSet,
			OnJobFailureReasons: []string{batchv1.JobReasonPodFailurePolicy}}}
		spec := &js.Spec.ReplicatedJobs[0].Template.Spec
		spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{ContainerName: ptr.To("worker"),
				Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{fatal}}}}}
		// The worker restarts its pod in place on any failure but Y and Z; those fail the pod.
		spec.Template.Spec.Containers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestartAllContainers,
			ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpNotIn, Values: []int32{0, fatal, recoverable}}}}
		Expect(cluster.Client.Create(ctx, js)).To(Succeed())
		Eventually(allRunning(ctx, js, 2, 0)).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		var before []corev1.Pod
		Eventually(func(g Gomega) { before = workerPods(ctx, g, js) }).Should(Succeed())

		By("exit Z: the pod fails, the Job replaces it, its agent reports attempt 1 and the other pod restarts in place")
		Expect(cluster.Kubelet.ExitContainer(ns, before[0].Name, "worker", recoverable)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), js)).To(Succeed())
			g.Expect(js.Status.CurrentInPlaceRestartAttempt).To(Equal(ptr.To[int32](1)))
			pods := workerPods(ctx, g, js)
			g.Expect(pods).To(HaveLen(2))
			g.Expect(pods).NotTo(ContainElement(HaveField("UID", before[0].UID)), "replaced")
			g.Expect(pods).To(ContainElement(HaveField("UID", before[1].UID)), "restarted in place")
			for i := range pods {
				g.Expect(specs.Condition(&pods[i], corev1.PodReady)).To(HaveField("Status", corev1.ConditionTrue))
			}
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(js.Status.Restarts).To(BeZero())

		By("exit Y: the pod failure policy fails the Job, and the FailJobSet rule the JobSet")
		var pods []corev1.Pod
		Eventually(func(g Gomega) { pods = workerPods(ctx, g, js) }).Should(Succeed())
		Expect(cluster.Kubelet.ExitContainer(ns, pods[1].Name, "worker", fatal)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), js)).To(Succeed())
			failed := meta.FindStatusCondition(js.Status.Conditions, string(jobsetv1alpha2.JobSetFailed))
			g.Expect(failed).NotTo(BeNil())
			g.Expect(failed.Reason).To(Equal("FailJobSetFailurePolicyAction"))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("fails the JobSet with ReachedMaxRestarts once the attempts exceed maxRestarts", func(ctx context.Context) {
		ns := specs.NewNamespace(ctx, cluster)
		specs.ApplyAgentRBAC(ctx, cluster.Client, ns)
		js := sidecarModeJobSet(ns, "short", 2, 1)
		Expect(cluster.Client.Create(ctx, js)).To(Succeed())
		for restart := range int32(2) {
			Eventually(allRunning(ctx, js, 2, restart)).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
			var pods []corev1.Pod
			Eventually(func(g Gomega) { pods = workerPods(ctx, g, js) }).Should(Succeed())
			Expect(cluster.Kubelet.ExitContainer(ns, pods[0].Name, "worker", 1)).To(Succeed())
		}
		Eventually(func(g Gomega) {
			g.Expect(cluster.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "short"}, js)).To(Succeed())
			failed := meta.FindStatusCondition(js.Status.Conditions, string(jobsetv1alpha2.JobSetFailed))
			g.Expect(failed).NotTo(BeNil())
			g.Expect(failed.Reason).To(Equal("ReachedMaxRestarts"))
			g.Expect(failed.Message).To(Equal("jobset failed due to reaching max number of restarts"))
			g.Expect(js.Status.TerminalState).To(Equal("Failed"))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})
})
