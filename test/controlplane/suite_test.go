package controlplane

import (
	"context"
	"strconv"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/test/specs"
)

// The suite's timeouts are specs'.
const (
	Timeout  = specs.Timeout
	Interval = specs.Interval
)

// notReadyTolerationSeconds is passed to the apiserver as a flag, to prove flags reach it.
const notReadyTolerationSeconds = 7

var (
	cluster *envtest.Cluster
	k8s     client.Client
)

func TestControlPlane(t *testing.T) {
	RegisterFailHandler(Fail)
	ctrllog.SetLogger(GinkgoLogr)
	RunSpecs(t, "control plane and controller-manager")
}

var _ = BeforeSuite(func(ctx context.Context) {
	cluster = specs.StartCluster(ctx, envtest.Options{
		// The CRD's own checks (crd_test.go) without a controller: restartbed's CRD only.
		CRDDirectoryPaths: []string{specs.JobSetCRDDir()},
		APIServerFlags: map[string][]string{
			"default-not-ready-toleration-seconds": {strconv.Itoa(notReadyTolerationSeconds)},
		},
		// Logging flags of its own: the thin main configures klog from them before it starts
		// the pod GC, and upstream's command, applying them again, must find nothing changed
		// (gc_test.go).
		ControllerManagerFlags: map[string][]string{"v": {"3"}, "vmodule": {"gc_controller=4"}},
	})
	k8s = cluster.Client
}, NodeTimeout(specs.StartTimeout))

func newNamespace(ctx context.Context) string {
	GinkgoHelper()
	return specs.NewNamespace(ctx, cluster)
}

// podsOf lists the pods the Job controller made for job in the suite's cluster.
func podsOf(ctx context.Context, g Gomega, job *batchv1.Job) []corev1.Pod {
	return podsIn(ctx, g, k8s, job)
}

// podsIn lists the pods the Job controller made for job, through c.
func podsIn(ctx context.Context, g Gomega, c client.Client, job *batchv1.Job) []corev1.Pod {
	var pods corev1.PodList
	g.Expect(c.List(ctx, &pods, client.InNamespace(job.Namespace),
		client.MatchingLabels{batchv1.JobNameLabel: job.Name})).To(Succeed())
	return pods.Items
}
