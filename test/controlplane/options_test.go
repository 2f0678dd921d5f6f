package controlplane

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/config/crd"
	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
)

var _ = Describe("the cluster's options", Label("options"), func() {
	It("passes apiserver flags: default tolerations come from --default-not-ready-toleration-seconds", func(ctx context.Context) {
		ns := newNamespace(ctx)
		pod := builders.MakePod("tolerant", ns).Container(builders.MakeContainer("main").Obj()).Obj()
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		Expect(pod.Spec.Tolerations).To(ContainElement(corev1.Toleration{
			Key:               corev1.TaintNodeNotReady,
			Operator:          corev1.TolerationOpExists,
			Effect:            corev1.TaintEffectNoExecute,
			TolerationSeconds: ptr.To[int64](notReadyTolerationSeconds),
		}))
	})

	It("impersonates a service account, which RBAC then governs", func(ctx context.Context) {
		ns := newNamespace(ctx)
		sa, err := cluster.ServiceAccountClient(ns, "agent")
		Expect(err).NotTo(HaveOccurred())

		review := &authenticationv1.SelfSubjectReview{}
		Expect(sa.Create(ctx, review)).To(Succeed())
		Expect(review.Status.UserInfo.Username).To(Equal("system:serviceaccount:" + ns + ":agent"))
		Expect(review.Status.UserInfo.Groups).To(ConsistOf(
			"system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated"))

		var pods corev1.PodList
		Expect(apierrors.IsForbidden(sa.List(ctx, &pods))).To(BeTrue(), "cluster-wide list must be forbidden")

		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "pod-reader", Namespace: ns},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}},
		}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "agent-reads-pods", Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "agent", Namespace: ns}},
		}
		Expect(k8s.Create(ctx, role)).To(Succeed())
		Expect(k8s.Create(ctx, binding)).To(Succeed())
		Eventually(func() error {
			return sa.List(ctx, &pods, client.InNamespace(ns))
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})
})

// With restartbed's JobSet off, nothing of it is installed, so a user's own JobSet CRD (of any
// version) and webhooks can be: here, restartbed's CRD stands in for "yours", created with a
// client as a user would create upstream's.
var _ = Describe("a cluster without restartbed's JobSet", Label("options"), Ordered, func() {
	var bare *envtest.Cluster
	// crds reaches the CRDs, which the cluster's scheme does not know.
	var crds apiextensionsclient.Interface
	BeforeAll(func(ctx context.Context) {
		bare = specs.StartCluster(ctx, envtest.Options{DisableControllerManager: true})
		var err error
		crds, err = apiextensionsclient.NewForConfig(bare.Config)
		Expect(err).NotTo(HaveOccurred())
	}, NodeTimeout(specs.StartTimeout))

	It("has no JobSet CRD and no webhook configuration of restartbed's", func(ctx context.Context) {
		list, err := crds.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Items).To(BeEmpty())
		var validating admissionregistrationv1.ValidatingWebhookConfigurationList
		Expect(bare.Client.List(ctx, &validating)).To(Succeed())
		Expect(validating.Items).To(BeEmpty())
		var mutating admissionregistrationv1.MutatingWebhookConfigurationList
		Expect(bare.Client.List(ctx, &mutating)).To(Succeed())
		Expect(mutating.Items).To(BeEmpty())
		Expect(bare.JobSetRunning()).To(BeFalse())
	})

	It("takes a JobSet CRD the user creates", func(ctx context.Context) {
		ours, err := crd.CRDs()
		Expect(err).NotTo(HaveOccurred())
		_, err = crds.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, ours[0], metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred(), "a user's JobSet CRD must not meet restartbed's")
	})
})
