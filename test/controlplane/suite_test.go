package controlplane

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/restartbed/restartbed/envtest"
)

// Timeouts of every Eventually in the suite, defined once.
const (
	// Timeout bounds a wait for something the control plane does within a second or two.
	Timeout = 30 * time.Second
	// Interval is how often an Eventually looks again.
	Interval = 50 * time.Millisecond
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
	var err error
	cluster, err = envtest.Start(context.Background(), envtest.Options{
		APIServerFlags: map[string][]string{
			"default-not-ready-toleration-seconds": {"7"},
		},
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cluster.Stop)
	k8s = cluster.Client
}, NodeTimeout(10*time.Minute))

// newNamespace creates a namespace for one spec and deletes it after.
func newNamespace(ctx context.Context) string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "spec-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, ns))).To(Succeed())
	})
	return ns.Name
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
