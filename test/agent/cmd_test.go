package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
	"github.com/restartbed/restartbed/test/specs"
)

func freePort() int {
	GinkgoHelper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// cmd/agent as a process, with $KUBECONFIG standing in for a pod's service account.
var _ = Describe("cmd/agent", func() {
	It("writes its pod's attempt, lifts the barrier when the group is in sync, and exits 143 on SIGTERM", func(ctx context.Context) {
		binary, err := gexec.Build("github.com/restartbed/restartbed/cmd/agent")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(gexec.CleanupBuildArtifacts)
		kubeconfig, err := cluster.Kubeconfig()
		Expect(err).NotTo(HaveOccurred())
		path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(os.WriteFile(path, kubeconfig, 0o600)).To(Succeed())

		ns := specs.NewNamespace(ctx, cluster)
		js := inPlaceJobSet(ns, "bin")
		js.Spec.ReplicatedJobs[0].Replicas = 1
		Expect(cluster.Client.Create(ctx, js)).To(Succeed())
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bin-workers-0-0", Namespace: ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		Expect(cluster.Client.Create(ctx, pod)).To(Succeed())

		port := freePort()
		cmd := exec.Command(binary)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+path, "POD_NAME="+pod.Name, "JOBSET_NAME=bin", "NAMESPACE="+ns,
			fmt.Sprintf("STARTUP_PROBE_PORT=%d", port))
		session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { session.Kill().Wait() })

		Eventually(func(g Gomega) {
			g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.Annotations).To(HaveKeyWithValue(jobsetv1alpha2.InPlaceRestartAttemptKey, "0"))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		probe := func() error {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/barrier-is-down", port))
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		}
		Expect(probe()).NotTo(Succeed(), "nothing listens before the barrier lifts")

		js.Status.CurrentInPlaceRestartAttempt = ptr.To[int32](0)
		Expect(cluster.Client.Status().Update(ctx, js)).To(Succeed())
		Eventually(probe).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())

		session.Signal(syscall.SIGTERM)
		Eventually(session).WithTimeout(Timeout).Should(gexec.Exit(143))
	})
})
