package fakekubelet

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
)

// A partitioned node (FailNode) against the real node lifecycle controller: the suite runs the
// fast profile (node grace 5 s, default tolerations 3 s), so each spec recovers the node before
// its pods' tolerations run out unless it wants them evicted.
var _ = Describe("Node partition", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	partition := func(node string) {
		GinkgoHelper()
		Expect(cluster.Kubelet.FailNode(node)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { _ = cluster.Kubelet.RecoverNode(ctx, node) })
	}
	nodeReady := func(ctx context.Context, name string) func() (corev1.ConditionStatus, error) {
		return func() (corev1.ConditionStatus, error) {
			n, err := cluster.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return specs.NodeReady(n), nil
		}
	}
	unreachableTaints := func(ctx context.Context, name string) func() ([]string, error) {
		return func() ([]string, error) {
			n, err := cluster.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			var effects []string
			for _, t := range n.Spec.Taints {
				if t.Key == corev1.TaintNodeUnreachable {
					effects = append(effects, string(t.Effect))
				}
			}
			return effects, nil
		}
	}

	It("goes on from its last view while cut off, and publishes what happened when it recovers", func(ctx context.Context) {
		pod := builders.MakePod("cut-off", ns).RestartPolicy(corev1.RestartPolicyAlways).EmptyDir("data").
			Container(builders.MakeContainer("main").Mount("data", "/data").Shell("echo run >> /data/runs; sleep 3600").Obj()).
			Container(builders.MakeContainer("pinger").Obj()).Obj()
		h := create(ctx, pod)
		node := h.Latest().Spec.NodeName
		Eventually(func() (string, error) { return cluster.Kubelet.Logs(ns, "cut-off", "pinger") }).
			WithTimeout(Timeout).WithPolling(Interval).Should(ContainSubstring("ok"))
		partition(node)

		By("the container's crash is handled on the node: restarted at once, nothing written")
		Expect(cluster.Kubelet.ExitContainer(ns, "cut-off", "main", 1)).To(Succeed())
		Eventually(func() (string, error) {
			_, out, err := cluster.Kubelet.Exec(ctx, ns, "cut-off", "main", []string{"cat", "/data/runs"})
			return out, err
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Equal("run\nrun\n"), "the kubelet restarts the container locally")
		Consistently(func() int32 { return specs.ContainerStatus(h.Latest(), "main").RestartCount }).
			WithTimeout(time.Second).WithPolling(Interval).Should(BeZero(), "no status reaches the API")
		Eventually(func() (string, error) { return cluster.Kubelet.Logs(ns, "cut-off", "pinger") }).
			WithTimeout(Timeout).WithPolling(Interval).Should(ContainSubstring("network is unreachable"),
			"the pod's programs are cut off too")

		By("the node lifecycle controller marks the node Unknown, taints it and marks the pod not ready")
		Eventually(nodeReady(ctx, node)).WithTimeout(Timeout).WithPolling(Interval).Should(Equal(corev1.ConditionUnknown))
		Eventually(unreachableTaints(ctx, node)).WithTimeout(Timeout).WithPolling(Interval).
			Should(ConsistOf("NoSchedule", "NoExecute"))
		Eventually(func() corev1.ConditionStatus { return specs.Condition(h.Latest(), corev1.PodReady).Status }).
			WithTimeout(Timeout).WithPolling(Interval).Should(Equal(corev1.ConditionFalse))

		By("recovery: the node is Ready again, untainted, and the pod shows the restart and is ready")
		Expect(cluster.Kubelet.RecoverNode(ctx, node)).To(Succeed())
		Eventually(nodeReady(ctx, node)).WithTimeout(Timeout).WithPolling(Interval).Should(Equal(corev1.ConditionTrue))
		Eventually(unreachableTaints(ctx, node)).WithTimeout(Timeout).WithPolling(Interval).Should(BeEmpty())
		Eventually(func(g Gomega) {
			p := h.Latest()
			g.Expect(p.DeletionTimestamp).To(BeNil(), "recovered before the toleration ran out")
			g.Expect(specs.ContainerStatus(p, "main").RestartCount).To(BeEquivalentTo(1))
			g.Expect(specs.Condition(p, corev1.PodReady).Status).To(Equal(corev1.ConditionTrue))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Eventually(func() (string, error) { return cluster.Kubelet.Logs(ns, "cut-off", "pinger") }).
			WithTimeout(Timeout).WithPolling(Interval).Should(MatchRegexp(`network is unreachable[^\n]*\n(.*\n)*ok\n$`))
	})

	It("leaves a pod deleted during the partition Terminating until the node recovers", func(ctx context.Context) {
		pod := builders.MakePod("deleted-meanwhile", ns).Container(builders.MakeContainer("main").Shell("sleep 3600").Obj()).Obj()
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		h := create(ctx, pod)
		node := h.Latest().Spec.NodeName
		partition(node)
		Expect(k8s.Delete(ctx, pod)).To(Succeed())
		Consistently(func() error {
			_, err := cluster.Clientset.CoreV1().Pods(ns).Get(ctx, "deleted-meanwhile", metav1.GetOptions{})
			return err
		}).WithTimeout(3*time.Second).WithPolling(Interval).Should(Succeed(), "no kubelet finishes the deletion past its grace")
		Expect(h.Latest().DeletionTimestamp).NotTo(BeNil())

		Expect(cluster.Kubelet.RecoverNode(ctx, node)).To(Succeed())
		Eventually(func() bool {
			_, err := cluster.Clientset.CoreV1().Pods(ns).Get(ctx, "deleted-meanwhile", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).WithTimeout(Timeout).WithPolling(Interval).Should(BeTrue())
		Expect(state(specs.ContainerStatus(h.Latest(), "main"))).To(Equal("Terminated(137,Error)"),
			"the kubelet stopped the container (it ignores TERM as PID 1) and published its final status before the delete")
	})

	It("refuses to fail a node twice, to recover a healthy one, and to restart a cut-off kubelet", func(ctx context.Context) {
		node := cluster.Kubelet.NodeNames()[0]
		Expect(cluster.Kubelet.RecoverNode(ctx, node)).To(MatchError(ContainSubstring("is not partitioned")))
		partition(node)
		Expect(cluster.Kubelet.FailNode(node)).To(MatchError(ContainSubstring("already partitioned")))
		Expect(cluster.Kubelet.RestartKubelet(node)).To(MatchError(ContainSubstring("recover the node first")))
		Expect(cluster.Kubelet.FailNode("no-such-node")).To(MatchError(ContainSubstring(`node "no-such-node" is not one of this kubelet's`)))
		Expect(cluster.Kubelet.RecoverNode(ctx, node)).To(Succeed())
	})
})
