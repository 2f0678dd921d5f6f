// Package fakekubelet is the envtest suite of the emulated kubelet: nodes, leases and the
// binder against a real kube-apiserver 1.35.4.
package fakekubelet

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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

var (
	cluster *envtest.Cluster
	k8s     client.Client
)

// The suite's nodes: two TPU hosts, and one tainted CPU host with its own label.
var pools = []fakekubelet.NodePool{
	{Name: "tpu", Count: 2, Labels: map[string]string{"cloud.google.com/gke-nodepool": "tpu"}},
	{
		Name: "cpu", Count: 1,
		Labels:   map[string]string{"cloud.google.com/gke-nodepool": "cpu"},
		Capacity: corev1.ResourceList{fakekubelet.TPUResource: resource.MustParse("0"), corev1.ResourceCPU: resource.MustParse("2")},
		Taints:   []corev1.Taint{{Key: "dedicated", Value: "cpu", Effect: corev1.TaintEffectNoSchedule}},
	},
}

func TestFakeKubelet(t *testing.T) {
	RegisterFailHandler(Fail)
	ctrllog.SetLogger(GinkgoLogr)
	RunSpecs(t, "fake kubelet")
}

var _ = BeforeSuite(func(ctx context.Context) {
	cluster = specs.StartCluster(ctx, envtest.Options{Nodes: pools})
	k8s = cluster.Client
}, NodeTimeout(specs.StartTimeout))

func newNamespace(ctx context.Context) string {
	GinkgoHelper()
	return specs.NewNamespace(ctx, k8s)
}
