package fakekubelet

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/test/builders"
)

// A node's kubelet reads its configuration file whenever it starts (Options.KubeletConfigFile),
// as upstream's node e2e specs expect when they rewrite it while the kubelet is stopped.
var _ = Describe("The kubelet's configuration file", Label("nodes"), func() {
	const pool = "configured"
	node := pool + "-0"
	header := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

	It("sets the node's crash-loop backoff at each start, and a refused file starts no kubelet", func(ctx context.Context) {
		file := filepath.Join(GinkgoT().TempDir(), "kubelet-config")
		write := func(content string) {
			Expect(os.WriteFile(file, []byte(header+content), 0o600)).To(Succeed())
		}
		// The profile's backoff doubles from 1 s; capped at 2 s, the delays are 1 s, 2 s, 2 s, ...
		write("crashLoopBackOff:\n  maxContainerRestartPeriod: 2s\n")
		k := ownKubelet(ctx, pool, fakekubelet.Options{KubeletConfigFile: file})
		ns := newNamespace(ctx)
		pod := onOwnNode(builders.MakePod("crashes", ns).RestartPolicy(corev1.RestartPolicyAlways).
			Container(builders.MakeContainer("main").Shell("exit 1").Obj()).Obj(), pool)
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		// backOff is the container's restart count and the start of its CrashLoopBackOff
		// message ("back-off 2s"), or "" while it is not held back.
		backOff := func(g Gomega) (int32, string) {
			var got corev1.Pod
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), &got)).To(Succeed())
			g.Expect(got.Status.ContainerStatuses).To(HaveLen(1))
			cs := got.Status.ContainerStatuses[0]
			if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" {
				return cs.RestartCount, ""
			}
			msg, _, _ := strings.Cut(cs.State.Waiting.Message, " restarting")
			return cs.RestartCount, msg
		}
		Eventually(func(g Gomega) {
			restarts, msg := backOff(g)
			g.Expect(restarts).To(BeNumerically(">=", 3))
			g.Expect(msg).To(Equal("back-off 2s"))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())

		By("a file the kubelet refuses: it is not restarted, and a stopped one does not start")
		write("maxPods: 250\n")
		err := k.RestartKubelet(node)
		Expect(err).To(MatchError(And(ContainSubstring("was not restarted"), ContainSubstring("kubelet-config:3: maxPods: 250"))))
		Expect(k.StopKubelet(node)).To(Succeed())
		Expect(k.StartKubelet(ctx, node)).To(MatchError(ContainSubstring("did not start")))
		Expect(k.KubeletStopped(node)).To(BeTrue())

		By("a file rewritten while the kubelet is stopped: the started kubelet's backoff follows it")
		write("crashLoopBackOff:\n  maxContainerRestartPeriod: 1s\n")
		Expect(k.StartKubelet(ctx, node)).To(Succeed())
		Eventually(func(g Gomega) {
			_, msg := backOff(g)
			g.Expect(msg).To(Equal("back-off 1s"))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Consistently(func(g Gomega) {
			_, msg := backOff(g)
			g.Expect(msg).To(BeElementOf("", "back-off 1s"))
		}).WithTimeout(3 * cluster.Timing.CrashLoopBackOff).WithPolling(Interval).Should(Succeed())
	})
})
