package fakekubelet

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
)

var _ = Describe("Kubelet events", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	// kubeletEvents returns the kubelet's Events about the pod by reason, one Event object each:
	// the kubelet's correlator folds the repeats of one event into a count.
	kubeletEvents := func(ctx context.Context, g Gomega, pod string) map[string]corev1.Event {
		list, err := cluster.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", pod).String()})
		g.Expect(err).NotTo(HaveOccurred())
		out := map[string]corev1.Event{}
		for _, e := range list.Items {
			if e.Source.Component != "kubelet" {
				continue
			}
			g.Expect(out).NotTo(HaveKey(e.Reason), "one Event object for %s: %s, then %s", e.Reason, out[e.Reason].Message, e.Message)
			out[e.Reason] = e
		}
		return out
	}

	It("records a crash-looping container's creations, starts and back-offs once each, with their counts", func(ctx context.Context) {
		pod := builders.MakePod("looping", ns).RestartPolicy(corev1.RestartPolicyAlways).
			Container(builders.MakeContainer("main").Shell("exit 1").Obj()).Obj()
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		h := specs.RecordPod(ctx, cluster.Clientset, ns, "looping")
		Eventually(func(g Gomega) {
			g.Expect(specs.ContainerStatus(h.Latest(), "main")).NotTo(BeNil())
			g.Expect(specs.ContainerStatus(h.Latest(), "main").RestartCount).To(BeNumerically(">=", 3))
			events := kubeletEvents(ctx, g, "looping")
			g.Expect(events).To(HaveKey("Created"))
			g.Expect(events).To(HaveKey("Started"))
			g.Expect(events).To(HaveKey("BackOff"))
			for _, reason := range []string{"Created", "Started"} {
				e := events[reason]
				g.Expect(e.Count).To(BeNumerically(">=", 3), "%s counts every instance", reason)
				g.Expect(e.Type).To(Equal(corev1.EventTypeNormal))
				g.Expect(e.InvolvedObject.FieldPath).To(Equal("spec.containers{main}"))
				g.Expect(e.Source.Host).To(Equal(h.Latest().Spec.NodeName))
				g.Expect(e.LastTimestamp.Time).To(BeTemporally(">", e.FirstTimestamp.Time))
			}
			g.Expect(events["Created"].Message).To(Equal("Container created"))
			g.Expect(events["Started"].Message).To(Equal("Container started"))
			g.Expect(events["BackOff"].Type).To(Equal(corev1.EventTypeWarning))
			g.Expect(events["BackOff"].Message).To(Equal("Back-off restarting failed container main in pod looping_" + ns + "(" + string(h.Latest().UID) + ")"))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("records the kill of a deleted pod's container", func(ctx context.Context) {
		pod := builders.MakePod("killed", ns).Container(builders.MakeContainer("main").Shell("sleep 3600").Obj()).Obj()
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		h := specs.RecordPod(ctx, cluster.Clientset, ns, "killed")
		Eventually(func(g Gomega) {
			g.Expect(h.Latest()).NotTo(BeNil())
			g.Expect(h.Latest().Status.Phase).To(Equal(corev1.PodRunning))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(k8s.Delete(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			events := kubeletEvents(ctx, g, "killed")
			g.Expect(events).To(HaveKey("Killing"))
			g.Expect(events["Killing"].Message).To(Equal("Stopping container main"))
			g.Expect(events["Killing"].InvolvedObject.FieldPath).To(Equal("spec.containers{main}"))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("writes no more than the kubelet's spam filter lets through: 25 warnings about a pod, then one per 5 minutes", func(ctx context.Context) {
		pod := builders.MakePod("unready", ns).Container(builders.MakeContainer("main").Shell("sleep 3600").Obj()).Obj()
		pod.Spec.Containers[0].StartupProbe = &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 1000,
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}}}
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		unhealthy := func(g Gomega) int32 { return kubeletEvents(ctx, g, "unready")["Unhealthy"].Count }
		Eventually(unhealthy).WithTimeout(Timeout).WithPolling(Interval).Should(BeNumerically(">=", 25))
		Consistently(unhealthy).WithTimeout(5 * time.Second).WithPolling(Interval).Should(BeEquivalentTo(25))
	})
})
