package fakekubelet

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
	"github.com/restartbed/restartbed/timing"
)

// The crash-loop backoff in realistic timing, on a cluster of its own (the suite's runs the fast
// profile). It takes about 35 s: a container that crashes after a second restarts at once, then after 10 s, then after 20 s.
var _ = Describe("Crash-loop backoff in realistic timing", Ordered, func() {
	var realistic *envtest.Cluster
	BeforeAll(func(ctx context.Context) {
		profile := timing.Realistic()
		// Without the in-process controllers: their tunables are process-wide and the suite's
		// cluster runs them with the fast profile.
		realistic = specs.StartCluster(ctx, envtest.Options{Timing: &profile, DisableControllerManager: true,
			Nodes: []fakekubelet.NodePool{{Name: "slow", Count: 1}}})
	}, NodeTimeout(specs.StartTimeout))

	It("restarts at once, then after 10 s, then after 20 s, showing CrashLoopBackOff in between", func(ctx context.Context) {
		ns := specs.NewNamespace(ctx, realistic)
		pod := builders.MakePod("crasher", ns).RestartPolicy(corev1.RestartPolicyAlways).
			Container(builders.MakeContainer("main").Shell("sleep 1; exit 1").Obj()).Obj()
		// Without the node lifecycle controller the node keeps the not-ready taint it registers with.
		pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		Expect(realistic.Client.Create(ctx, pod)).To(Succeed())
		h := specs.RecordPod(ctx, realistic.Clientset, ns, "crasher")
		// Every instance's start and finish, by container ID, from whichever version showed it
		// terminated (as its state or its last state), and the back-off messages in between.
		type span struct{ start, finish time.Time }
		instances := map[string]span{}
		messages := map[string]bool{}
		gaps := func() []time.Duration {
			for _, p := range h.Versions() {
				cs := specs.ContainerStatus(p, "main")
				if cs == nil {
					continue
				}
				if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
					messages[w.Message] = true
				}
				for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
					if t != nil {
						instances[t.ContainerID] = span{t.StartedAt.Time, t.FinishedAt.Time}
					}
				}
			}
			spans := slices.SortedFunc(maps.Values(instances), func(a, b span) int { return a.start.Compare(b.start) })
			var out []time.Duration
			for i := 1; i < len(spans); i++ {
				out = append(out, spans[i].start.Sub(spans[i-1].finish))
			}
			return out
		}
		Eventually(gaps).WithTimeout(time.Minute).WithPolling(Interval).Should(HaveLen(3))
		Expect(gaps()[0]).To(BeNumerically("<=", time.Second), "the first restart is immediate")
		Expect(gaps()[1]).To(BeNumerically("~", 10*time.Second, 1500*time.Millisecond))
		Expect(gaps()[2]).To(BeNumerically("~", 20*time.Second, 1500*time.Millisecond))
		uid := h.Latest().UID
		for _, d := range []string{"10s", "20s"} {
			Expect(messages).To(HaveKey(fmt.Sprintf("back-off %s restarting failed container=main pod=crasher_%s(%s)", d, ns, uid)))
		}
	}, SpecTimeout(2*time.Minute))
})
