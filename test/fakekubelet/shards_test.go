package fakekubelet

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/shards"
	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
)

// Kubelets that share a group's nodes (Options.Shard, package shards), as `restartbed kubelet`
// processes on many machines would.
var _ = Describe("Shards", Label("nodes"), func() {
	It("divide the managed nodes among themselves, and with takeover the live ones adopt a stopped one's", func(ctx context.Context) {
		const group, count = "shards", 6
		selector := labels.SelectorFromSet(labels.Set{shardLabel: group})
		var names []string
		for i := range count {
			names = append(names, createShardNode(ctx, group, fmt.Sprintf("%s-%d", group, i), nil))
		}
		shard := func(identity string) *fakekubelet.Kubelet { return startShard(ctx, group, identity, true) }
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

		By("shard a comes back under its name: it gets its nodes back once b has let go of each")
		// Every change of the nodes' shard annotation, from a watch that starts before a does.
		w, err := cluster.Clientset.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(w.Stop)
		holders := map[string][]string{}
		record := func() {
			for {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						return
					}
					node, isNode := ev.Object.(*corev1.Node)
					if !isNode {
						continue
					}
					h := holders[node.Name]
					if v := node.Annotations[shards.NodeAnnotation]; len(h) == 0 || h[len(h)-1] != v {
						holders[node.Name] = append(h, v)
					}
				default:
					return
				}
			}
		}
		a = shard("a")
		Eventually(func(g Gomega) {
			record()
			ours, theirs := a.NodeNames(), b.NodeNames()
			for _, n := range ours {
				Expect(theirs).NotTo(ContainElement(n), "shards a and b both run %s", n)
			}
			g.Expect(ours).To(ConsistOf(lost))
			g.Expect(append(ours, theirs...)).To(ConsistOf(names))
			for _, n := range names {
				h := holders[n]
				g.Expect(h).NotTo(BeEmpty())
				g.Expect(h[len(h)-1]).To(Equal(map[bool]string{true: "a", false: "b"}[slices.Contains(ours, n)]), "%s's shard annotation", n)
			}
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		for _, n := range lost {
			// b, live, clears its name before a writes its own: a node never goes straight from b to a.
			h := holders[n]
			for i := 1; i < len(h); i++ {
				Expect(h[i-1] == "b" && h[i] == "a").To(BeFalse(), "%s's shard annotation went %v", n, h)
			}
			Expect(h).To(ContainElement(""), "%s's shard annotation went %v", n, h)
		}
	})

	It("take a node over only once the shard that runs it lets go or stops renewing", func(ctx context.Context) {
		const group = "handover"
		// zombie: a live member of the group that runs nothing; the test holds its Lease.
		zombie := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: shards.DefaultNamespace, Name: shards.LeaseName(group, "zombie"),
			Labels: map[string]string{shards.GroupLabel: group}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("zombie"), LeaseDurationSeconds: ptr.To[int32](3600),
				RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))}}
		Expect(k8s.Create(ctx, zombie)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, zombie))).To(Succeed()) })
		// Two nodes the rule gives to a over zombie: one that zombie's annotation says it runs.
		var held, free string
		for i := 0; held == "" || free == ""; i++ {
			name := fmt.Sprintf("%s-%d", group, i)
			if shards.Owner([]string{"a", "zombie"}, name) != "a" {
				continue
			}
			annotations := map[string]string{}
			if held == "" {
				held, annotations[shards.NodeAnnotation] = name, "zombie"
			} else {
				free = name
			}
			createShardNode(ctx, group, name, annotations)
		}
		a := startShard(ctx, group, "a", false)
		annotation := func(g Gomega, name string) string {
			var node corev1.Node
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, &node)).To(Succeed())
			return node.Annotations[shards.NodeAnnotation]
		}
		Eventually(func(g Gomega) {
			g.Expect(a.NodeNames()).To(ContainElement(free))
			g.Expect(annotation(g, free)).To(Equal("a"))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(a.NodeNames()).NotTo(ContainElement(held), "a took over a node zombie still runs")
			g.Expect(annotation(g, held)).To(Equal("zombie"))
		}).WithTimeout(2 * time.Second).WithPolling(Interval).Should(Succeed())

		By("zombie lets go, as a shard does: its name leaves the node, and a takes it over")
		var node corev1.Node
		Expect(k8s.Get(ctx, client.ObjectKey{Name: held}, &node)).To(Succeed())
		patch := client.MergeFrom(node.DeepCopy())
		delete(node.Annotations, shards.NodeAnnotation)
		Expect(k8s.Patch(ctx, &node, patch)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(a.NodeNames()).To(ContainElement(held))
			g.Expect(annotation(g, held)).To(Equal("a"))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("join their pod networks: pods on different shards ping each other and connect by hostname, and a partition cuts a node off from every shard", func(ctx context.Context) {
		const group = "net"
		ns := newNamespace(ctx)
		// Two nodes for each of three shards, as the rule deals them; KWOK's manifests have no
		// pod range, so the shards give each one from the address plan.
		members := []string{"a", "b", "c"}
		per := map[string][]string{}
		for i := 0; len(per["a"]) < 2 || len(per["b"]) < 2 || len(per["c"]) < 2; i++ {
			name := fmt.Sprintf("%s-%d", group, i)
			if owner := shards.Owner(members, name); len(per[owner]) < 2 {
				per[owner] = append(per[owner], createShardNode(ctx, group, name, nil))
			}
		}
		kubelets := map[string]*fakekubelet.Kubelet{}
		for _, m := range members {
			kubelets[m] = startShard(ctx, group, m, false)
		}
		Eventually(func(g Gomega) {
			for _, m := range members {
				g.Expect(kubelets[m].NodeNames()).To(ConsistOf(per[m]), "shard %s's nodes", m)
			}
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())

		By("each node has a pod range of its own, written by its shard")
		cidrs, rangeOf := map[string]string{}, map[string]string{}
		for _, m := range members {
			for _, name := range per[m] {
				var node corev1.Node
				Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, &node)).To(Succeed())
				Expect(node.Spec.PodCIDR).NotTo(BeEmpty(), "%s's pod range", name)
				Expect(cidrs).NotTo(HaveKey(node.Spec.PodCIDR), "%s and %s share a pod range", name, cidrs[node.Spec.PodCIDR])
				cidrs[node.Spec.PodCIDR], rangeOf[name] = name, node.Spec.PodCIDR
			}
		}

		By("a pod on each shard's first node, named in a headless Service")
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "peers", Namespace: ns},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "peer"},
				Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}}}
		Expect(k8s.Create(ctx, svc)).To(Succeed())
		for _, m := range members {
			pod := builders.MakePod("peer-"+m, ns).RestartPolicy(corev1.RestartPolicyAlways).
				Container(corev1.Container{Name: "web", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
					Command: []string{"/agnhost", "serve-hostname", "--http", "--port", "8080"}}).
				Container(builders.MakeContainer("shell").Shell("sleep 3600").Obj()).Obj()
			pod.Labels = map[string]string{"app": "peer"}
			pod.Spec.Hostname, pod.Spec.Subdomain, pod.Spec.NodeName = "peer-"+m, "peers", per[m][0]
			pod.Spec.Tolerations = []corev1.Toleration{{Key: shardLabel, Operator: corev1.TolerationOpExists}}
			Expect(k8s.Create(ctx, pod)).To(Succeed())
		}
		pods := map[string]*corev1.Pod{}
		Eventually(func(g Gomega) {
			for _, m := range members {
				var pod corev1.Pod
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "peer-" + m}, &pod)).To(Succeed())
				g.Expect(specs.Condition(&pod, corev1.PodReady)).NotTo(BeNil())
				g.Expect(specs.Condition(&pod, corev1.PodReady).Status).To(Equal(corev1.ConditionTrue), "peer-%s is not ready", m)
				pods[m] = &pod
			}
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		for _, m := range members {
			// A shard watches its nodes' pods, not the suite's others.
			_, held := kubelets[m].PodWatch()
			Expect(held).To(Equal(1), "shard %s holds %d pods; its nodes run peer-%s alone", m, held, m)
			cidr := netip.MustParsePrefix(rangeOf[pods[m].Spec.NodeName])
			Expect(cidr.Contains(netip.MustParseAddr(pods[m].Status.PodIP))).To(BeTrue(), "peer-%s's IP %s is outside its node's range %s", m, pods[m].Status.PodIP, cidr)
			Expect(pods[m].Status.HostIP).To(Equal(cidr.Addr().Next().String()), "peer-%s's host IP", m)
		}

		// run runs a command in the shell container of member m's pod.
		run := func(m string, argv ...string) (int, string) {
			code, out, err := kubelets[m].Exec(ctx, ns, "peer-"+m, "shell", argv)
			Expect(err).NotTo(HaveOccurred())
			return code, out
		}
		By("every pod pings every other by hostname and fetches its page, across the shards")
		for _, from := range members {
			for _, to := range members {
				if from == to {
					continue
				}
				host := "peer-" + to + ".peers"
				Eventually(func() int { code, _ := run(from, "ping", "-c", "1", "-W", "2", host); return code }).
					WithTimeout(Timeout).WithPolling(Interval).Should(BeZero(), "peer-%s pings %s", from, host)
				code, out := run(from, "wget", "-qO-", "http://"+host+":8080/")
				Expect(code).To(BeZero(), "peer-%s fetches from %s: %s", from, host, out)
				Expect(out).To(Equal("peer-"+to), "peer-%s fetches from %s", from, host)
				code, out = run(from, "ping", "-c", "1", "-W", "2", pods[to].Status.HostIP)
				Expect(code).To(BeZero(), "peer-%s pings peer-%s's node at %s: %s", from, to, pods[to].Status.HostIP, out)
			}
		}

		By("b's node is partitioned: no shard reaches its pod, and it reaches none")
		Expect(kubelets["b"].FailNode(per["b"][0])).To(Succeed())
		DeferCleanup(func(ctx context.Context) { _ = kubelets["b"].RecoverNode(ctx, per["b"][0]) })
		for _, from := range []string{"a", "c"} {
			code, out := run(from, "ping", "-c", "1", "-W", "1", pods["b"].Status.PodIP)
			Expect(code).NotTo(BeZero(), "peer-%s pings the partitioned pod: %s", from, out)
			code, out = run(from, "wget", "-qO-", "-T", "2", "http://"+pods["b"].Status.PodIP+":8080/")
			Expect(code).NotTo(BeZero(), "peer-%s connects to the partitioned pod: %s", from, out)
		}
		code, out := run("b", "ping", "-c", "1", "-W", "1", pods["a"].Status.PodIP)
		Expect(code).NotTo(BeZero(), "the partitioned pod pings peer-a: %s", out)
		Expect(kubelets["b"].RecoverNode(ctx, per["b"][0])).To(Succeed())
		Eventually(func() int { code, _ := run("a", "ping", "-c", "1", "-W", "1", pods["b"].Status.PodIP); return code }).
			WithTimeout(Timeout).WithPolling(Interval).Should(BeZero(), "peer-a pings peer-b once its node recovered")
	})

	It("with takeover, start a killed shard's pods anew on the live shards, at the same addresses", func(ctx context.Context) {
		const group = "revive"
		ns := newNamespace(ctx)
		var ofA, ofB string
		for i := 0; ofA == "" || ofB == ""; i++ {
			name := fmt.Sprintf("%s-%d", group, i)
			switch owner := shards.Owner([]string{"a", "b"}, name); {
			case owner == "a" && ofA == "":
				ofA = createShardNode(ctx, group, name, nil)
			case owner == "b" && ofB == "":
				ofB = createShardNode(ctx, group, name, nil)
			}
		}
		a, b := startShard(ctx, group, "a", true), startShard(ctx, group, "b", true)
		Eventually(func(g Gomega) {
			g.Expect(a.NodeNames()).To(ConsistOf(ofA))
			g.Expect(b.NodeNames()).To(ConsistOf(ofB))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		for name, node := range map[string]string{"near": ofA, "far": ofB} {
			pod := builders.MakePod(name, ns).RestartPolicy(corev1.RestartPolicyAlways).
				Container(builders.MakeContainer("main").Shell("sleep 3600").Obj()).Obj()
			pod.Spec.NodeName = node
			pod.Spec.Tolerations = []corev1.Toleration{{Key: shardLabel, Operator: corev1.TolerationOpExists}}
			Expect(k8s.Create(ctx, pod)).To(Succeed())
		}
		running := func(g Gomega, name string) *corev1.Pod {
			var pod corev1.Pod
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod)).To(Succeed())
			st := specs.ContainerStatus(&pod, "main")
			g.Expect(st).NotTo(BeNil())
			g.Expect(st.State.Running).NotTo(BeNil(), "%s's container", name)
			return &pod
		}
		var before *corev1.Pod
		Eventually(func(g Gomega) {
			running(g, "near")
			before = running(g, "far")
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())

		By("b stops, as a killed process; once its Lease expires, a runs its node and the pod's container anew")
		b.Stop()
		Eventually(func(g Gomega) {
			g.Expect(a.NodeNames()).To(ConsistOf(ofA, ofB))
			after := running(g, "far")
			g.Expect(specs.ContainerStatus(after, "main").ContainerID).NotTo(Equal(specs.ContainerStatus(before, "main").ContainerID), "the container that ran under b")
			g.Expect(after.Status.PodIP).To(Equal(before.Status.PodIP))
			g.Expect(after.Status.HostIP).To(Equal(before.Status.HostIP))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		code, out, err := a.Exec(ctx, ns, "near", "main", []string{"ping", "-c", "1", "-W", "1", before.Status.PodIP})
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(BeZero(), "near pings far, both on a now: %s", out)
	})

	It("declare the group's own nodes once and share them", func(ctx context.Context) {
		const group = "declared"
		pool := fakekubelet.NodePool{Name: group, Count: 4, Labels: map[string]string{shardLabel: group},
			Taints: []corev1.Taint{{Key: shardLabel, Value: group, Effect: corev1.TaintEffectNoSchedule}}}
		shard := func(identity string) *fakekubelet.Kubelet {
			return startShardOf(ctx, group, identity, fakekubelet.Options{Pools: []fakekubelet.NodePool{pool}, Shard: &fakekubelet.ShardOptions{}})
		}
		a, b := shard("a"), shard("b")
		DeferCleanup(func(ctx context.Context) {
			Expect(k8s.DeleteAllOf(ctx, &corev1.Node{}, client.MatchingLabels{shards.GroupLabel: group})).To(Succeed())
		})
		names := []string{pool.NodeName(0), pool.NodeName(1), pool.NodeName(2), pool.NodeName(3)}
		Eventually(func(g Gomega) {
			var list corev1.NodeList
			g.Expect(k8s.List(ctx, &list, client.MatchingLabels{shards.GroupLabel: group})).To(Succeed())
			var declared []string
			for _, n := range list.Items {
				declared = append(declared, n.Name)
				g.Expect(n.Labels).To(HaveKeyWithValue(fakekubelet.PoolLabel, group))
				g.Expect(n.Spec.Taints).To(ContainElement(HaveField("Key", shardLabel)))
				g.Expect(specs.NodeReady(&n)).To(Equal(corev1.ConditionTrue), "%s", n.Name)
			}
			g.Expect(declared).To(ConsistOf(names))
			ours, theirs := a.NodeNames(), b.NodeNames()
			g.Expect(append(slices.Clone(ours), theirs...)).To(ConsistOf(names), "a runs %v, b runs %v", ours, theirs)
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})
})

// shardLabel marks the nodes of a shards spec's group: its shards manage those, and taint keeps
// the suite's pods off them.
const shardLabel = "restartbed.dev/test"

// createShardNode creates a node of the group, for its shards to take over, with the annotations
// given, and deletes it after the spec; it returns the node's name.
func createShardNode(ctx context.Context, group, name string, annotations map[string]string) string {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{shardLabel: group}, Annotations: annotations},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: shardLabel, Value: group, Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("10")}}}
	Expect(k8s.Create(ctx, node)).To(Succeed())
	DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, node))).To(Succeed()) })
	return name
}

// startShard starts a kubelet that is the group's shard identity, managing the nodes created
// for the group (createShardNode).
func startShard(ctx context.Context, group, identity string, takeover bool) *fakekubelet.Kubelet {
	return startShardOf(ctx, group, identity, fakekubelet.Options{
		Manage: fakekubelet.ManagedNodes{Labels: labels.SelectorFromSet(labels.Set{shardLabel: group})},
		Shard:  &fakekubelet.ShardOptions{Takeover: takeover},
	})
}

// startShardOf starts a kubelet of opts (its nodes, its Shard's options) as the group's shard
// identity, with 4 s Leases, and stops it and removes its Lease after the spec.
func startShardOf(ctx context.Context, group, identity string, opts fakekubelet.Options) *fakekubelet.Kubelet {
	opts.Shard.Group, opts.Shard.Identity, opts.Shard.LeaseDuration = group, identity, 4*time.Second
	k, err := fakekubelet.New(onCluster(opts))
	Expect(err).NotTo(HaveOccurred())
	Expect(k.Start(ctx)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		k.Stop()
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: shards.DefaultNamespace, Name: shards.LeaseName(group, identity)}}
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, lease))).To(Succeed())
	})
	return k
}
