package fakekubelet

import (
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/shards"
	"github.com/restartbed/restartbed/test/specs"
)

// Kubelets that share a group's nodes (Options.Shard, package shards), as `restartbed kubelet`
// processes on many machines would.
var _ = Describe("Shards", Label("nodes"), func() {
	It("divide the managed nodes among themselves, and with takeover the live ones adopt a stopped one's", func(ctx context.Context) {
		const group, count = "shards", 6
		selector := labels.SelectorFromSet(labels.Set{"restartbed.dev/test": group})
		var names []string
		for i := range count {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", group, i), Labels: map[string]string{"restartbed.dev/test": group}},
				Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: "restartbed.dev/test", Value: group, Effect: corev1.TaintEffectNoSchedule}}},
				Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("10")}}}
			Expect(k8s.Create(ctx, node)).To(Succeed())
			names = append(names, node.Name)
			DeferCleanup(func(ctx context.Context) {
				Expect(client.IgnoreNotFound(k8s.Delete(ctx, node))).To(Succeed())
			})
		}
		shard := func(identity string) *fakekubelet.Kubelet {
			k, err := fakekubelet.New(onCluster(fakekubelet.Options{
				Manage: fakekubelet.ManagedNodes{Labels: selector},
				Shard:  &fakekubelet.ShardOptions{Group: group, Identity: identity, LeaseDuration: 4 * time.Second, Takeover: true},
			}))
			Expect(err).NotTo(HaveOccurred())
			Expect(k.Start(ctx)).To(Succeed())
			DeferCleanup(func(ctx context.Context) {
				k.Stop()
				lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: shards.DefaultNamespace, Name: shards.LeaseName(group, identity)}}
				Expect(client.IgnoreNotFound(k8s.Delete(ctx, lease))).To(Succeed())
			})
			return k
		}
		// ready reports which of the nodes the API has Ready.
		ready := func(g Gomega) []string {
			var out []string
			for _, name := range names {
				var node corev1.Node
				g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, &node)).To(Succeed())
				if specs.NodeReady(&node) == corev1.ConditionTrue {
					out = append(out, name)
				}
			}
			return out
		}

		a, b := shard("a"), shard("b")
		Eventually(func(g Gomega) {
			ours, theirs := a.NodeNames(), b.NodeNames()
			g.Expect(ours).NotTo(BeEmpty(), "shard a runs none of the nodes")
			g.Expect(theirs).NotTo(BeEmpty(), "shard b runs none of the nodes")
			g.Expect(append(slices.Clone(ours), theirs...)).To(ConsistOf(names), "a runs %v, b runs %v", ours, theirs)
			g.Expect(ready(g)).To(ConsistOf(names))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())

		By("shard a stops, as a killed process: once its Lease expires, b runs every node")
		lost := a.NodeNames()
		a.Stop()
		Eventually(func(g Gomega) {
			g.Expect(b.NodeNames()).To(ConsistOf(names))
			g.Expect(ready(g)).To(ConsistOf(names))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed(), "a ran %v", lost)

		By("shard a comes back under its name: it gets its nodes back")
		a = shard("a")
		Eventually(func(g Gomega) {
			g.Expect(a.NodeNames()).To(ConsistOf(lost))
			g.Expect(append(a.NodeNames(), b.NodeNames()...)).To(ConsistOf(names))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})
})
