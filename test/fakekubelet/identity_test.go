package fakekubelet

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/test/specs"
)

// onlyNodes makes the apiserver refuse, in the namespace, pod status writes by anyone but a
// node, and waits until the refusal is in force.
func onlyNodes(ctx context.Context, ns string) {
	name := "only-nodes-" + ns
	fail := admissionregistrationv1.Deny
	Expect(k8s.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/status"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: `request.userInfo.username.startsWith("system:node:")`,
				Message: "only a node writes a pod's status here"}},
		},
	})).To(Succeed())
	Expect(k8s.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionregistrationv1.ValidationAction{fail},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}}},
	})).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		Expect(k8s.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
		Expect(k8s.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	})
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns}, Spec: corev1.PodSpec{
		NodeName: "not-a-node", Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}
	Expect(k8s.Create(ctx, probe)).To(Succeed())
	Eventually(func(g Gomega) {
		err := k8s.Status().Patch(ctx, probe, client.RawPatch(types.MergePatchType, []byte(`{"status":{"message":"by the admin"}}`)))
		g.Expect(err).To(MatchError(ContainSubstring("only a node writes a pod's status here")))
	}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
}

var _ = Describe("node identities", Label("nodes"), func() {
	It("acts as system:node:NAME, which the Node authorizer and NodeRestriction limit to the node's own", func(ctx context.Context) {
		ns := specs.NewNamespace(ctx, cluster)
		// In this namespace only a node may write a pod's status: the pods below run only if
		// their kubelet writes as its node.
		onlyNodes(ctx, ns)
		for _, name := range []string{"mine", "unused"} {
			Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				StringData: map[string]string{"key": name}})).To(Succeed())
		}
		pod := func(name, node, secret string) *corev1.Pod {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
				NodeName:   node,
				Containers: []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sh", "-c", "cat /secret/key; sleep 3600"}}},
			}}
			if secret != "" {
				p.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}}
				p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "s", MountPath: "/secret"}}
			}
			return p
		}
		here, there := pod("here", "tpu-0", "mine"), pod("there", "tpu-1", "")
		Expect(k8s.Create(ctx, here)).To(Succeed())
		Expect(k8s.Create(ctx, there)).To(Succeed())
		// The kubelet of tpu-0 read the Secret its pod mounts, as itself.
		Eventually(func(g Gomega) {
			for _, p := range []*corev1.Pod{here, there} {
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			}
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())

		asNode, err := kubernetes.NewForConfig(fakekubelet.NodeConfig(cluster.Config, "tpu-0"))
		Expect(err).NotTo(HaveOccurred())
		review, err := asNode.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(review.Status.UserInfo.Username).To(Equal("system:node:tpu-0"))
		Expect(review.Status.UserInfo.Groups).To(ContainElement("system:nodes"))

		_, err = asNode.CoreV1().Secrets(ns).Get(ctx, "mine", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "a Secret a pod of the node mounts")
		_, err = asNode.CoreV1().Secrets(ns).Get(ctx, "unused", metav1.GetOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a Secret no pod of the node uses: %v", err)

		patch := []byte(`{"status":{"message":"written by tpu-0"}}`)
		_, err = asNode.CoreV1().Pods(ns).Patch(ctx, "there", types.MergePatchType, patch, metav1.PatchOptions{}, "status")
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "another node's pod: %v", err)
		Expect(err).To(MatchError(ContainSubstring(`node "tpu-0" can only update pod status for pods with spec.nodeName set to itself`)))
		_, err = asNode.CoreV1().Nodes().Patch(ctx, "tpu-1", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "another node: %v", err)

		// A label a kubelet may not set on its node is the admin's, added after registration.
		var cpu corev1.Node
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "cpu-0"}, &cpu)).To(Succeed())
		Expect(cpu.Labels).To(HaveKeyWithValue("node-role.kubernetes.io/cpu", ""))
	})
})
