package network_test

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/fakekubelet/network"
)

func TestHostsFile(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "js-rjob-0-0-x7k2p"},
		Spec: corev1.PodSpec{Hostname: "js-rjob-0-0", Subdomain: "js",
			HostAliases: []corev1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"foo", "bar"}}}}}
	got := string(network.HostsFile(pod, []string{"10.64.0.2"}, network.DefaultDomain))
	want := "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n" +
		"10.64.0.2\tjs-rjob-0-0.js.ns.svc.cluster.local\tjs-rjob-0-0\n\n# Entries added by HostAliases.\n10.1.2.3\tfoo\tbar\n"
	if got != want {
		t.Fatalf("hosts file:\n%s\nwant:\n%s", got, want)
	}
	pod.Spec = corev1.PodSpec{}
	if got := string(network.HostsFile(pod, []string{"10.64.0.2"}, network.DefaultDomain)); !strings.HasSuffix(got, "\n10.64.0.2\tjs-rjob-0-0-x7k2p\n") {
		t.Fatalf("without hostname and subdomain:\n%s", got)
	}
}

func TestHostname(t *testing.T) {
	long := strings.Repeat("a", 62) + "-b"
	for _, tc := range []struct {
		spec         corev1.PodSpec
		host, domain string
	}{
		{corev1.PodSpec{}, "pod", ""},
		{corev1.PodSpec{Hostname: "h"}, "h", ""},
		{corev1.PodSpec{Hostname: "h", Subdomain: "s"}, "h", "s.ns.svc.cluster.local"},
		{corev1.PodSpec{Hostname: "h", Subdomain: "s", HostnameOverride: ptr.To("over.ride")}, "over.ride", ""},
		{corev1.PodSpec{Hostname: long}, strings.Repeat("a", 62), ""},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod"}, Spec: tc.spec}
		if h, d := network.Hostname(pod, network.DefaultDomain); h != tc.host || d != tc.domain {
			t.Errorf("%+v: %q %q, want %q %q", tc.spec, h, d, tc.host, tc.domain)
		}
	}
}

func TestPodDNS(t *testing.T) {
	dns := netip.MustParseAddr("10.0.0.10")
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		dns  netip.Addr
		want string
	}{
		{"cluster first", corev1.PodSpec{}, dns,
			"search ns.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.0.0.10\noptions ndots:5\n"},
		{"cluster first without a cluster DNS falls back to default", corev1.PodSpec{}, netip.Addr{},
			"search .\nnameserver 127.0.0.1\n"},
		{"host network with cluster first is default", corev1.PodSpec{HostNetwork: true}, dns,
			"search .\nnameserver 127.0.0.1\n"},
		{"cluster first with host net", corev1.PodSpec{HostNetwork: true, DNSPolicy: corev1.DNSClusterFirstWithHostNet}, dns,
			"search ns.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.0.0.10\noptions ndots:5\n"},
		{"none with dnsConfig", corev1.PodSpec{DNSPolicy: corev1.DNSNone, DNSConfig: &corev1.PodDNSConfig{
			Nameservers: []string{"1.2.3.4"}, Searches: []string{"a.example"}, Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}}}}, dns,
			"search a.example\nnameserver 1.2.3.4\noptions ndots:2\n"},
		{"dnsConfig merges", corev1.PodSpec{DNSConfig: &corev1.PodDNSConfig{
			Nameservers: []string{"10.0.0.10", "1.2.3.4", "5.6.7.8", "9.9.9.9"}, Searches: []string{"cluster.local", "x"},
			Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("1")}, {Name: "edns0"}}}}, dns,
			"search ns.svc.cluster.local svc.cluster.local cluster.local x\nnameserver 10.0.0.10\nnameserver 1.2.3.4\nnameserver 5.6.7.8\noptions ndots:1 edns0\n"},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod"}, Spec: tc.spec}
		if got := string(network.PodDNS(pod, tc.dns, network.DefaultDomain).ResolvConf()); got != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.name, got, tc.want)
		}
	}
}
