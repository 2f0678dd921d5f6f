package fakekubelet

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
	"github.com/restartbed/restartbed/timing"
)

// A node's kubelet stopped for a while and started again, on a cluster of its own: stopping the
// suite's nodes' kubelets would stop other specs' pods.
var _ = Describe("A stopped kubelet", Ordered, func() {
	var own *envtest.Cluster
	const node = "lone-0"
	BeforeAll(func(ctx context.Context) {
		profile := timing.Fast()
		own = specs.StartCluster(ctx, envtest.Options{Timing: &profile, Nodes: []fakekubelet.NodePool{{Name: "lone", Count: 1}}})
	}, NodeTimeout(specs.StartTimeout))

	It("leaves its containers running and reports nothing until it starts, then catches up", func(ctx context.Context) {
		ns := specs.NewNamespace(ctx, own)
		ready := func(g Gomega) corev1.ConditionStatus {
			n, err := own.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					return c.Status
				}
			}
			return ""
		}
		tolerateAll := []corev1.Toleration{{Operator: corev1.TolerationOpExists}} // never evicted from the Unknown node
		victim := builders.MakePod("victim", ns).RestartPolicy(corev1.RestartPolicyAlways).
			Container(builders.MakeContainer("main").Shell("echo started; sleep 3600").Obj()).Obj()
		victim.Spec.Tolerations = tolerateAll
		Expect(own.Client.Create(ctx, victim)).To(Succeed())
		h := specs.RecordPod(ctx, own.Clientset, ns, "victim")
		Eventually(func(g Gomega) {
			g.Expect(h.Latest()).NotTo(BeNil())
			g.Expect(state(specs.ContainerStatus(h.Latest(), "main"))).To(Equal("Running"))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())

		By("stopping the kubelet")
		Expect(own.Kubelet.StopKubelet(node)).To(Succeed())
		Expect(own.Kubelet.StopKubelet(node)).To(MatchError(ContainSubstring("already stopped")))
		Expect(own.Kubelet.RestartKubelet(node)).To(MatchError(ContainSubstring("is stopped")))
		Expect(own.Kubelet.ExitContainer(ns, "victim", "main", 3)).To(Succeed(), "the container still runs, and can exit")
		late := builders.MakePod("late", ns).Container(builders.MakeContainer("main").Shell("sleep 3600").Obj()).Obj()
		late.Spec.NodeName, late.Spec.Tolerations = node, tolerateAll
		Expect(own.Client.Create(ctx, late)).To(Succeed())

		By("the node goes Unknown; nothing of its pods changes in the API; its kubelet API refuses")
		Eventually(ready).WithTimeout(Timeout).WithPolling(Interval).Should(Equal(corev1.ConditionUnknown))
		p := h.Latest()
		Expect(state(specs.ContainerStatus(p, "main"))).To(Equal("Running"), "the exit is not reported")
		Expect(specs.ContainerStatus(p, "main").RestartCount).To(BeZero(), "nor restarted")
		l, err := own.Clientset.CoreV1().Pods(ns).Get(ctx, "late", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Status.ContainerStatuses).To(BeEmpty(), "a pod bound meanwhile is not seen")
		_, err = own.Clientset.CoreV1().Pods(ns).GetLogs("victim", &corev1.PodLogOptions{Container: "main"}).DoRaw(ctx)
		Expect(err).To(HaveOccurred(), "kubectl logs reaches no kubelet")

		By("starting it again")
		Expect(own.Kubelet.StartKubelet(ctx, node)).To(Succeed())
		Expect(own.Kubelet.StartKubelet(ctx, node)).To(MatchError(ContainSubstring("not stopped")))
		Eventually(func(g Gomega) {
			g.Expect(ready(g)).To(Equal(corev1.ConditionTrue))
			cs := specs.ContainerStatus(h.Latest(), "main")
			g.Expect(cs.RestartCount).To(BeEquivalentTo(1), "the exit seen at the start restarts the container")
			g.Expect(cs.LastTerminationState.Terminated).To(HaveField("ExitCode", BeEquivalentTo(3)))
			g.Expect(state(cs)).To(Equal("Running"))
			l, err := own.Clientset.CoreV1().Pods(ns).Get(ctx, "late", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(l.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Eventually(func() (string, error) {
			out, err := own.Clientset.CoreV1().Pods(ns).GetLogs("victim", &corev1.PodLogOptions{Container: "main"}).DoRaw(ctx)
			return string(out), err
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Equal("started\n"))
	}, SpecTimeout(2*time.Minute))
})
