package fakekubelet

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
)

var _ = Describe("Probe workers", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	It("start another pod while many pods' probes hang", func(ctx context.Context) {
		// More pods than the kubelet has pod sync workers, each with a readiness probe that
		// hangs for ten minutes once it has marked that it runs. A probe that ran inside a sync
		// would hold every sync worker; a probe worker holds only itself.
		const stuck = 12
		for i := range stuck {
			c := builders.MakeContainer("app").Mount("shared", "/shared").
				Shell("until [ -f /shared/probing ]; do sleep 0.1; done; echo probing; sleep 3600").Obj()
			c.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, TimeoutSeconds: 600, ProbeHandler: corev1.ProbeHandler{
				Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "touch /shared/probing; sleep 600"}}}}
			Expect(k8s.Create(ctx, builders.MakePod(fmt.Sprintf("stuck-%d", i), ns).EmptyDir("shared").Container(c).Obj())).To(Succeed())
		}
		for i := range stuck {
			Eventually(func() (string, error) {
				return cluster.Kubelet.Logs(ns, fmt.Sprintf("stuck-%d", i), "app")
			}).WithTimeout(Timeout).WithPolling(Interval).Should(ContainSubstring("probing"), "stuck-%d's probe runs", i)
		}

		// A sidecar whose startup probe gates the main container, which has a readiness probe.
		sidecar := builders.MakeContainer("sidecar").RestartPolicy(corev1.ContainerRestartPolicyAlways).Shell("sleep 3600").Obj()
		sidecar.StartupProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
		main := builders.MakeContainer("main").Shell("sleep 3600").Obj()
		main.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
		h := create(ctx, builders.MakePod("quick", ns).InitContainer(sidecar).Container(main).Obj())
		Eventually(func() bool {
			ready := specs.Condition(h.Latest(), corev1.PodReady)
			return ready != nil && ready.Status == corev1.ConditionTrue
		}).WithTimeout(Timeout).WithPolling(Interval).Should(BeTrue(), "quick is Ready: its sidecar started, its main container runs and passed its probe")

		// The hung probes are all still running: none of the stuck pods became ready.
		for i := range stuck {
			logs, err := cluster.Kubelet.Logs(ns, fmt.Sprintf("stuck-%d", i), "app")
			Expect(err).NotTo(HaveOccurred())
			Expect(strings.Count(logs, "probing")).To(Equal(1))
			pod := &corev1.Pod{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("stuck-%d", i)}, pod)).To(Succeed())
			Expect(specs.ContainerStatus(pod, "app").Ready).To(BeFalse(), "stuck-%d's probe has not answered", i)
		}
	})
})
