package fakekubelet

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/fakekubelet/release"
	"github.com/restartbed/restartbed/internal/podtext"
	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
)

const (
	in  = corev1.ContainerRestartRuleOnExitCodesOpIn
	rac = corev1.ContainerRestartRuleActionRestartAllContainers
)

// create creates the pod, records its history and waits until it is Running and Ready.
func create(ctx context.Context, pod *corev1.Pod) *specs.PodHistory {
	GinkgoHelper()
	Expect(k8s.Create(ctx, pod)).To(Succeed())
	h := specs.RecordPod(ctx, cluster.Clientset, pod.Namespace, pod.Name)
	Eventually(func(g Gomega) {
		p := h.Latest()
		g.Expect(p).NotTo(BeNil())
		g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		g.Expect(specs.Condition(p, corev1.PodReady)).To(HaveField("Status", corev1.ConditionTrue))
	}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	return h
}

func state(cs *corev1.ContainerStatus) string {
	if cs == nil {
		return "absent"
	}
	return podtext.State(cs.State)
}

func lastState(cs *corev1.ContainerStatus) string {
	if cs == nil {
		return "absent"
	}
	return podtext.State(cs.LastTerminationState)
}

var _ = Describe("Pod lifecycle", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	It("restarts a container by its rule, backs off the next crash and fails the pod on an exit no rule restarts", func(ctx context.Context) {
		pod := builders.MakePod("single", ns).Container(builders.MakeContainer("main").
			RestartPolicy(corev1.ContainerRestartPolicyNever).
			OnExitCodes(corev1.ContainerRestartRuleActionRestart, in, 42).Obj()).Obj()
		h := create(ctx, pod)
		uid := h.Latest().UID

		Expect(cluster.Kubelet.ExitContainer(ns, "single", "main", 42)).To(Succeed())
		Eventually(func(g Gomega) {
			cs := specs.ContainerStatus(h.Latest(), "main")
			g.Expect(state(cs)).To(Equal("Running"))
			g.Expect(cs.RestartCount).To(BeEquivalentTo(1))
			g.Expect(lastState(cs)).To(Equal("Terminated(42,Error)"))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())

		By("a second crash waits out the backoff")
		mark := len(h.Versions())
		Expect(cluster.Kubelet.ExitContainer(ns, "single", "main", 42)).To(Succeed())
		want := fmt.Sprintf("back-off %s restarting failed container=main pod=single_%s(%s)", cluster.Timing.CrashLoopBackOff, ns, uid)
		Eventually(func() int {
			return h.Index(mark, func(p *corev1.Pod) bool {
				cs := specs.ContainerStatus(p, "main")
				return state(cs) == "Waiting(CrashLoopBackOff)" && cs.State.Waiting.Message == want &&
					lastState(cs) == "Terminated(42,Error)" && p.Status.Phase == corev1.PodRunning
			})
		}).WithTimeout(Timeout).WithPolling(Interval).Should(BeNumerically(">=", 0))
		Eventually(func(g Gomega) {
			cs := specs.ContainerStatus(h.Latest(), "main")
			g.Expect(state(cs)).To(Equal("Running"))
			g.Expect(cs.RestartCount).To(BeEquivalentTo(2))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Eventually(func() []string { return specs.EventMessages(ctx, cluster.Clientset, ns, "single") }).
			WithTimeout(Timeout).WithPolling(Interval).Should(ContainElements(
			fmt.Sprintf("Scheduled: Successfully assigned %s/single to %s", ns, h.Latest().Spec.NodeName),
			fmt.Sprintf("BackOff: Back-off restarting failed container main in pod single_%s(%s)", ns, uid)))

		By("an exit no rule matches ends the pod")
		Expect(cluster.Kubelet.ExitContainer(ns, "single", "main", 1)).To(Succeed())
		Eventually(func(g Gomega) {
			p := h.Latest()
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			cs := specs.ContainerStatus(p, "main")
			g.Expect(state(cs)).To(Equal("Terminated(1,Error)"))
			g.Expect(lastState(cs)).To(Equal("Terminated(42,Error)"))
			g.Expect(specs.Condition(p, corev1.PodReady)).To(And(HaveField("Status", corev1.ConditionFalse), HaveField("Reason", "PodFailed")))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("restarts all containers in place: sequence A", func(ctx context.Context) {
		pod := builders.MakePod("seq-a", ns).
			InitContainer(builders.MakeContainer("init").Shell("exit 0").Obj()).
			InitContainer(builders.MakeContainer("sidecar").RestartPolicy(corev1.ContainerRestartPolicyAlways).Shell("sleep 3600").Obj()).
			Container(builders.MakeContainer("source-container").RestartPolicy(corev1.ContainerRestartPolicyNever).
				OnExitCodes(rac, in, 42).Shell("sleep 3600").Obj()).
			Container(builders.MakeContainer("regular").Shell("sleep 3600").Obj()).Obj()
		h := create(ctx, pod)
		before := h.Latest()

		Expect(cluster.Kubelet.ExitContainer(ns, "seq-a", "source-container", 42)).To(Succeed())
		var trigger, cleaned int
		Eventually(func() int {
			trigger = h.Index(0, func(p *corev1.Pod) bool {
				c := specs.Condition(p, corev1.AllContainersRestarting)
				return c != nil && c.Status == corev1.ConditionTrue && c.Reason == "RestartAllContainersStarted" &&
					c.Message == "container exited with restart policy rule"
			})
			return trigger
		}).WithTimeout(Timeout).WithPolling(Interval).Should(BeNumerically(">=", 0))
		p := h.Versions()[trigger]
		Expect(state(specs.ContainerStatus(p, "source-container"))).To(Equal("Terminated(42,Error)"))
		Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		Expect(specs.Condition(p, corev1.PodReady).Message).To(Equal("containers with unready status: [source-container]"))

		Eventually(func() int {
			cleaned = h.Index(trigger, func(p *corev1.Pod) bool {
				c := specs.Condition(p, corev1.AllContainersRestarting)
				return c != nil && c.Status == corev1.ConditionFalse && state(specs.ContainerStatus(p, "regular")) == "Waiting(RestartingAllContainers)"
			})
			return cleaned
		}).WithTimeout(Timeout).WithPolling(Interval).Should(BeNumerically(">=", 0))
		p = h.Versions()[cleaned]
		for _, name := range []string{"init", "sidecar", "source-container", "regular"} {
			cs := specs.ContainerStatus(p, name)
			Expect(state(cs)).To(Equal("Waiting(RestartingAllContainers)"), name)
			Expect(lastState(cs)).To(Equal("Terminated(137,RestartingAllContainers)"), name)
			Expect(cs.RestartCount).To(BeEquivalentTo(1), name)
		}
		Expect(specs.ContainerStatus(p, "init").Ready).To(BeTrue(), "a completed init container stays ready (a quirk of upstream's)")
		Expect(specs.Condition(p, corev1.PodReady).Message).To(Equal("containers with unready status: [sidecar source-container regular]"))

		// From 1.36 the restarted containers keep the cleanup's termination as their lastState.
		rel, err := release.For(cluster.Release.Kubernetes)
		Expect(err).NotTo(HaveOccurred())
		wantLast := "-"
		if rel.CarriesLastStateAcrossRestartAll() {
			wantLast = "Terminated(137,RestartingAllContainers)"
		}
		Eventually(func(g Gomega) {
			p := h.Latest()
			g.Expect(specs.Condition(p, corev1.PodReady)).To(HaveField("Status", corev1.ConditionTrue))
			for _, name := range []string{"sidecar", "source-container", "regular"} {
				cs := specs.ContainerStatus(p, name)
				g.Expect(state(cs)).To(Equal("Running"), name)
				g.Expect(cs.RestartCount).To(BeEquivalentTo(1), name)
				g.Expect(lastState(cs)).To(Equal(wantLast), name)
			}
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Eventually(func() []string { return specs.EventMessages(ctx, cluster.Clientset, ns, "seq-a") }).
			WithTimeout(Timeout).WithPolling(Interval).Should(ContainElement("Killing: killing"), "the cleanup's kills")
		after := h.Latest()
		Expect(after.UID).To(Equal(before.UID))
		Expect(after.Status.PodIP).To(Equal(before.Status.PodIP))
		Expect(after.Status.StartTime).To(Equal(before.Status.StartTime))
		for _, v := range h.Versions()[trigger:] {
			Expect(specs.Condition(v, corev1.PodInitialized)).To(HaveField("Status", corev1.ConditionTrue), "Initialized is sticky")
		}
	})

	It("restarts all containers from an init container source: sequence B", func(ctx context.Context) {
		pod := builders.MakePod("seq-b", ns).EmptyDir("data").
			InitContainer(builders.MakeContainer("sidecar").RestartPolicy(corev1.ContainerRestartPolicyAlways).Shell("sleep 3600").Obj()).
			InitContainer(builders.MakeContainer("init").Shell("exit 0").Obj()).
			InitContainer(builders.MakeContainer("source-init").RestartPolicy(corev1.ContainerRestartPolicyNever).OnExitCodes(rac, in, 42).
				Mount("data", "/mnt").Shell("if [ -f /mnt/done ]; then exit 0; fi; touch /mnt/done; exit 42").Obj()).
			Container(builders.MakeContainer("regular").Shell("sleep 3600").Obj()).Obj()
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		h := specs.RecordPod(ctx, cluster.Clientset, ns, "seq-b")
		Eventually(func(g Gomega) {
			p := h.Latest()
			g.Expect(p).NotTo(BeNil())
			g.Expect(specs.Condition(p, corev1.PodReady)).To(HaveField("Status", corev1.ConditionTrue))
			g.Expect(specs.ContainerStatus(p, "source-init").RestartCount).To(BeEquivalentTo(1))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		trigger := h.Index(0, func(p *corev1.Pod) bool {
			c := specs.Condition(p, corev1.AllContainersRestarting)
			return c != nil && c.Status == corev1.ConditionTrue
		})
		Expect(trigger).To(BeNumerically(">=", 0))
		Expect(h.Versions()[trigger].Status.Phase).To(Equal(corev1.PodPending))
		cleaned := h.Index(trigger, func(p *corev1.Pod) bool {
			return state(specs.ContainerStatus(p, "source-init")) == "Waiting(RestartingAllContainers)"
		})
		Expect(cleaned).To(BeNumerically(">", trigger))
		p := h.Versions()[cleaned]
		Expect(p.Status.Phase).To(Equal(corev1.PodPending))
		Expect(specs.Condition(p, corev1.PodInitialized)).To(And(HaveField("Status", corev1.ConditionFalse),
			HaveField("Message", "containers with incomplete status: [sidecar source-init]")))
		for _, name := range []string{"sidecar", "init", "source-init"} {
			cs := specs.ContainerStatus(p, name)
			Expect(state(cs)).To(Equal("Waiting(RestartingAllContainers)"), name)
			Expect(cs.RestartCount).To(BeEquivalentTo(1), name)
		}
		Expect(state(specs.ContainerStatus(p, "regular"))).To(Equal("Waiting(PodInitializing)"))
		Expect(specs.ContainerStatus(p, "regular").RestartCount).To(BeZero(), "it never ran")
		Expect(h.Latest().Status.Phase).To(Equal(corev1.PodRunning))
	})

	It("restarts all containers after the source restarted on its own: sequence C", func(ctx context.Context) {
		pod := builders.MakePod("seq-c", ns).RestartPolicy(corev1.RestartPolicyAlways).
			Container(builders.MakeContainer("source-container").RestartPolicy(corev1.ContainerRestartPolicyAlways).
				OnExitCodes(rac, in, 42).Shell("sleep 3600").Obj()).
			Container(builders.MakeContainer("regular").Shell("sleep 3600").Obj()).Obj()
		h := create(ctx, pod)
		Expect(cluster.Kubelet.ExitContainer(ns, "seq-c", "source-container", 1)).To(Succeed())
		Eventually(func(g Gomega) {
			cs := specs.ContainerStatus(h.Latest(), "source-container")
			g.Expect(state(cs)).To(Equal("Running"))
			g.Expect(cs.RestartCount).To(BeEquivalentTo(1))
			g.Expect(lastState(cs)).To(Equal("Terminated(1,Error)"))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(cluster.Kubelet.ExitContainer(ns, "seq-c", "source-container", 42)).To(Succeed())
		Eventually(func(g Gomega) {
			p := h.Latest()
			g.Expect(specs.Condition(p, corev1.PodReady)).To(HaveField("Status", corev1.ConditionTrue))
			source, regular := specs.ContainerStatus(p, "source-container"), specs.ContainerStatus(p, "regular")
			g.Expect(state(source)).To(Equal("Running"))
			g.Expect(source.RestartCount).To(BeEquivalentTo(2))
			g.Expect(state(regular)).To(Equal("Running"))
			g.Expect(regular.RestartCount).To(BeEquivalentTo(1))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("fails a pod with restartPolicy Always whose containers' own policies let them stop", func(ctx context.Context) {
		pod := builders.MakePod("always-fails", ns).RestartPolicy(corev1.RestartPolicyAlways).
			Container(builders.MakeContainer("done").RestartPolicy(corev1.ContainerRestartPolicyOnFailure).Shell("exit 0").Obj()).
			Container(builders.MakeContainer("broken").RestartPolicy(corev1.ContainerRestartPolicyNever).Shell("exit 1").Obj()).Obj()
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		h := specs.RecordPod(ctx, cluster.Clientset, ns, "always-fails")
		Eventually(func(g Gomega) {
			p := h.Latest()
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(state(specs.ContainerStatus(p, "done"))).To(Equal("Terminated(0,Completed)"))
			g.Expect(state(specs.ContainerStatus(p, "broken"))).To(Equal("Terminated(1,Error)"))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("runs an upstream e2e pod unmodified: a marker file on an emptyDir makes the second run differ", func(ctx context.Context) {
		pod := builders.MakePod("marker", ns).EmptyDir("data").
			Container(builders.MakeContainer("source").RestartPolicy(corev1.ContainerRestartPolicyNever).OnExitCodes(rac, in, 42).
				Mount("data", "/mnt/data").
				Shell("if [ -f /mnt/data/marker ]; then sleep 3600; fi; touch /mnt/data/marker; exit 42").Obj()).
			Container(builders.MakeContainer("worker").Shell("sleep 3600").Obj()).Obj()
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		h := specs.RecordPod(ctx, cluster.Clientset, ns, "marker")
		Eventually(func(g Gomega) {
			p := h.Latest()
			g.Expect(p).NotTo(BeNil())
			g.Expect(specs.Condition(p, corev1.PodReady)).To(HaveField("Status", corev1.ConditionTrue))
			g.Expect(specs.ContainerStatus(p, "source").RestartCount).To(BeEquivalentTo(1))
			g.Expect(specs.ContainerStatus(p, "worker").RestartCount).To(BeEquivalentTo(1))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Consistently(func() int32 { return specs.ContainerStatus(h.Latest(), "source").RestartCount }).
			WithTimeout(2 * cluster.Timing.RestartAllKillGrace).WithPolling(Interval).Should(BeEquivalentTo(1))
	})

	It("starts the next container only once the sidecar's startup probe succeeds", func(ctx context.Context) {
		pod := builders.MakePod("gated", ns).
			InitContainer(builders.MakeContainer("sidecar").RestartPolicy(corev1.ContainerRestartPolicyAlways).
				Shell("sleep 2; touch /tmp/ready; sleep 3600").StartupExec("test", "-f", "/tmp/ready").Obj()).
			Container(builders.MakeContainer("main").Shell("sleep 3600").Obj()).Obj()
		h := create(ctx, pod)
		Expect(h.Index(0, func(p *corev1.Pod) bool {
			cs := specs.ContainerStatus(p, "sidecar")
			return state(cs) == "Running" && !ptr.Deref(cs.Started, false) && state(specs.ContainerStatus(p, "main")) == "Waiting(PodInitializing)"
		})).To(BeNumerically(">=", 0), "the sidecar was seen running but not started, with main waiting")
		for _, v := range h.Versions() {
			if state(specs.ContainerStatus(v, "main")) == "Running" {
				Expect(ptr.Deref(specs.ContainerStatus(v, "sidecar").Started, false)).To(BeTrue())
			}
		}
	})

	It("publishes a readiness change while a liveness kill's preStop hook holds the pod's sync", func(ctx context.Context) {
		// main fails its liveness probe once /shared/die exists. Its preStop hook makes side
		// unready a second later, then takes 4 s more and clears both files: side's readiness
		// changes while the sync that killed main waits for it.
		exec := func(script string) corev1.ProbeHandler {
			return corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", script}}}
		}
		main := builders.MakeContainer("main").Mount("shared", "/shared").
			Shell("trap 'exit 0' TERM; [ -f /shared/done ] || { sleep 2; touch /shared/die /shared/done; }; sleep 3600").Obj()
		main.LivenessProbe = &corev1.Probe{ProbeHandler: exec("test ! -f /shared/die"), PeriodSeconds: 1, FailureThreshold: 1}
		main.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
			Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "sleep 1; touch /shared/unready; sleep 4; rm /shared/die /shared/unready"}}}}
		side := builders.MakeContainer("side").Mount("shared", "/shared").Shell("sleep 3600").Obj()
		side.ReadinessProbe = &corev1.Probe{ProbeHandler: exec("test ! -f /shared/unready"), PeriodSeconds: 1, FailureThreshold: 1}
		pod := builders.MakePod("held", ns).RestartPolicy(corev1.RestartPolicyAlways).EmptyDir("shared").Container(main).Container(side).Obj()
		h := create(ctx, pod)
		Eventually(func() int32 {
			cs := specs.ContainerStatus(h.Latest(), "main")
			if cs == nil || cs.State.Running == nil {
				return 0
			}
			return cs.RestartCount
		}).WithTimeout(Timeout).WithPolling(Interval).Should(BeEquivalentTo(1), "main was killed by its liveness probe and restarted")
		Expect(h.Index(0, func(p *corev1.Pod) bool {
			m, s, ready := specs.ContainerStatus(p, "main"), specs.ContainerStatus(p, "side"), specs.Condition(p, corev1.PodReady)
			return m != nil && s != nil && ready != nil && m.RestartCount == 0 && state(m) == "Running" && !s.Ready &&
				ready.Status == corev1.ConditionFalse
		})).To(BeNumerically(">=", 0), "side was seen unready, and the pod not Ready, while main's first instance ran its preStop hook")
	})

	It("shuts a deleted pod down gracefully, sidecars last, and removes it", func(ctx context.Context) {
		pod := builders.MakePod("graceful", ns).
			InitContainer(builders.MakeContainer("sidecar").RestartPolicy(corev1.ContainerRestartPolicyAlways).Shell("sleep 3600").Obj()).
			Container(builders.MakeContainer("main").Shell("trap 'exit 0' TERM; sleep 3600").Obj()).Obj()
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](2)
		h := create(ctx, pod)
		Expect(k8s.Delete(ctx, pod)).To(Succeed())
		Eventually(h.Deleted).WithTimeout(Timeout).WithPolling(Interval).Should(BeTrue())
		last := h.Latest()
		Expect(state(specs.ContainerStatus(last, "main"))).To(Equal("Terminated(0,Completed)"))
		Expect(state(specs.ContainerStatus(last, "sidecar"))).To(Equal("Terminated(137,Error)"), "sleep as PID 1 ignores SIGTERM")
		Expect(last.Status.Phase).To(Equal(corev1.PodSucceeded))
	})

	It("stops a pod whose phase turns terminal in the API and never starts its containers again", func(ctx context.Context) {
		// restartPolicy Always would restart main once it exits; a terminating pod never does.
		pod := builders.MakePod("terminal", ns).Container(builders.MakeContainer("main").Shell("trap 'exit 0' TERM; sleep 3600").Obj()).Obj()
		h := create(ctx, pod)
		p := h.Latest().DeepCopy()
		p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Stopped", "failed by the test"
		_, err := cluster.Clientset.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			p := h.Latest()
			g.Expect(state(specs.ContainerStatus(p, "main"))).To(Equal("Terminated(0,Completed)"))
			g.Expect(specs.Condition(p, corev1.PodReady)).To(HaveField("Status", corev1.ConditionFalse))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Consistently(func(g Gomega) {
			p := h.Latest()
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(state(specs.ContainerStatus(p, "main"))).To(Equal("Terminated(0,Completed)"))
			g.Expect(specs.ContainerStatus(p, "main").RestartCount).To(BeEquivalentTo(0))
		}).WithTimeout(2 * cluster.Timing.CrashLoopBackOff).WithPolling(Interval).Should(Succeed())
	})

	It("lets the real Job controller complete a Job", func(ctx context.Context) {
		job := builders.MakeJob("done", ns).Obj()
		job.Spec.Template.Spec.Containers = []corev1.Container{builders.MakeContainer("work").Shell("sleep 1; exit 0").Obj()}
		Expect(k8s.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
			g.Expect(job.Status.Conditions).To(ContainElement(And(HaveField("Type", batchv1.JobComplete), HaveField("Status", corev1.ConditionTrue))))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("lets the real Job controller fail a Job whose pods fail", func(ctx context.Context) {
		job := builders.MakeJob("fails", ns).BackoffLimit(1).PodReplacementPolicy(batchv1.Failed).Obj()
		job.Spec.Template.Spec.Containers = []corev1.Container{builders.MakeContainer("work").Shell("exit 3").Obj()}
		Expect(k8s.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
			g.Expect(job.Status.Conditions).To(ContainElement(And(HaveField("Type", batchv1.JobFailed),
				HaveField("Status", corev1.ConditionTrue), HaveField("Reason", batchv1.JobReasonBackoffLimitExceeded))))
			g.Expect(job.Status.Failed).To(BeEquivalentTo(2))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("gives in-process programs the pod's service account, which RBAC then judges", func(ctx context.Context) {
		// ServiceAccount admission refuses a pod whose service account does not exist.
		Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns}})).To(Succeed())
		pod := builders.MakePod("whoami", ns).Container(builders.MakeContainer("whoami").Obj()).Obj()
		pod.Spec.ServiceAccountName = "agent"
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		h := specs.RecordPod(ctx, cluster.Clientset, ns, "whoami")
		Eventually(func(g Gomega) {
			p := h.Latest()
			g.Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded))
			g.Expect(state(specs.ContainerStatus(p, "whoami"))).To(Equal("Terminated(0,Completed)"))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("finishes a RestartAllContainers cleanup after a kubelet restart in the middle of it", func(ctx context.Context) {
		pod := builders.MakePod("kubelet-restart", ns).
			Container(builders.MakeContainer("source").RestartPolicy(corev1.ContainerRestartPolicyNever).OnExitCodes(rac, in, 42).Shell("sleep 3600").Obj()).
			Container(builders.MakeContainer("a").Shell("sleep 3600").Obj()).
			Container(builders.MakeContainer("b").Shell("sleep 3600").Obj()).Obj()
		h := create(ctx, pod)
		Expect(cluster.Kubelet.ExitContainer(ns, "kubelet-restart", "source", 42)).To(Succeed())
		Eventually(func() int {
			return h.Index(0, func(p *corev1.Pod) bool {
				c := specs.Condition(p, corev1.AllContainersRestarting)
				return c != nil && c.Status == corev1.ConditionTrue
			})
		}).WithTimeout(Timeout).WithPolling(Interval).Should(BeNumerically(">=", 0))
		Expect(cluster.Kubelet.RestartKubelet(h.Latest().Spec.NodeName)).To(Succeed())
		Eventually(func(g Gomega) {
			p := h.Latest()
			g.Expect(specs.Condition(p, corev1.PodReady)).To(HaveField("Status", corev1.ConditionTrue))
			g.Expect(specs.Condition(p, corev1.AllContainersRestarting)).To(HaveField("Status", corev1.ConditionFalse))
			for _, name := range []string{"source", "a", "b"} {
				g.Expect(specs.ContainerStatus(p, name).RestartCount).To(BeEquivalentTo(1), name)
			}
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})
})
