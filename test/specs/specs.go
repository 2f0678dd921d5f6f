package specs

import (
	"context"
	"path/filepath"
	goruntime "runtime"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // the ginkgo DSL, as in every suite
	. "github.com/onsi/gomega"    //nolint:revive
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/envtest"
)

// Timeouts of every Eventually in the suites, defined once.
const (
	// Timeout bounds a wait for something the cluster does within a second or two.
	Timeout = 30 * time.Second
	// Interval is how often an Eventually looks again.
	Interval = 50 * time.Millisecond
	// StartTimeout bounds starting a cluster; the first start of a run may wait for another
	// test binary that is building the control plane.
	StartTimeout = 15 * time.Minute
)

// JobSetCRDDir is the directory of restartbed's JobSet CRD (config/crd/bases), for a suite that
// creates JobSets without restartbed's controller (envtest installs the CRD only with it).
func JobSetCRDDir() string {
	_, file, _, _ := goruntime.Caller(0) // this file's path, which the compiler always records
	return filepath.Join(filepath.Dir(file), "..", "..", "config", "crd", "bases")
}

// StartCluster starts a cluster for the current suite or container and stops it when that ends.
func StartCluster(ctx context.Context, opts envtest.Options) *envtest.Cluster {
	GinkgoHelper()
	c, err := envtest.Start(ctx, opts)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(c.Stop)
	return c
}

// NewNamespace creates a namespace for the current spec, waits until it can hold pods (its
// default service account), and deletes it after the spec.
func NewNamespace(ctx context.Context, cluster *envtest.Cluster) string {
	GinkgoHelper()
	c := cluster.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "spec-"}}
	Expect(c.Create(ctx, ns)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		Expect(client.IgnoreNotFound(c.Delete(ctx, ns))).To(Succeed())
	})
	Expect(cluster.WaitForDefaultServiceAccount(ctx, ns.Name)).To(Succeed())
	return ns.Name
}
