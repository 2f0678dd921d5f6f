package fakekubelet

import (
	"context"
	"fmt"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/program"
	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
)

var _ = Describe("stopping the kubelet", Label("nodes"), Ordered, func() {
	// A control plane of its own, with nothing else running in-process, so that every goroutine
	// that appears after the baseline is the kubelet's.
	var quiet *envtest.Cluster
	BeforeAll(func(ctx context.Context) {
		quiet = specs.StartCluster(ctx, envtest.Options{DisableControllerManager: true})
	}, NodeTimeout(specs.StartTimeout))

	It("leaves no goroutine of its own behind, with pods running", func(ctx context.Context) {
		// Connections to the apiserver are pooled by client-go for the whole process; their
		// goroutines are not the kubelet's.
		pooled := []goleak.Option{
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
			goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		}
		before := goleak.IgnoreCurrent()
		// A program that serves a probe endpoint until it is told to stop.
		server := program.Func(func(ctx context.Context, c *program.Container) int {
			c.Serve(8081, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
			<-ctx.Done()
			return 0
		})
		k, err := fakekubelet.New(fakekubelet.Options{
			Config: quiet.Config, Timing: quiet.Timing, KubeletVersion: quiet.Release.Kubernetes,
			Pools:    []fakekubelet.NodePool{{Name: "leak", Count: 2}},
			Programs: []program.Rule{{Container: "server", Program: server}},
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(k.Start(ctx)).To(Succeed())
		var node corev1.Node
		Expect(quiet.Client.Get(ctx, client.ObjectKey{Name: "leak-1"}, &node)).To(Succeed())

		By("running pods: scripts that ignore SIGTERM, a program, probes, a sidecar")
		ns := specs.NewNamespace(ctx, quiet)
		for i := range 4 {
			pod := builders.MakePod(fmt.Sprintf("busy-%d", i), ns).
				InitContainer(builders.MakeContainer("sidecar").RestartPolicy(corev1.ContainerRestartPolicyAlways).Shell("sleep 3600").Obj()).
				Container(builders.MakeContainer("server").Obj()).
				Container(builders.MakeContainer("script").Shell("while true; do sleep 1; done").Obj()).Obj()
			pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8081)}}}
			// The quiet cluster has no node lifecycle controller to lift the not-ready taint.
			pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			// Nor a scheduler: the pods are bound by name.
			pod.Spec.NodeName = fmt.Sprintf("leak-%d", i%2)
			Expect(quiet.Client.Create(ctx, pod)).To(Succeed())
		}
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(quiet.Client.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(4))
			for _, p := range pods.Items {
				g.Expect(specs.Condition(&p, corev1.PodReady)).To(HaveField("Status", corev1.ConditionTrue), p.Name)
			}
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(goleak.Find(append(pooled, before)...)).To(HaveOccurred(), "the running kubelet's goroutines are visible")

		k.Stop()
		Eventually(func() error {
			return goleak.Find(append(pooled, before)...)
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})
})
