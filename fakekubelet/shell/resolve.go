package shell

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// The image's C library's resolver: /etc/hosts first, then the nameservers of /etc/resolv.conf
// with its search list and ndots, as glibc and musl apply them. Both files are the ones the
// kubelet wrote into the container (package network composes them).

// resolvConf is what the resolver reads from /etc/resolv.conf.
type resolvConf struct {
	servers []netip.Addr
	search  []string
	ndots   int
}

func (p *process) readResolvConf() resolvConf {
	conf := resolvConf{ndots: 1}
	data, _ := p.env.FS.ReadFile("/etc/resolv.conf") // none: no name server, as in a container without one
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if a, err := netip.ParseAddr(fields[1]); err == nil {
				conf.servers = append(conf.servers, a)
			}
		case "search", "domain":
			conf.search = fields[1:]
		case "options":
			for _, o := range fields[1:] {
				if v, ok := strings.CutPrefix(o, "ndots:"); ok {
					if n, err := strconv.Atoi(v); err == nil {
						conf.ndots = min(max(n, 0), 15)
					}
				}
			}
		}
	}
	return conf
}

// hostsEntry is a line of /etc/hosts.
type hostsEntry struct {
	addr  netip.Addr
	names []string
}

func (p *process) readHosts() []hostsEntry {
	data, _ := p.env.FS.ReadFile("/etc/hosts") // none: no static names
	var entries []hostsEntry
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		if a, err := netip.ParseAddr(fields[0]); err == nil {
			entries = append(entries, hostsEntry{addr: a, names: fields[1:]})
		}
	}
	return entries
}

// resolved is the answer to a lookup.
type resolved struct {
	// name is the canonical name: the hosts file's first name on the line, or the fully
	// qualified name the DNS answered for.
	name   string
	addrs  []netip.Addr
	server netip.Addr // the nameserver that answered; invalid for the hosts file or an address
}

// errNoServer is a lookup that no nameserver answered.
var errNoServer = errors.New("no servers could be reached")

// lookupHost resolves name to its IPv4 addresses: an address stands for itself; with hosts, the
// hosts file is read first. A name that does not exist is a *net.DNSError with IsNotFound.
func (p *process) lookupHost(ctx context.Context, name string, hosts bool) (resolved, error) {
	if a, err := netip.ParseAddr(name); err == nil {
		return resolved{name: name, addrs: []netip.Addr{a}}, nil
	}
	if hosts {
		var r resolved
		for _, e := range p.readHosts() {
			for _, n := range e.names {
				if strings.EqualFold(n, name) && e.addr.Is4() {
					if r.name == "" {
						r.name = e.names[0]
					}
					r.addrs = append(r.addrs, e.addr)
				}
			}
		}
		if len(r.addrs) > 0 {
			return r, nil
		}
	}
	return p.queryDNS(ctx, name, nil)
}

// queryDNS asks servers (nil: those of /etc/resolv.conf) for name, through resolv.conf's search
// list. An address is not looked up: it is not found.
func (p *process) queryDNS(ctx context.Context, name string, servers []netip.Addr) (resolved, error) {
	conf := p.readResolvConf()
	if servers != nil {
		conf.servers = servers
	}
	notFound := &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
	if p.env.Net == nil || len(conf.servers) == 0 {
		return resolved{}, &net.DNSError{Err: errNoServer.Error(), Name: name, IsTimeout: true}
	}
	if _, err := netip.ParseAddr(name); err == nil {
		notFound.Server = conf.servers[0].String()
		return resolved{}, notFound
	}
	var candidates []string
	absolute := strings.HasSuffix(name, ".")
	if absolute {
		candidates = []string{name}
	} else {
		var searched []string
		for _, s := range conf.search {
			if s != "." && s != "" {
				searched = append(searched, name+"."+strings.TrimSuffix(s, ".")+".")
			}
		}
		if strings.Count(name, ".") >= conf.ndots {
			candidates = append([]string{name + "."}, searched...)
		} else {
			candidates = append(searched, name+".")
		}
	}
	for _, fqdn := range candidates {
		answered := false
		for _, server := range conf.servers {
			addrs, err := p.env.Net.Query(ctx, server, fqdn)
			var dnsErr *net.DNSError
			switch {
			case err == nil:
				return resolved{name: strings.TrimSuffix(fqdn, "."), addrs: addrs, server: server}, nil
			case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
				notFound.Server = server.String()
				answered = true
			}
			if answered {
				break
			}
		}
		if !answered {
			return resolved{}, &net.DNSError{Err: errNoServer.Error(), Name: name, IsTimeout: true}
		}
	}
	return resolved{}, notFound
}

// firstIPv4 is the first IPv4 address of an answer.
func (r resolved) firstIPv4() (netip.Addr, bool) {
	for _, a := range r.addrs {
		if a.Is4() {
			return a, true
		}
	}
	return netip.Addr{}, false
}
