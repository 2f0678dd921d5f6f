// Package controller is the envtest suite of the JobSet controller: the real controller, the
// upstream Job controller and garbage collector, the fake kubelet and the agent as its builtin
// program, together.
package controller

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/restartbed/restartbed/agent"
	"github.com/restartbed/restartbed/controller"
	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/program"
	"github.com/restartbed/restartbed/test/specs"
)

const (
	Timeout  = specs.Timeout
	Interval = specs.Interval
)

var cluster *envtest.Cluster

func TestController(t *testing.T) {
	RegisterFailHandler(Fail)
	ctrllog.SetLogger(GinkgoLogr)
	RunSpecs(t, "JobSet controller")
}

var _ = BeforeSuite(func(ctx context.Context) {
	cluster = specs.StartCluster(ctx, envtest.Options{
		Nodes:    []fakekubelet.NodePool{{Name: "tpu", Count: 4}},
		Programs: []program.Rule{{Container: "in-place-restart-agent", Builtin: agent.BuiltinName}},
	})
	mgr, err := ctrl.NewManager(cluster.Config, ctrl.Options{Scheme: cluster.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	Expect(err).NotTo(HaveOccurred())
	Expect(controller.Setup(ctx, mgr, controller.Options{Clock: cluster.Clock, InPlaceRestart: true})).To(Succeed())
	mgrCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	DeferCleanup(func() {
		cancel()
		Expect(<-done).To(Succeed())
	})
}, NodeTimeout(specs.StartTimeout))
