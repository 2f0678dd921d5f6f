package agent

import (
	"context"
	"strconv"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/agent"
	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
	agentconfig "github.com/restartbed/restartbed/config/agent"
	"github.com/restartbed/restartbed/fakekubelet/program"
	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
)

var _ = Describe("The agent's identity", Ordered, func() {
	BeforeAll(func(ctx context.Context) {
		policy, err := agentconfig.Policy()
		Expect(err).NotTo(HaveOccurred())
		for _, o := range policy {
			Expect(cluster.Client.Create(ctx, o)).To(Succeed())
			DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(cluster.Client.Delete(ctx, o))).To(Succeed()) })
		}
	})

	It("may set its own pod's attempt annotation and nothing else (config/agent RBAC and policy)", func(ctx context.Context) {
		ns := specs.NewNamespace(ctx, cluster)
		specs.ApplyAgentRBAC(ctx, cluster.Client, ns)
		var pods [2]*corev1.Pod
		for i, name := range []string{"mine", "theirs"} {
			pod := builders.MakePod(name, ns).Container(builders.MakeContainer("worker").Shell("sleep 3600").Obj()).Obj()
			pod.Spec.ServiceAccountName = agentconfig.ServiceAccountName
			Expect(cluster.Client.Create(ctx, pod)).To(Succeed())
			pods[i] = pod
		}
		as, err := kubernetes.NewForConfig(program.PodServiceAccountConfig(cluster.Config, pods[0]))
		Expect(err).NotTo(HaveOccurred())
		apply := func(name string, annotations map[string]string) error {
			_, err := as.CoreV1().Pods(ns).Apply(ctx, corev1apply.Pod(name, ns).WithAnnotations(annotations),
				metav1.ApplyOptions{FieldManager: agent.FieldOwner, Force: true})
			return err
		}
		attempt := map[string]string{jobsetv1alpha2.InPlaceRestartAttemptKey: "0"}

		By("the policy is in force: another annotation is denied with its message")
		// Each try asks for a different value, so a try made before the apiserver loaded the
		// policy cannot make the next one a no-op; a merge patch, so that the agent's own field
		// manager never owns the probe's annotation.
		tries := 0
		Eventually(func() error {
			tries++
			_, err := as.CoreV1().Pods(ns).Patch(ctx, "mine", types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"example.com/other":"`+strconv.Itoa(tries)+`"}}}`), metav1.PatchOptions{})
			return err
		}).WithTimeout(Timeout).WithPolling(Interval).Should(MatchError(ContainSubstring(
			"ServiceAccount 'jobset-in-place-restart' can only update the Pod annotation 'jobset.sigs.k8s.io/in-place-restart-attempt'.")))

		By("its own attempt annotation is allowed")
		Expect(apply("mine", attempt)).To(Succeed())

		By("another pod is denied")
		Expect(apply("theirs", attempt)).To(MatchError(ContainSubstring("can only update the pod its token is bound to")))

		By("labels and spec are denied")
		_, err = as.CoreV1().Pods(ns).Patch(ctx, "mine", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
		Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(BeTrue(), "labels: %v", err)
		_, err = as.CoreV1().Pods(ns).Patch(ctx, "mine", types.MergePatchType, []byte(`{"spec":{"activeDeadlineSeconds":60}}`), metav1.PatchOptions{})
		Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(BeTrue(), "spec: %v", err)

		By("RBAC: pods may not be read, its JobSet may")
		_, err = as.CoreV1().Pods(ns).Get(ctx, "mine", metav1.GetOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "get pod: %v", err)
		saClient, err := client.New(program.PodServiceAccountConfig(cluster.Config, pods[0]), client.Options{Scheme: cluster.Scheme})
		Expect(err).NotTo(HaveOccurred())
		Expect(saClient.List(ctx, &jobsetv1alpha2.JobSetList{}, client.InNamespace(ns))).To(Succeed())
	})
})
