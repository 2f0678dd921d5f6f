package controlplane

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/test/builders"
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
