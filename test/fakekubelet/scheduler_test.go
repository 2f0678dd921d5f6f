package fakekubelet

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/test/builders"
)

func tpuPod(name, ns string) *corev1.Pod {
	c := builders.MakeContainer("worker").Obj()
	c.Resources.Requests = corev1.ResourceList{fakekubelet.TPUResource: resource.MustParse("4")}
	c.Resources.Limits = c.Resources.Requests
	return builders.MakePod(name, ns).Container(c).Obj()
}

// nodeOf waits until the pod is bound and returns its node.
func nodeOf(ctx context.Context, pod *corev1.Pod) string {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Spec.NodeName).NotTo(BeEmpty())
	}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	return pod.Spec.NodeName
}

// expectUnschedulable waits for the scheduler's verdict on the pod; the message is its first
// sentence (what preemption would achieve follows it).
func expectUnschedulable(ctx context.Context, pod *corev1.Pod, reason, message string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Spec.NodeName).To(BeEmpty())
		g.Expect(pod.Status.Conditions).To(ContainElement(MatchFields(IgnoreExtras, Fields{
			"Type": Equal(corev1.PodScheduled), "Status": Equal(corev1.ConditionFalse),
			"Reason": Equal(reason), "Message": HavePrefix(message),
		})))
	}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
}

// kube-scheduler places pods on the emulated nodes by what they declare: capacity (extended
// resources included), labels and taints.
var _ = Describe("kube-scheduler on the emulated nodes", Label("scheduler"), func() {
	It("places one four-TPU pod per TPU node, and the third when a node frees up", func(ctx context.Context) {
		ns := newNamespace(ctx)
		pods := []*corev1.Pod{tpuPod("w0", ns), tpuPod("w1", ns), tpuPod("w2", ns)}
		for _, p := range pods[:2] {
			Expect(k8s.Create(ctx, p)).To(Succeed())
		}
		Expect([]string{nodeOf(ctx, pods[0]), nodeOf(ctx, pods[1])}).To(ConsistOf("tpu-0", "tpu-1"))

		Expect(k8s.Create(ctx, pods[2])).To(Succeed())
		expectUnschedulable(ctx, pods[2], corev1.PodReasonUnschedulable,
			"0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient google.com/tpu.")

		freed := pods[0].Spec.NodeName
		Expect(k8s.Delete(ctx, pods[0], client.GracePeriodSeconds(0))).To(Succeed())
		Expect(nodeOf(ctx, pods[2])).To(Equal(freed))
	})

	It("follows node selectors and tolerations", func(ctx context.Context) {
		ns := newNamespace(ctx)
		pod := builders.MakePod("cpu-job", ns).Container(builders.MakeContainer("main").Obj()).Obj()
		pod.Spec.NodeSelector = map[string]string{"cloud.google.com/gke-nodepool": "cpu"}
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		expectUnschedulable(ctx, pod, corev1.PodReasonUnschedulable,
			"0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 node(s) didn't match Pod's node affinity/selector.")

		tolerant := builders.MakePod("cpu-job-2", ns).Container(builders.MakeContainer("main").Obj()).Obj()
		tolerant.Spec.NodeSelector = pod.Spec.NodeSelector
		tolerant.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cpu", Effect: corev1.TaintEffectNoSchedule}}
		Expect(k8s.Create(ctx, tolerant)).To(Succeed())
		Expect(nodeOf(ctx, tolerant)).To(Equal("cpu-0"))
	})

	It("places pods only on the nodes that fit", func(ctx context.Context) {
		ns := newNamespace(ctx)
		for i := range 4 {
			pod := builders.MakePod(fmt.Sprintf("p%d", i), ns).Container(builders.MakeContainer("main").Obj()).Obj()
			Expect(k8s.Create(ctx, pod)).To(Succeed())
			Expect(nodeOf(ctx, pod)).To(BeElementOf("tpu-0", "tpu-1"), "cpu-0 is tainted")
		}
	})

	It("leaves gated pods alone and says why", func(ctx context.Context) {
		ns := newNamespace(ctx)
		pod := builders.MakePod("gated", ns).Container(builders.MakeContainer("main").Obj()).Obj()
		pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		expectUnschedulable(ctx, pod, "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates")

		pod.Spec.SchedulingGates = nil
		Expect(k8s.Update(ctx, pod)).To(Succeed())
		Expect(nodeOf(ctx, pod)).NotTo(BeEmpty())
	})

	It("leaves pods for another scheduler alone", func(ctx context.Context) {
		ns := newNamespace(ctx)
		other := builders.MakePod("other", ns).Container(builders.MakeContainer("main").Obj()).Obj()
		other.Spec.SchedulerName = "volcano"
		Expect(k8s.Create(ctx, other)).To(Succeed())
		ours := builders.MakePod("ours", ns).Container(builders.MakeContainer("main").Obj()).Obj()
		Expect(k8s.Create(ctx, ours)).To(Succeed())
		nodeOf(ctx, ours) // the scheduler has had its chance at both
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(other), other)).To(Succeed())
		Expect(other.Spec.NodeName).To(BeEmpty())
		Expect(other.Status.Conditions).To(BeEmpty())
	})
})
