package fakekubelet

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restartbed/restartbed/test/builders"
)

// ResetConnections: a node's pods lose their open connections to the apiserver at once, as
// the agents' watches do when a load balancer in front of the control plane drops them.
var _ = Describe("Connections reset", func() {
	It("ends the watches of the node's pods, which watch again, and leaves other nodes' pods alone", func(ctx context.Context) {
		ns := newNamespace(ctx)
		Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default-view"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "default"}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		})).To(Succeed())
		watching := func(name string) func() (int, error) {
			return func() (int, error) {
				out, err := cluster.Kubelet.Logs(ns, name, "watcher")
				return strings.Count(out, "watching\n"), err
			}
		}
		nodes := map[string]string{"here": "tpu-0", "there": "tpu-1"}
		for _, name := range []string{"here", "there"} {
			pod := builders.MakePod(name, ns).RestartPolicy(corev1.RestartPolicyAlways).Container(builders.MakeContainer("watcher").Obj()).Obj()
			pod.Spec.NodeName = nodes[name]
			create(ctx, pod)
			Eventually(watching(name)).WithTimeout(Timeout).WithPolling(Interval).Should(Equal(1))
		}

		broken, err := cluster.Kubelet.ResetConnections(nodes["here"])
		Expect(err).NotTo(HaveOccurred())
		Expect(broken).To(BeNumerically(">=", 1), "the watch of the pod on %s was open", nodes["here"])
		Eventually(func() (string, error) { return cluster.Kubelet.Logs(ns, "here", "watcher") }).
			WithTimeout(Timeout).WithPolling(Interval).Should(ContainSubstring("watch ended\nwatching\n"))
		Consistently(watching("there")).WithTimeout(Interval*10).WithPolling(Interval).Should(Equal(1),
			"the pod on %s kept its watch", nodes["there"])

		_, err = cluster.Kubelet.ResetConnections("no-such-node")
		Expect(err).To(MatchError(ContainSubstring(`node "no-such-node" is not one of this kubelet's`)))
	})
})
