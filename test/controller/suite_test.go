// Package controller is the envtest suite of the JobSet controller and its admission webhook: the
// real controller, the release's kube-controller-manager and kube-scheduler, the fake kubelet and the
// agent as its builtin program, together, as envtest.Options.JobSet runs them.
package controller

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/restartbed/restartbed/builtins"
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
		JobSet:   true,
		Nodes:    []fakekubelet.NodePool{{Name: "tpu", Count: 4}},
		Programs: []program.Rule{{Container: "in-place-restart-agent", Builtin: builtins.Agent}},
	})
}, NodeTimeout(specs.StartTimeout))
