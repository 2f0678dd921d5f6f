package agent

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
)

const (
	Timeout  = specs.Timeout
	Interval = specs.Interval
)

// workerPod is a pod of JobSet's sidecar-mode example, labelled for the JobSet.
func workerPod(ns, name, jobset string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{jobsetv1alpha2.JobSetNameKey: jobset}},
		Spec:       builders.SidecarModePodSpec(),
	}
}

func inPlaceJobSet(ns, name string) *jobsetv1alpha2.JobSet {
	return &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: jobsetv1alpha2.JobSetSpec{
			FailurePolicy: &jobsetv1alpha2.FailurePolicy{MaxRestarts: 3, RestartStrategy: jobsetv1alpha2.InPlaceRestart},
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "workers", Replicas: 2, Template: batchv1.JobTemplateSpec{
				Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), Template: corev1.PodTemplateSpec{
					Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "worker", Image: "busybox"}}}}}}}},
		},
	}
}

// attempts returns the pods' in-place-restart attempt annotations, "" where there is none.
func attempts(ctx context.Context, ns string, names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		var p corev1.Pod
		Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &p)).To(Succeed())
		out[i] = p.Annotations[jobsetv1alpha2.InPlaceRestartAttemptKey]
	}
	return out
}

func setStatus(ctx context.Context, js *jobsetv1alpha2.JobSet, current, previous *int32) {
	Eventually(func() error {
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), js); err != nil {
			return err
		}
		js.Status.CurrentInPlaceRestartAttempt, js.Status.PreviousInPlaceRestartAttempt = current, previous
		return cluster.Client.Status().Update(ctx, js)
	}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
}

func ready(ctx context.Context, ns, name string) func(Gomega) {
	return func(g Gomega) {
		var p corev1.Pod
		g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)).To(Succeed())
		g.Expect(specs.Condition(&p, corev1.PodReady)).To(HaveField("Status", corev1.ConditionTrue))
	}
}

var _ = Describe("The agent as a builtin program", func() {
	It("holds the workers until every pod reports the attempt, and restarts the group in place on a failure", func(ctx context.Context) {
		ns := specs.NewNamespace(ctx, cluster)
		specs.ApplyAgentRBAC(ctx, cluster.Client, ns)
		js := inPlaceJobSet(ns, "train")
		Expect(cluster.Client.Create(ctx, js)).To(Succeed())
		pods := []string{"train-workers-0-0", "train-workers-1-0"}
		for _, name := range pods {
			Expect(cluster.Client.Create(ctx, workerPod(ns, name, js.Name))).To(Succeed())
		}

		By("1. every agent reports attempt 0 and the barrier holds the workers")
		Eventually(func() []string { return attempts(ctx, ns, pods...) }).WithTimeout(Timeout).WithPolling(Interval).Should(Equal([]string{"0", "0"}),
			func() string {
				log, _ := cluster.Kubelet.Logs(ns, pods[0], "in-place-restart-agent")
				return "agent log:\n" + log
			})
		Consistently(func(g Gomega) {
			var p corev1.Pod
			g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pods[0]}, &p)).To(Succeed())
			g.Expect(specs.ContainerStatus(&p, "worker").State.Running).To(BeNil(), "the worker waits behind the barrier")
		}).WithTimeout(1500 * time.Millisecond).WithPolling(Interval).Should(Succeed())

		By("the controller syncs: current = 0; the barriers lift")
		setStatus(ctx, js, ptr.To[int32](0), nil)
		for _, name := range pods {
			Eventually(ready(ctx, ns, name)).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		}

		By("2. a worker fails: its pod restarts in place and its new agent reports 1")
		Expect(cluster.Kubelet.ExitContainer(ns, pods[0], "worker", 1)).To(Succeed())
		Eventually(func() []string { return attempts(ctx, ns, pods...) }).WithTimeout(Timeout).WithPolling(Interval).Should(Equal([]string{"1", "0"}))

		By("3-4. the controller desyncs: previous = 0; the other agent exits and its pod restarts in place")
		setStatus(ctx, js, ptr.To[int32](0), ptr.To[int32](0))
		Eventually(func() []string { return attempts(ctx, ns, pods...) }).WithTimeout(Timeout).WithPolling(Interval).Should(Equal([]string{"1", "1"}))

		By("5. all report 1: current = 1 and every barrier lifts")
		setStatus(ctx, js, ptr.To[int32](1), ptr.To[int32](0))
		for _, name := range pods {
			Eventually(func(g Gomega) {
				ready(ctx, ns, name)(g)
				var p corev1.Pod
				g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)).To(Succeed())
				g.Expect(specs.ContainerStatus(&p, "worker").RestartCount).To(BeEquivalentTo(1), fmt.Sprintf("%s restarted once, in place", name))
			}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		}
	})
})
