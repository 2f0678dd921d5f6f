package cluster

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
)

var _ = Describe("kube-controller-manager's default controllers", func() {
	It("finishes deleting a namespace and everything in it", Label("namespace"), func(ctx context.Context) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "doomed-"}}
		Expect(k8s.Create(ctx, ns)).To(Succeed())
		Expect(cluster.WaitForDefaultServiceAccount(ctx, ns.Name)).To(Succeed())
		Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns.Name}})).To(Succeed())
		pod := builders.MakePod("p", ns.Name).Container(builders.MakeContainer("main").Obj()).Obj()
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		waitRunning(ctx, pod)

		Expect(k8s.Delete(ctx, ns)).To(Succeed())
		Eventually(func(g Gomega) {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(ns), ns)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "namespace %s is still %s: %v", ns.Name, ns.Status.Phase, ns.Status.Conditions)
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("gives a new namespace its default service account, and pods its token volume", Label("serviceaccount"), func(ctx context.Context) {
		ns := specs.NewNamespace(ctx, cluster)
		var sa corev1.ServiceAccount
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &sa)).To(Succeed())
		var ca corev1.ConfigMap
		Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kube-root-ca.crt"}, &ca)
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(ca.Data).To(HaveKeyWithValue("ca.crt", ContainSubstring("BEGIN CERTIFICATE")))

		pod := builders.MakePod("p", ns).Container(builders.MakeContainer("main").Obj()).Obj()
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		Expect(pod.Spec.ServiceAccountName).To(Equal("default"))
		Expect(pod.Spec.Volumes).To(ContainElement(HaveField("Projected.Sources", ContainElement(
			HaveField("ServiceAccountToken.Path", "token")))), "ServiceAccount admission added no token volume")
		Expect(pod.Spec.Containers[0].VolumeMounts).To(ContainElement(
			HaveField("MountPath", "/var/run/secrets/kubernetes.io/serviceaccount")))
		waitRunning(ctx, pod)

		By("the kubelet filled the volume: a token from the TokenRequest API, the cluster's CA, the namespace")
		read := func(file string) string {
			code, out, err := cluster.Kubelet.Exec(ctx, ns, "p", "main", []string{"cat", "/var/run/secrets/kubernetes.io/serviceaccount/" + file})
			Expect(err).NotTo(HaveOccurred())
			Expect(code).To(Equal(0), out)
			return out
		}
		Expect(read("ca.crt")).To(Equal(ca.Data["ca.crt"]))
		Expect(read("namespace")).To(Equal(ns))
		review, err := cluster.Clientset.AuthenticationV1().TokenReviews().Create(ctx,
			&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: read("token")}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(review.Status.Authenticated).To(BeTrue(), review.Status.Error)
		Expect(review.Status.User.Username).To(Equal("system:serviceaccount:" + ns + ":default"))
	})

	It("rolls out a Deployment, and rolls it out again when its template changes", Label("deployment"), func(ctx context.Context) {
		ns := specs.NewNamespace(ctx, cluster)
		labels := map[string]string{"app": "web"}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](3),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:1"}}},
				},
			},
		}
		Expect(k8s.Create(ctx, d)).To(Succeed())
		waitRolledOut(ctx, d)

		Eventually(func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
				return err
			}
			d.Spec.Template.Spec.Containers[0].Image = "web:2"
			return k8s.Update(ctx, d)
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		waitRolledOut(ctx, d)
		var pods corev1.PodList
		Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
		images := map[string]int{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				images[p.Spec.Containers[0].Image]++
			}
		}
		Expect(images).To(Equal(map[string]int{"web:2": 3}))
	})

	It("deletes a PVC once the pod that used it is gone", Label("pvc"), func(ctx context.Context) {
		ns := specs.NewNamespace(ctx, cluster)
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		Expect(k8s.Create(ctx, pvc)).To(Succeed())
		Expect(pvc.Finalizers).To(ContainElement("kubernetes.io/pvc-protection"), "StorageObjectInUseProtection admission")
		// Bound by name: no storage provisioner binds the claim, so the scheduler would not place it.
		pod := builders.MakePod("user", ns).Container(builders.MakeContainer("main").Mount("data", "/data").Obj()).Obj()
		pod.Spec.NodeName = "node-0"
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "data",
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}})
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		waitRunning(ctx, pod)

		Expect(k8s.Delete(ctx, pvc)).To(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pvc), pvc)).To(Succeed())
			g.Expect(pvc.DeletionTimestamp).NotTo(BeNil())
		}).WithContext(ctx).WithTimeout(time.Second).WithPolling(Interval).Should(Succeed(), "the claim went while its pod ran")

		Expect(k8s.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func(g Gomega) {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(pvc), pvc)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the claim stays with %v", pvc.Finalizers)
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("gives a headless Service EndpointSlices with its ready pods' addresses", Label("endpointslice"), func(ctx context.Context) {
		ns := specs.NewNamespace(ctx, cluster)
		labels := map[string]string{"job": "workers"}
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: ns},
			Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels},
		}
		Expect(k8s.Create(ctx, svc)).To(Succeed())
		var ips []string
		for i := range 2 {
			pod := builders.MakePod(fmt.Sprintf("w-%d", i), ns).Container(builders.MakeContainer("main").Obj()).Obj()
			pod.Labels = labels
			pod.Spec.Hostname, pod.Spec.Subdomain = pod.Name, svc.Name
			Expect(k8s.Create(ctx, pod)).To(Succeed())
			ips = append(ips, waitRunning(ctx, pod).Status.PodIP)
		}
		Eventually(func(g Gomega) {
			var slices discoveryv1.EndpointSliceList
			g.Expect(k8s.List(ctx, &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name})).To(Succeed())
			var ready []string
			for _, s := range slices.Items {
				for _, e := range s.Endpoints {
					if ptr.Deref(e.Conditions.Ready, false) {
						ready = append(ready, e.Addresses...)
					}
				}
			}
			g.Expect(ready).To(ConsistOf(ips))
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})
})

