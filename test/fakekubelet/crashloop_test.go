package fakekubelet

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
	"github.com/restartbed/restartbed/timing"
)

// The crash-loop backoff in realistic timing, on a cluster of its own whose kubelet runs on a
// clock the spec steps. The cluster has no kube-controller-manager, whose processes would run on
// the wall clock. The clock moves only when the spec steps it, by whole relist periods from a
// whole second, so that every step lands on a relist of the PLEG; what the kubelet does at a
// moment it does at that moment however slow the machine, so each gap below is exact, where on
// the wall clock it would be the backoff plus whatever the load added. The spec waits for what
// the runtime does through the node's CRI socket, and steps the clock only once it has.
var _ = Describe("Crash-loop backoff in realistic timing", Ordered, func() {
	var (
		realistic *envtest.Cluster
		clk       *testingclock.FakeClock
		cri       runtimeapi.RuntimeServiceClient
		node      string
	)
	profile := timing.Realistic()
	period := profile.PLEGRelistPeriod
	BeforeAll(func(ctx context.Context) {
		clk = testingclock.NewFakeClock(time.Now().Truncate(time.Second))
		sockets := GinkgoT().TempDir()
		realistic = specs.StartCluster(ctx, envtest.Options{Timing: &profile, Clock: clk, DisableControllerManager: true,
			Nodes: []fakekubelet.NodePool{{Name: "slow", Count: 1}}, RuntimeSocketDir: sockets})
		node = realistic.Kubelet.NodeNames()[0]
		conn, err := grpc.NewClient("unix://"+fakekubelet.RuntimeSocket(sockets, node), grpc.WithTransportCredentials(insecure.NewCredentials()))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(conn.Close)
		cri = runtimeapi.NewRuntimeServiceClient(conn)
	}, NodeTimeout(specs.StartTimeout))

	It("restarts a relist after the first exit, then 10 s after the second exit, then 20 s after the third, showing CrashLoopBackOff in between", func(ctx context.Context) {
		ns := specs.NewNamespace(ctx, realistic)
		pod := builders.MakePod("crasher", ns).RestartPolicy(corev1.RestartPolicyAlways).
			Container(builders.MakeContainer("main").Shell("sleep 3600").Obj()).Obj()
		pod.Spec.NodeName = node
		// Without the node lifecycle controller the node keeps the not-ready taint it registers with.
		pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		Expect(realistic.Client.Create(ctx, pod)).To(Succeed())
		h := specs.RecordPod(ctx, realistic.Clientset, ns, "crasher")
		main := func() *corev1.ContainerStatus {
			if p := h.Latest(); p != nil {
				return specs.ContainerStatus(p, "main")
			}
			return nil
		}
		// stepTo moves the clock to at.
		stepTo := func(at time.Time) {
			GinkgoHelper()
			Expect(at).To(BeTemporally(">=", clk.Now()), "the clock cannot go back")
			clk.Step(at.Sub(clk.Now()))
		}
		// runs reports whether the runtime runs instance restarts+1 of main.
		runs := func(g Gomega, restarts int32) bool {
			resp, err := cri.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
				State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
			g.Expect(err).NotTo(HaveOccurred())
			return len(resp.Containers) == 1 && resp.Containers[0].Metadata.Attempt == uint32(restarts)
		}
		// started waits, the clock standing still, until the runtime runs instance restarts+1
		// of main: what the kubelet does at a moment it does without the clock moving on.
		started := func(restarts int32) {
			GinkgoHelper()
			Eventually(func(g Gomega) { g.Expect(runs(g, restarts)).To(BeTrue()) }).WithTimeout(Timeout).WithPolling(Interval).
				Should(Succeed(), "instance %d of main started at %s", restarts+1, clk.Now())
		}
		// running waits until the pod's status shows instance restarts+1 of main running, which
		// the runtime runs already. A start reaches the status at a relist, as on a node: while
		// the status does not show it, the clock moves on by a relist period, which changes no
		// time the runtime stamped.
		running := func(restarts int32) *corev1.ContainerStatus {
			GinkgoHelper()
			var cs *corev1.ContainerStatus
			Eventually(func(g Gomega) {
				cs = main()
				if cs == nil || cs.RestartCount != restarts || cs.State.Running == nil {
					clk.Step(period)
				}
				g.Expect(cs).NotTo(BeNil())
				g.Expect(cs.RestartCount).To(Equal(restarts))
				g.Expect(cs.State.Running).NotTo(BeNil())
			}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed(), "instance %d of main running at %s", restarts+1, clk.Now())
			return cs
		}
		// crash ends the running instance with exit code 1, as if it had crashed, at the clock's
		// now, and returns once the runtime has it exited: a relist after it sees the exit.
		crash := func() time.Time {
			GinkgoHelper()
			at := clk.Now()
			Expect(realistic.Kubelet.ExitContainer(ns, "crasher", "main", 1)).To(Succeed())
			Eventually(func(g Gomega) {
				resp, err := cri.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
					State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(resp.Containers).To(BeEmpty())
			}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed(), "main exited in the runtime")
			return at
		}
		// backedOff waits for the status of the container that exited at exited waiting out a
		// backoff of d: it comes with the relist after the exit; while it does not, the clock
		// moves on by a relist period, but never to the backoff's last period.
		backedOff := func(exited time.Time, d time.Duration) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				cs := main()
				if (cs == nil || cs.State.Waiting == nil) && clk.Now().Add(period).Before(exited.Add(d-period)) {
					clk.Step(period)
				}
				g.Expect(cs).NotTo(BeNil())
				g.Expect(cs.State.Waiting).NotTo(BeNil())
				g.Expect(cs.State.Waiting.Reason).To(Equal("CrashLoopBackOff"))
				g.Expect(cs.State.Waiting.Message).To(Equal(fmt.Sprintf("back-off %s restarting failed container=main pod=crasher_%s(%s)", d, ns, h.Latest().UID)))
			}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		}
		// gap is how long after its exit at exited the instance cs started.
		gap := func(cs *corev1.ContainerStatus, exited time.Time) time.Duration {
			GinkgoHelper()
			Expect(cs.LastTerminationState.Terminated).NotTo(BeNil())
			Expect(cs.LastTerminationState.Terminated.ExitCode).To(BeEquivalentTo(1))
			Expect(cs.LastTerminationState.Terminated.FinishedAt.Time).To(BeTemporally("==", exited), "the exit's time, as the runtime stamped it")
			return cs.State.Running.StartedAt.Sub(exited)
		}
		// stillWaiting checks, for a while of the wall clock, that the runtime has not started
		// instance restarts+1 at the clock's now: load can only hide an early start, never make
		// one.
		stillWaiting := func(restarts int32) {
			GinkgoHelper()
			Consistently(func(g Gomega) bool { return runs(g, restarts) }).WithTimeout(time.Second).WithPolling(Interval).Should(BeFalse(),
				"main restarted before its backoff ended, at %s", clk.Now())
		}

		// The pod's first start: its sandbox and container come at syncs that relists bring.
		Eventually(func(g Gomega) {
			if !runs(g, 0) {
				clk.Step(period)
			}
			g.Expect(runs(g, 0)).To(BeTrue())
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed(), "main started")
		running(0)

		By("the first exit: restarted at the next relist, without a backoff")
		exited := crash()
		clk.Step(period)
		started(1)
		Expect(gap(running(1), exited)).To(Equal(period))

		for _, next := range []struct {
			restarts int32
			backoff  time.Duration
		}{{2, profile.CrashLoopBackOff}, {3, 2 * profile.CrashLoopBackOff}} {
			restarts, backoff := next.restarts, next.backoff
			By(fmt.Sprintf("exit %d: CrashLoopBackOff at the next relist, restarted %s after the exit", restarts, backoff))
			exited := crash()
			clk.Step(period)
			backedOff(exited, backoff)
			stepTo(exited.Add(backoff - period))
			stillWaiting(restarts)
			clk.Step(period)
			started(restarts)
			Expect(gap(running(restarts), exited)).To(Equal(backoff))
		}
	}, SpecTimeout(2*time.Minute))
})
