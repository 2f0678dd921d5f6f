package network

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Query asks the DNS server at server for the addresses of name, a fully qualified name, from
// this interface, as a resolver sends one question. The answer comes from the cluster DNS
// server when server is its address and it is reachable; a name it has no record for is a
// *net.DNSError with IsNotFound; a server that does not answer is one with IsTimeout.
//
// The server answers as CoreDNS's kubernetes plugin does with the "pods insecure" setting that
// kubeadm and kind deploy:
//
//	<service>.<namespace>.svc.<domain>             the cluster IP; for a headless Service its ready endpoints
//	<hostname>.<service>.<namespace>.svc.<domain>  a headless Service's ready endpoint with that hostname (or dashed IP)
//	<a-b-c-d>.<namespace>.pod.<domain>             a.b.c.d
//
// An ExternalName Service answers its CNAME, which leads nowhere here. Names outside the cluster
// domain are not found: CoreDNS would forward them, and nothing leaves restartbed's process.
func (i *Interface) Query(ctx context.Context, server netip.Addr, name string) ([]netip.Addr, error) {
	dnsErr := &net.DNSError{Name: name, Server: server.String()}
	if err := ctx.Err(); err != nil {
		dnsErr.Err, dnsErr.IsTimeout = err.Error(), true
		return nil, dnsErr
	}
	if !server.IsValid() || server != i.net.opts.DNS {
		dnsErr.Err, dnsErr.IsTimeout = "connection refused", true
		return nil, dnsErr
	}
	addrs, found := i.net.lookup(name)
	if !found {
		dnsErr.Err, dnsErr.IsNotFound = "no such host", true
		return nil, dnsErr
	}
	return addrs, nil
}

// lookup answers name as the cluster DNS server; found is false for NXDOMAIN. An ExternalName
// Service is found with no address.
func (n *Network) lookup(name string) (addrs []netip.Addr, found bool) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	rest, ok := strings.CutSuffix(name, "."+n.opts.Domain)
	if !ok {
		return nil, false
	}
	labels := strings.Split(rest, ".")
	switch {
	case len(labels) == 3 && labels[2] == "pod":
		ip, err := netip.ParseAddr(strings.ReplaceAll(labels[0], "-", "."))
		if err != nil || !ip.Is4() {
			return nil, false
		}
		return []netip.Addr{ip}, true
	case len(labels) == 3 && labels[2] == "svc":
		return n.serviceRecord(labels[1], labels[0], "")
	case len(labels) == 4 && labels[3] == "svc":
		return n.serviceRecord(labels[2], labels[1], labels[0])
	}
	return nil, false
}

// serviceRecord answers for a Service, or for one endpoint of a headless Service when host is
// set.
func (n *Network) serviceRecord(namespace, name, host string) ([]netip.Addr, bool) {
	svc, err := n.opts.Services.Services(namespace).Get(name)
	if err != nil { // NotFound, or a lister that cannot answer: no record
		return nil, false
	}
	headless := svc.Spec.ClusterIP == corev1.ClusterIPNone
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		return nil, host == ""
	case !headless && host == "":
		var addrs []netip.Addr
		for _, ip := range svc.Spec.ClusterIPs {
			if a, err := netip.ParseAddr(ip); err == nil {
				addrs = append(addrs, a)
			}
		}
		return addrs, true
	case !headless:
		return nil, false
	}
	var addrs []netip.Addr
	for _, slice := range n.slicesOf(svc) {
		for _, ep := range slice.Endpoints {
			if !ready(ep) {
				continue
			}
			for _, a := range ep.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil {
					continue
				}
				if host == "" || ptr.Deref(ep.Hostname, "") == host || strings.ReplaceAll(a, ".", "-") == host {
					addrs = append(addrs, ip)
				}
			}
		}
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	if len(addrs) == 0 {
		return nil, false // CoreDNS: a headless Service or endpoint name without a ready address is NXDOMAIN
	}
	return addrs, true
}