var _ = Describe("kube-scheduler", Label("scheduler"), func() {
	It("spreads pods with required anti-affinity one to a node, and leaves the one too many Pending", func(ctx context.Context) {
		ns := specs.NewNamespace(ctx, cluster)
		labels := map[string]string{"group": "exclusive"}
		affinity := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
				TopologyKey:   corev1.LabelHostname,
			}},
		}}
		var pods []*corev1.Pod
		for i := range nodes + 1 {
			pod := builders.MakePod(fmt.Sprintf("x-%d", i), ns).Container(builders.MakeContainer("main").Obj()).Obj()
			pod.Labels = labels
			pod.Spec.Affinity = affinity
			Expect(k8s.Create(ctx, pod)).To(Succeed())
			pods = append(pods, pod)
		}
		Eventually(func(g Gomega) {
			hosts := map[string]bool{}
			var pending []string
			for _, p := range pods {
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
				if p.Spec.NodeName == "" {
					cond := specs.Condition(p, corev1.PodScheduled)
					g.Expect(cond).NotTo(BeNil())
					g.Expect(cond.Reason).To(Equal(corev1.PodReasonUnschedulable))
					g.Expect(cond.Message).To(ContainSubstring("didn't match pod anti-affinity rules"))
					pending = append(pending, p.Name)
					continue
				}
				g.Expect(hosts).NotTo(HaveKey(p.Spec.NodeName), "two pods on %s", p.Spec.NodeName)
				hosts[p.Spec.NodeName] = true
			}
			g.Expect(hosts).To(HaveLen(nodes))
			g.Expect(pending).To(HaveLen(1))
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})
})

// waitRunning waits until the pod runs, and returns it as it then is.
func waitRunning(ctx context.Context, pod *corev1.Pod) *corev1.Pod {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
		g.Expect(pod.Status.PodIP).NotTo(BeEmpty())
	}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	return pod
}

// waitRolledOut waits until every replica of the Deployment's latest generation is available,
// as `kubectl rollout status` does.
func waitRolledOut(ctx context.Context, d *appsv1.Deployment) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
		want := *d.Spec.Replicas
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(want))
		g.Expect(d.Status.Replicas).To(Equal(want))
		g.Expect(d.Status.AvailableReplicas).To(Equal(want))
	}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
}
