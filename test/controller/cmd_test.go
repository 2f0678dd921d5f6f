package controller

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/test/specs"
)

// cmd/controller as a separate process against a control plane of its own, reached through a
// kubeconfig file, as it would run against any cluster.
var _ = Describe("cmd/controller", Ordered, func() {
	var bare *envtest.Cluster
	var binary, kubeconfig string
	BeforeAll(func(ctx context.Context) {
		// No controller of restartbed's in the cluster: cmd/controller is the one; the CRD as
		// config/crd has it.
		bare = specs.StartCluster(ctx, envtest.Options{CRDDirectoryPaths: []string{specs.JobSetCRDDir()}})
		var err error
		binary, err = gexec.Build("github.com/restartbed/restartbed/cmd/controller")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(gexec.CleanupBuildArtifacts)
		data, err := bare.Kubeconfig()
		Expect(err).NotTo(HaveOccurred())
		kubeconfig = filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(os.WriteFile(kubeconfig, data, 0o600)).To(Succeed())
	}, NodeTimeout(specs.StartTimeout))

	It("creates a JobSet's Jobs and stops on SIGTERM", func(ctx context.Context) {
		cmd := exec.Command(binary, "--kubeconfig", kubeconfig, "--webhook=false", "--health-probe-bind-address=0")
		session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { session.Kill().Wait(10 * time.Second) })
		Eventually(session.Err).WithTimeout(Timeout).Should(gbytes.Say("Starting the JobSet controller"))

		ns := specs.NewNamespace(ctx, bare)
		js := plainJobSet(ns, "outside", 2, "sleep 3600")
		Expect(bare.Client.Create(ctx, js)).To(Succeed())
		Eventually(func(g Gomega) {
			var jobs batchv1.JobList
			g.Expect(bare.Client.List(ctx, &jobs, client.InNamespace(ns))).To(Succeed())
			g.Expect(jobs.Items).To(HaveLen(2))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())

		session.Signal(syscall.SIGTERM)
		Eventually(session).WithTimeout(Timeout).Should(gexec.Exit(0))
	})
})
