package network

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// DNSServiceName is the cluster DNS Service in kube-system, as kubeadm and kind install it.
const DNSServiceName = "kube-dns"

// EnsureDNSService makes sure the cluster has the kube-dns Service and returns its cluster IP,
// the nameserver the kubelets give pods. A new Service takes the tenth address of the Service
// range, as kubeadm's does (10.96.0.10 in its default range), or any address when that one is
// taken. Its selector matches no pod: restartbed answers for it.
func EnsureDNSService(ctx context.Context, client kubernetes.Interface) (netip.Addr, error) {
	svcs := client.CoreV1().Services(metav1.NamespaceSystem)
	if svc, err := svcs.Get(ctx, DNSServiceName, metav1.GetOptions{}); err == nil {
		return clusterIP(svc)
	} else if !apierrors.IsNotFound(err) {
		return netip.Addr{}, fmt.Errorf("network: reading the %s Service: %w", DNSServiceName, err)
	}
	want := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: DNSServiceName, Namespace: metav1.NamespaceSystem, Labels: map[string]string{
			"k8s-app": DNSServiceName, "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"k8s-app": DNSServiceName},
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
				{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9153)},
			},
		},
	}
	if k, err := client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{}); err == nil {
		if first, err := clusterIP(k); err == nil && first.Is4() {
			tenth := first
			for range 9 {
				tenth = tenth.Next()
			}
			want.Spec.ClusterIP = tenth.String()
		}
	}
	svc, err := svcs.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsInvalid(err) && want.Spec.ClusterIP != "" {
		want.Spec.ClusterIP = "" // the tenth address is someone else's
		svc, err = svcs.Create(ctx, want, metav1.CreateOptions{})
	}
	if apierrors.IsAlreadyExists(err) {
		svc, err = svcs.Get(ctx, DNSServiceName, metav1.GetOptions{})
	}
	if err != nil {
		return netip.Addr{}, fmt.Errorf("network: creating the %s Service: %w", DNSServiceName, err)
	}
	return clusterIP(svc)
}

func clusterIP(svc *corev1.Service) (netip.Addr, error) {
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("network: Service %s/%s has no cluster IP (%q)", svc.Namespace, svc.Name, svc.Spec.ClusterIP)
	}
	return ip, nil
}
