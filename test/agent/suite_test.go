// Package agent is the envtest suite of the in-place-restart agent running as the fake kubelet's
// builtin program, with the spec playing the JobSet controller's part (docs/jobset.md, "A group restart, end to end").
package agent

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

var cluster *envtest.Cluster

func TestAgent(t *testing.T) {
	RegisterFailHandler(Fail)
	ctrllog.SetLogger(GinkgoLogr)
	RunSpecs(t, "in-place-restart agent")
}

var _ = BeforeSuite(func(ctx context.Context) {
	cluster = specs.StartCluster(ctx, envtest.Options{
		// The agent's JobSets without a controller: restartbed's CRD only.
		CRDDirectoryPaths: []string{specs.JobSetCRDDir()},
		Nodes:             []fakekubelet.NodePool{{Name: "tpu", Count: 2}},
		Programs:          []program.Rule{{Container: "in-place-restart-agent", Builtin: builtins.Agent}},
	})
}, NodeTimeout(specs.StartTimeout))
