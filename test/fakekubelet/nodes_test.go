package fakekubelet

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/fakekubelet"
)

var _ = Describe("nodes", Label("nodes"), func() {
	It("registers every node of every pool, as a kubelet does", func(ctx context.Context) {
		var nodes corev1.NodeList
		Expect(k8s.List(ctx, &nodes)).To(Succeed())
		var names []string
		for _, n := range nodes.Items {
			names = append(names, n.Name)
		}
		Expect(names).To(ConsistOf("tpu-0", "tpu-1", "cpu-0"))

		var tpu, cpu corev1.Node
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "tpu-1"}, &tpu)).To(Succeed())
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "cpu-0"}, &cpu)).To(Succeed())

		Expect(tpu.Labels).To(HaveKeyWithValue("cloud.google.com/gke-nodepool", "tpu"))
		Expect(tpu.Labels).To(HaveKeyWithValue(corev1.LabelHostname, "tpu-1"))
		Expect(tpu.Labels).To(HaveKeyWithValue(fakekubelet.PoolLabel, "tpu"))
		Expect(tpu.Status.Capacity.Name(fakekubelet.TPUResource, resource.DecimalSI).Value()).To(Equal(int64(4)))
		Expect(tpu.Status.Allocatable.Cpu().String()).To(Equal("8"))
		Expect(cpu.Status.Allocatable.Cpu().String()).To(Equal("2"), "a pool's capacity overrides the default")
		// The apiserver taints every new node not-ready; the upstream node lifecycle controller
		// lifts the taint once the node reports Ready, leaving the pool's own.
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "cpu-0"}, &cpu)).To(Succeed())
			g.Expect(cpu.Spec.Taints).To(ConsistOf(corev1.Taint{Key: "dedicated", Value: "cpu", Effect: corev1.TaintEffectNoSchedule}))
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())

		Expect(tpu.Status.Conditions).To(ContainElement(MatchFields(IgnoreExtras, Fields{
			"Type": Equal(corev1.NodeReady), "Status": Equal(corev1.ConditionTrue),
			"Reason": Equal("KubeletReady"), "Message": Equal("kubelet is posting ready status"),
		})))
		Expect(tpu.Status.Addresses).To(ContainElements(
			corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "172.16.0.2"},
			corev1.NodeAddress{Type: corev1.NodeHostName, Address: "tpu-1"},
		))
		Expect(tpu.Spec.PodCIDR).To(Equal("10.64.1.0/24"))
		Expect(tpu.Status.NodeInfo.KubeletVersion).To(Equal(cluster.Release.Kubernetes))
		// A 1.37 kubelet declares, with its default gates, in-place pod-level resize as well.
		Expect(tpu.Status.DeclaredFeatures).To(ContainElement("RestartAllContainersOnContainerExits"),
			"a kubelet with the RestartAllContainers gate declares it")
	})

	It("renews each node's Lease on the timing profile", func(ctx context.Context) {
		var lease coordinationv1.Lease
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: "cpu-0"}, &lease)).To(Succeed())
		Expect(lease.Spec.HolderIdentity).To(PointTo(Equal("cpu-0")))
		Expect(lease.Spec.LeaseDurationSeconds).To(PointTo(Equal(int32(cluster.Timing.NodeLeaseDuration.Seconds()))))
		Expect(lease.OwnerReferences).To(ConsistOf(MatchFields(IgnoreExtras, Fields{"Kind": Equal("Node"), "Name": Equal("cpu-0")})))
		first := lease.Spec.RenewTime.Time

		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: "cpu-0"}, &lease)).To(Succeed())
			g.Expect(lease.Spec.RenewTime.Time).To(BeTemporally(">", first))
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("renews a Lease another writer moved, and creates a deleted one again, as the kubelet's lease controller", func(ctx context.Context) {
		key := client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: "tpu-0"}
		var lease coordinationv1.Lease
		Expect(k8s.Get(ctx, key, &lease)).To(Succeed())
		// The kubelet's next update carries the resourceVersion it last wrote, and conflicts.
		lease.Annotations = map[string]string{"restartbed.test/moved": "by the test"}
		Expect(k8s.Update(ctx, &lease)).To(Succeed())
		moved := lease.Spec.RenewTime.Time
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, key, &lease)).To(Succeed())
			g.Expect(lease.Spec.RenewTime.Time).To(BeTemporally(">", moved))
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(lease.Annotations).To(HaveKeyWithValue("restartbed.test/moved", "by the test"), "the renewal keeps what the other writer set")

		var node corev1.Node
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "tpu-0"}, &node)).To(Succeed())
		Expect(k8s.Delete(ctx, &lease)).To(Succeed())
		Eventually(func(g Gomega) {
			var again coordinationv1.Lease
			g.Expect(k8s.Get(ctx, key, &again)).To(Succeed())
			g.Expect(again.UID).NotTo(Equal(lease.UID))
			g.Expect(again.Spec.HolderIdentity).To(PointTo(Equal("tpu-0")))
			g.Expect(again.OwnerReferences).To(ConsistOf(MatchFields(IgnoreExtras, Fields{"Kind": Equal("Node"), "Name": Equal("tpu-0"), "UID": Equal(node.UID)})))
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})
})
