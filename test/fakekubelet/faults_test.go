package fakekubelet

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
)

var _ = Describe("Pod lifecycle under faults", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	It("fails the pod when an init container fails after a RestartAllContainers, Initialized staying True (S9-S13)", func(ctx context.Context) {
		// The init container succeeds twice and fails on its third run: the marker on the
		// emptyDir counts its runs across the group restarts.
		pod := builders.MakePod("init-fails", ns).EmptyDir("data").
			InitContainer(builders.MakeContainer("init").Mount("data", "/data").
				Shell(`n=$(cat /data/runs 2>/dev/null || echo 0); n=$((n+1)); echo $n > /data/runs; [ "$n" -lt 3 ]`).Obj()).
			InitContainer(builders.MakeContainer("sidecar").RestartPolicy(corev1.ContainerRestartPolicyAlways).Shell("sleep 3600").Obj()).
			Container(builders.MakeContainer("source-container").RestartPolicy(corev1.ContainerRestartPolicyNever).
				OnExitCodes(rac, in, 42).Shell("sleep 3600").Obj()).
			Container(builders.MakeContainer("regular").Shell("sleep 3600").Obj()).Obj()
		h := create(ctx, pod)

		By("the first group restart")
		Expect(cluster.Kubelet.ExitContainer(ns, "init-fails", "source-container", 42)).To(Succeed())
		Eventually(func(g Gomega) {
			p := h.Latest()
			g.Expect(specs.Condition(p, corev1.PodReady)).To(HaveField("Status", corev1.ConditionTrue))
			g.Expect(specs.ContainerStatus(p, "regular").RestartCount).To(BeEquivalentTo(1))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())

		By("S9: regular exits 1 and, with pod Never, stays terminated")
		Expect(cluster.Kubelet.ExitContainer(ns, "init-fails", "regular", 1)).To(Succeed())
		Eventually(func() string { return state(specs.ContainerStatus(h.Latest(), "regular")) }).
			WithTimeout(Timeout).WithPolling(Interval).Should(Equal("Terminated(1,Error)"))
		Expect(h.Latest().Status.Phase).To(Equal(corev1.PodRunning))

		By("S10-S13: the next group restart revives it, and the init container fails")
		mark := len(h.Versions())
		Expect(cluster.Kubelet.ExitContainer(ns, "init-fails", "source-container", 42)).To(Succeed())
		Eventually(func(g Gomega) {
			p := h.Latest()
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(state(specs.ContainerStatus(p, "init"))).To(Equal("Terminated(1,Error)"))
			g.Expect(specs.Condition(p, corev1.AllContainersRestarting)).To(And(HaveField("Status", corev1.ConditionFalse), HaveField("Reason", "PodFailed")))
			g.Expect(specs.Condition(p, corev1.PodReady)).To(And(HaveField("Status", corev1.ConditionFalse), HaveField("Reason", "PodFailed")))
			g.Expect(specs.Condition(p, corev1.PodInitialized)).To(HaveField("Status", corev1.ConditionTrue))
			g.Expect(state(specs.ContainerStatus(p, "sidecar"))).NotTo(Equal("Running"), "a failed pod's sidecars are stopped")
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(h.Index(mark, func(p *corev1.Pod) bool {
			cs := specs.ContainerStatus(p, "regular")
			return state(cs) == "Waiting(RestartingAllContainers)" && cs.RestartCount == 2
		})).To(BeNumerically(">=", 0), "the terminated regular container was reset with the others")
	})

	It("kills a container whose liveness probe fails and restarts it by its policy; readiness follows its probe", func(ctx context.Context) {
		pod := builders.MakePod("probes", ns).RestartPolicy(corev1.RestartPolicyAlways).
			Container(builders.MakeContainer("web").Shell("touch /tmp/healthy /tmp/ready; sleep 3600").Obj()).Obj()
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
			PeriodSeconds: 1, FailureThreshold: 2}
		pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/ready"}}},
			PeriodSeconds: 1, FailureThreshold: 1}
		h := create(ctx, pod)

		By("readiness")
		code, _, err := cluster.Kubelet.Exec(ctx, ns, "probes", "web", []string{"rm", "/tmp/ready"})
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(BeZero())
		Eventually(func() *corev1.PodCondition { return specs.Condition(h.Latest(), corev1.PodReady) }).
			WithTimeout(Timeout).WithPolling(Interval).Should(And(HaveField("Status", corev1.ConditionFalse),
			HaveField("Message", "containers with unready status: [web]")))

		By("liveness")
		_, _, err = cluster.Kubelet.Exec(ctx, ns, "probes", "web", []string{"rm", "/tmp/healthy"})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			cs := specs.ContainerStatus(h.Latest(), "web")
			g.Expect(cs.RestartCount).To(BeEquivalentTo(1))
			g.Expect(lastState(cs)).To(Equal("Terminated(137,Error)"), "sh as PID 1 ignores SIGTERM until the grace ends")
			g.Expect(state(cs)).To(Equal("Running"))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Eventually(func() *corev1.PodCondition { return specs.Condition(h.Latest(), corev1.PodReady) }).
			WithTimeout(Timeout).WithPolling(Interval).Should(HaveField("Status", corev1.ConditionTrue), "the new instance's filesystem is fresh")
		// The kubelet writes its events apart from the status, through its node's rate-limited
		// recorder: they may trail the status the checks above saw.
		Eventually(func() []string { return specs.EventMessages(ctx, cluster.Clientset, ns, "probes") }).
			WithTimeout(Timeout).WithPolling(Interval).Should(ContainElements(
			"Unhealthy: Readiness probe failed: ",
			"Unhealthy: Liveness probe failed: cat: /tmp/healthy: No such file or directory\n",
			"Killing: Container web failed liveness probe, will be restarted"))
	})

	It("reports an OOM kill and a missing command as the runtime does", func(ctx context.Context) {
		pod := builders.MakePod("oom", ns).
			Container(builders.MakeContainer("big").Obj()).
			Container(builders.MakeContainer("missing").Obj()).Obj()
		pod.Spec.Containers[1].Command = []string{"python3", "train.py"}
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		h := specs.RecordPod(ctx, cluster.Clientset, ns, "oom")
		Eventually(func() string { return state(specs.ContainerStatus(h.Latest(), "big")) }).
			WithTimeout(Timeout).WithPolling(Interval).Should(Equal("Running"))
		Expect(cluster.Kubelet.OOMKill(ns, "oom", "big")).To(Succeed())
		Eventually(func(g Gomega) {
			p := h.Latest()
			g.Expect(state(specs.ContainerStatus(p, "big"))).To(Equal("Terminated(137,OOMKilled)"))
			missing := specs.ContainerStatus(p, "missing")
			g.Expect(state(missing)).To(Equal("Terminated(128,StartError)"))
			g.Expect(missing.State.Terminated.Message).To(ContainSubstring(`exec: "python3": executable file not found in $PATH`))
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(cluster.Kubelet.ExitContainer(ns, "oom", "big", 3)).To(MatchError(ContainSubstring("not running")))
	})

	It("resolves the downward API and gives the pod its IPs and QoS class", func(ctx context.Context) {
		pod := builders.MakePod("downward", ns).Container(builders.MakeContainer("env").Shell("sleep 3600").Obj()).Obj()
		pod.Labels = map[string]string{"jobset.sigs.k8s.io/job-index": "3"}
		pod.Spec.Containers[0].Env = []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
			{Name: "INDEX", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['jobset.sigs.k8s.io/job-index']"}}},
			{Name: "GREETING", Value: "$(POD_NAME) at $(INDEX)"},
		}
		h := create(ctx, pod)
		p := h.Latest()
		Expect(p.Status.PodIP).To(HavePrefix("10."))
		Expect(p.Status.HostIP).To(HavePrefix("172."))
		Expect(p.Status.QOSClass).To(Equal(corev1.PodQOSBestEffort))
		_, out, err := cluster.Kubelet.Exec(ctx, ns, "downward", "env", []string{"sh", "-c", `echo "$POD_NAME $POD_IP $NODE $INDEX $GREETING"`})
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.TrimSpace(out)).To(Equal("downward " + p.Status.PodIP + " " + p.Spec.NodeName + " 3 downward at 3"))
	})

	It("continues a startup after a kubelet restart in the middle of it", func(ctx context.Context) {
		pod := builders.MakePod("restart-startup", ns).EmptyDir("data").
			InitContainer(builders.MakeContainer("slow-init").Shell("sleep 2").Obj()).
			Container(builders.MakeContainer("main").Shell("sleep 3600").Obj()).Obj()
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		h := specs.RecordPod(ctx, cluster.Clientset, ns, "restart-startup")
		Eventually(func() string { return state(specs.ContainerStatus(h.Latest(), "slow-init")) }).
			WithTimeout(Timeout).WithPolling(Interval).Should(Equal("Running"))
		Expect(cluster.Kubelet.RestartKubelet(h.Latest().Spec.NodeName)).To(Succeed())
		Eventually(func(g Gomega) {
			p := h.Latest()
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(specs.ContainerStatus(p, "slow-init").RestartCount).To(BeZero(), "the running init container was kept")
			g.Expect(state(specs.ContainerStatus(p, "main"))).To(Equal("Running"))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("runs the preStop hook before it stops a deleted pod's container", func(ctx context.Context) {
		pod := builders.MakePod("prestop", ns).EmptyDir("data").
			Container(builders.MakeContainer("main").Mount("data", "/data").Shell("trap 'cat /data/hook > /dev/termination-log; exit 0' TERM; sleep 3600").Obj()).Obj()
		pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
			Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "echo hook-ran > /data/hook"}}}}
		h := create(ctx, pod)
		Expect(k8s.Delete(ctx, pod)).To(Succeed())
		Eventually(h.Deleted).WithTimeout(Timeout).WithPolling(Interval).Should(BeTrue())
		cs := specs.ContainerStatus(h.Latest(), "main")
		Expect(state(cs)).To(Equal("Terminated(0,Completed)"))
		Expect(cs.State.Terminated.Message).To(Equal("hook-ran\n"), "the trap read what the preStop hook wrote")
	})
})
