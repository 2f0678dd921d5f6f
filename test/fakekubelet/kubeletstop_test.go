package fakekubelet

import (
	"context"
	"os"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/container"
	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
	"github.com/restartbed/restartbed/timing"
)

// A node's kubelet stopped for a while and started again, on a cluster of its own: stopping the
// suite's nodes' kubelets would stop other specs' pods.
var _ = Describe("A stopped kubelet", Ordered, func() {
	var (
		own     *envtest.Cluster
		sockets string
	)
	const node = "lone-0"
	BeforeAll(func(ctx context.Context) {
		profile := timing.Fast()
		var err error
		sockets, err = os.MkdirTemp("", "cri")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, sockets)
		own = specs.StartCluster(ctx, envtest.Options{Timing: &profile, Nodes: []fakekubelet.NodePool{{Name: "lone", Count: 1}}, RuntimeSocketDir: sockets})
	}, NodeTimeout(specs.StartTimeout))

	It("leaves its containers running and reports nothing until it starts, then catches up", func(ctx context.Context) {
		ns := specs.NewNamespace(ctx, own)
		ready := func(g Gomega) corev1.ConditionStatus {
			n, err := own.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			return specs.NodeReady(n)
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

	// A node's reboot as upstream's node e2e specs make one: the kubelet stopped, the pod's
	// sandbox stopped through the node's CRI socket, the kubelet started.
	It("replaces a sandbox stopped under it through the CRI, starting the pod again from its first init container", func(ctx context.Context) {
		ns := specs.NewNamespace(ctx, own)
		pod := builders.MakePod("rebooted", ns).RestartPolicy(corev1.RestartPolicyAlways).
			InitContainer(builders.MakeContainer("init").Shell("echo init").Obj()).
			Container(builders.MakeContainer("main").Shell("sleep 3600").Obj()).Obj()
		pod.Labels = map[string]string{"test": "reboot"}
		pod.Spec.NodeName = node
		Expect(own.Client.Create(ctx, pod)).To(Succeed())
		h := specs.RecordPod(ctx, own.Clientset, ns, "rebooted")
		Eventually(func(g Gomega) {
			g.Expect(h.Latest()).NotTo(BeNil())
			g.Expect(state(specs.ContainerStatus(h.Latest(), "main"))).To(Equal("Running"))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		before := h.Latest()

		conn, err := grpc.NewClient("unix://"+fakekubelet.RuntimeSocket(sockets, node), grpc.WithTransportCredentials(insecure.NewCredentials()))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(conn.Close)
		rs := runtimeapi.NewRuntimeServiceClient(conn)
		list := func(g Gomega) []*runtimeapi.PodSandbox {
			resp, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: pod.Labels}})
			g.Expect(err).NotTo(HaveOccurred())
			return resp.Items
		}
		sandboxes := list(Default)
		Expect(sandboxes).To(HaveLen(1))
		Expect(sandboxes[0].State).To(Equal(runtimeapi.PodSandboxState_SANDBOX_READY))
		Expect(sandboxes[0].Metadata).To(HaveField("Uid", string(before.UID)))

		By("stopping the kubelet, then the sandbox: its containers are killed")
		Expect(own.Kubelet.StopKubelet(node)).To(Succeed())
		_, err = rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sandboxes[0].Id})
		Expect(err).NotTo(HaveOccurred())
		Expect(list(Default)[0].State).To(Equal(runtimeapi.PodSandboxState_SANDBOX_NOTREADY))
		Eventually(func(g Gomega) {
			resp, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
				State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}, PodSandboxId: sandboxes[0].Id}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(resp.Containers).To(BeEmpty())
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())

		By("starting the kubelet: a new sandbox, the init container again, then main")
		Expect(own.Kubelet.StartKubelet(ctx, node)).To(Succeed())
		Eventually(func(g Gomega) {
			p := h.Latest()
			initStatus, main := specs.ContainerStatus(p, "init"), specs.ContainerStatus(p, "main")
			g.Expect(initStatus.ContainerID).NotTo(Equal(specs.ContainerStatus(before, "init").ContainerID), "the init container ran again")
			g.Expect(initStatus.State.Terminated).To(HaveField("ExitCode", BeZero()))
			g.Expect(main.RestartCount).To(BeEquivalentTo(1))
			g.Expect(main.LastTerminationState.Terminated).To(HaveField("ExitCode", BeEquivalentTo(137)))
			g.Expect(state(main)).To(Equal("Running"))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		after := list(Default)
		Expect(after).To(HaveLen(1))
		Expect(after[0].Id).NotTo(Equal(sandboxes[0].Id))
		Expect(after[0].Metadata.Attempt).To(BeEquivalentTo(1))
		Expect(after[0].State).To(Equal(runtimeapi.PodSandboxState_SANDBOX_READY))
		Eventually(func(g Gomega) []string {
			events, err := own.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
				FieldSelector: fields.OneTermEqualSelector("involvedObject.name", "rebooted").String()})
			g.Expect(err).NotTo(HaveOccurred())
			var reasons []string
			for _, e := range events.Items {
				reasons = append(reasons, e.Reason)
			}
			return reasons
		}).WithTimeout(Timeout).WithPolling(Interval).Should(ContainElement("SandboxChanged"))

		By("removing the completed init container through the CRI: its status stays, it does not run again")
		initID := container.InstanceID(specs.ContainerStatus(h.Latest(), "init").ContainerID)
		_, err = rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: initID})
		Expect(err).NotTo(HaveOccurred())
		resp, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: initID}})
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.Containers).To(BeEmpty())
		Expect(own.Kubelet.RestartKubelet(node)).To(Succeed(), "a restart resyncs the pod on the runtime without the instance")
		Consistently(func(g Gomega) {
			initStatus := specs.ContainerStatus(h.Latest(), "init")
			g.Expect(container.InstanceID(initStatus.ContainerID)).To(Equal(initID))
			g.Expect(initStatus.State.Terminated).To(HaveField("ExitCode", BeZero()))
		}).WithTimeout(3 * time.Second).WithPolling(Interval).Should(Succeed())
	}, SpecTimeout(2*time.Minute))
})
