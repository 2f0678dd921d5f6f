package network

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// What the kubelet writes for a pod's names (pkg/kubelet/kubelet_pods.go
// GeneratePodHostNameAndDomain and managedHostsFileContent; pkg/kubelet/network/dns/dns.go
// GetPodDNS), and the files containerd gives the container from it.

// Paths of the files every container gets, unless it mounts a volume there.
const (
	HostsPath      = "/etc/hosts"
	ResolvConfPath = "/etc/resolv.conf"
	HostnamePath   = "/etc/hostname"
)

// The apiserver's limits on a pod's DNS configuration (pkg/apis/core/validation), which the
// kubelet applies again to what it composes.
const (
	maxNameservers     = 3
	maxSearchPaths     = 32
	maxSearchListChars = 2048
	maxSearchPathLen   = 253
	maxHostnameLen     = 63
)

// Hostname is the pod's hostname and, when it has a subdomain, its domain
// ("<subdomain>.<namespace>.svc.<domain>"): spec.hostnameOverride, else spec.hostname, else the
// pod's name, cut to 63 characters.
func Hostname(pod *corev1.Pod, domain string) (hostname, hostDomain string) {
	if pod.Spec.HostnameOverride != nil && *pod.Spec.HostnameOverride != "" {
		return truncateHostname(*pod.Spec.HostnameOverride), ""
	}
	hostname = pod.Name
	if pod.Spec.Hostname != "" {
		hostname = pod.Spec.Hostname
	}
	if pod.Spec.Subdomain != "" {
		hostDomain = fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, domain)
	}
	return truncateHostname(hostname), hostDomain
}

func truncateHostname(h string) string {
	if len(h) <= maxHostnameLen {
		return h
	}
	return strings.TrimRight(h[:maxHostnameLen], "-.")
}

// HostsFile is the kubelet-managed /etc/hosts of a pod with the given addresses.
func HostsFile(pod *corev1.Pod, podIPs []string, domain string) []byte {
	hostname, hostDomain := Hostname(pod, domain)
	var b strings.Builder
	b.WriteString("# Kubernetes-managed hosts file.\n")
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range podIPs {
		if hostDomain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, hostDomain, hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return []byte(b.String())
}

// DNSConfig is a pod's resolver configuration.
type DNSConfig struct {
	Servers  []string
	Searches []string
	Options  []string
}

// PodDNS composes the pod's resolver configuration as the kubelet does. The emulated nodes have
// no resolv.conf of their own (the kubelet's --resolv-conf=""), so dnsPolicy Default gives the
// loopback nameserver and the root search, and ClusterFirst without a cluster DNS server falls
// back to it. A host-network pod with ClusterFirst is Default, as in the kubelet.
func PodDNS(pod *corev1.Pod, clusterDNS netip.Addr, domain string) DNSConfig {
	var cfg DNSConfig
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = corev1.DNSClusterFirst
	}
	if policy == corev1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = corev1.DNSDefault
	}
	switch {
	case policy == corev1.DNSNone:
	case (policy == corev1.DNSClusterFirst || policy == corev1.DNSClusterFirstWithHostNet) && clusterDNS.IsValid():
		cfg.Servers = []string{clusterDNS.String()}
		cfg.Searches = []string{pod.Namespace + ".svc." + domain, "svc." + domain, domain}
		cfg.Options = []string{"ndots:5"}
	default:
		cfg.Servers = []string{"127.0.0.1"}
		cfg.Searches = []string{"."}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Servers = uniq(append(cfg.Servers, dc.Nameservers...))
		cfg.Searches = uniq(append(cfg.Searches, dc.Searches...))
		cfg.Options = mergeOptions(cfg.Options, dc.Options)
	}
	if len(cfg.Servers) > maxNameservers {
		cfg.Servers = cfg.Servers[:maxNameservers]
	}
	cfg.Searches = fitSearches(cfg.Searches)
	return cfg
}

// ResolvConf renders a DNS configuration as containerd writes the container's /etc/resolv.conf.
func (c DNSConfig) ResolvConf() []byte {
	var b strings.Builder
	if len(c.Searches) > 0 {
		b.WriteString("search " + strings.Join(c.Searches, " ") + "\n")
	}
	for _, s := range c.Servers {
		b.WriteString("nameserver " + s + "\n")
	}
	if len(c.Options) > 0 {
		b.WriteString("options " + strings.Join(c.Options, " ") + "\n")
	}
	return []byte(b.String())
}

func uniq(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// mergeOptions adds the pod's options to the defaults; a pod's option replaces one of the same
// name. The kubelet goes through a map; restartbed keeps the order for a stable file.
func mergeOptions(base []string, extra []corev1.PodDNSConfigOption) []string {
	out := slices.Clone(base)
	for _, o := range extra {
		opt := o.Name
		if o.Value != nil && *o.Value != "" {
			opt += ":" + *o.Value
		}
		if i := slices.IndexFunc(out, func(s string) bool { return strings.SplitN(s, ":", 2)[0] == o.Name }); i >= 0 {
			out[i] = opt
		} else {
			out = append(out, opt)
		}
	}
	return out
}

// fitSearches applies the kubelet's limits: at most 32 paths, none longer than 253 characters,
// 2048 characters in all (the last ones go first).
func fitSearches(s []string) []string {
	if len(s) > maxSearchPaths {
		s = s[:maxSearchPaths]
	}
	s = slices.DeleteFunc(slices.Clone(s), func(p string) bool { return len(p) > maxSearchPathLen })
	for len(s) > 0 && len(strings.Join(s, " ")) > maxSearchListChars {
		s = s[:len(s)-1]
	}
	return s
}
