package fakekubelet

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/test/specs"
)

var _ = Describe("stopping the kubelet", Label("nodes"), Ordered, func() {
	// A control plane of its own, with nothing else running in-process, so that every goroutine
	// that appears after the baseline is the kubelet's.
	var quiet *envtest.Cluster
	BeforeAll(func(ctx context.Context) {
		quiet = specs.StartCluster(ctx, envtest.Options{DisableControllerManager: true})
	}, NodeTimeout(specs.StartTimeout))

	It("leaves no goroutine of its own behind", func(ctx context.Context) {
		// Connections to the apiserver are pooled by client-go for the whole process; their
		// goroutines are not the kubelet's.
		pooled := []goleak.Option{
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
			goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		}
		before := goleak.IgnoreCurrent()
		k, err := fakekubelet.New(fakekubelet.Options{
			Config: quiet.Config, Timing: quiet.Timing,
			Pools: []fakekubelet.NodePool{{Name: "leak", Count: 2}},
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(k.Start(ctx)).To(Succeed())
		var node corev1.Node
		Expect(quiet.Client.Get(ctx, client.ObjectKey{Name: "leak-1"}, &node)).To(Succeed())
		Expect(goleak.Find(append(pooled, before)...)).To(HaveOccurred(), "the running kubelet's goroutines are visible")

		k.Stop()
		Eventually(func() error {
			return goleak.Find(append(pooled, before)...)
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})
})
