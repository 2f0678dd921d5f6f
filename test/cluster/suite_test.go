// Package cluster is the envtest suite of what a restartbed cluster does as any Kubernetes
// cluster does, because the release's own kube-controller-manager (every default controller),
// kube-scheduler and ServiceAccount admission run: namespaces delete, service accounts appear,
// Deployments roll out, PVC protection lets go, headless Services get EndpointSlices and the
// scheduler honours inter-pod anti-affinity.
package cluster

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/test/specs"
)

// The suite's timeouts are specs'.
const (
	Timeout  = specs.Timeout
	Interval = specs.Interval
)

// nodes is the suite's node count; the anti-affinity spec places one pod on each.
const nodes = 3

var (
	cluster *envtest.Cluster
	k8s     client.Client
)

func TestCluster(t *testing.T) {
	RegisterFailHandler(Fail)
	ctrllog.SetLogger(GinkgoLogr)
	RunSpecs(t, "a restartbed cluster as a Kubernetes cluster")
}

var _ = BeforeSuite(func(ctx context.Context) {
	cluster = specs.StartCluster(ctx, envtest.Options{Nodes: []fakekubelet.NodePool{{Name: "node", Count: nodes}}})
	k8s = cluster.Client
}, NodeTimeout(specs.StartTimeout))
