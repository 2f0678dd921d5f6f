package network

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/utils/ptr"
)

// DefaultDomain is the cluster domain, as kubeadm and kind configure it.
const DefaultDomain = "cluster.local"

// Options configure a Network.
type Options struct {
	// Domain is the cluster domain; default DefaultDomain.
	Domain string
	// DNS is the cluster DNS server's address: the kube-dns Service's cluster IP. The zero Addr
	// means the cluster has no DNS server; queries to it are not answered.
	DNS netip.Addr
	// Services and EndpointSlices are the control plane's, as an informer keeps them. Required.
	Services       corelisters.ServiceLister
	EndpointSlices discoverylisters.EndpointSliceLister
	// Reachable says whether packets pass between two nodes (a partition); nil: always. Traffic
	// within a node always passes.
	Reachable func(from, to string) bool
	// Rand picks a Service's endpoint for each connection, as kube-proxy picks at random; give
	// it a seeded source for a repeatable run. Default: a source seeded at random.
	Rand rand.Source
	// Elsewhere reaches the addresses this network does not hold: those of the nodes and pods
	// another process runs (a shard of a group, package relay). Nil: they are unreachable.
	Elsewhere Elsewhere
	// APIServer is the control plane's address on the network: connections to the kubernetes
	// Service (default namespace) go there, as kube-proxy sends them to the apiserver, whatever
	// address the apiserver advertises in its endpoints (one of its host's, which pods here do
	// not reach). The zero Addr: that Service is routed as any other.
	APIServer netip.Addr
}

// Elsewhere is the way to the part of the network another process holds. Its errors wrap
// ErrRefused or ErrUnreachable as a kernel's would say them.
type Elsewhere interface {
	// Holder is the node, run by another process, whose pod or own address addr is; false when
	// no process holds addr.
	Holder(addr netip.Addr) (node string, ok bool)
	// Dial connects src, an address of node from on this network ("" for the control plane),
	// to dst.
	Dial(ctx context.Context, from string, src, dst netip.AddrPort) (net.Conn, error)
	// Ping reports whether dst answers an ICMP echo from node from: nil when it does.
	Ping(ctx context.Context, from string, dst netip.Addr) error
}

// Network is the address space of the emulated cluster.
type Network struct {
	opts Options

	mu    sync.Mutex
	hosts map[netip.Addr]*Interface

	randMu sync.Mutex
	rand   *rand.Rand

	// toAPIServer are the open connections to Options.APIServer, by the node of the interface
	// that dialled them: what ResetAPIServerConnections closes.
	toAPIServerMu sync.Mutex
	toAPIServer   map[string]map[*apiServerConn]struct{}
}

// apiServerConn is a connection to the apiserver, forgotten by its network when it closes.
type apiServerConn struct {
	net.Conn
	n    *Network
	node string
	once sync.Once
}

// CloseWrite shuts down the sending half, as the connection it wraps does (a TCP connection or an
// in-memory one); a connection without halves cannot.
func (c *apiServerConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// CloseRead shuts down the receiving half, as CloseWrite does the sending one.
func (c *apiServerConn) CloseRead() error {
	if cr, ok := c.Conn.(interface{ CloseRead() error }); ok {
		return cr.CloseRead()
	}
	return errors.ErrUnsupported
}

func (c *apiServerConn) Close() error {
	c.once.Do(func() {
		c.n.toAPIServerMu.Lock()
		delete(c.n.toAPIServer[c.node], c)
		c.n.toAPIServerMu.Unlock()
	})
	return c.Conn.Close()
}

// trackAPIServer keeps c, dialled to the apiserver from node, for ResetAPIServerConnections.
func (n *Network) trackAPIServer(node string, c net.Conn) net.Conn {
	tc := &apiServerConn{Conn: c, n: n, node: node}
	n.toAPIServerMu.Lock()
	defer n.toAPIServerMu.Unlock()
	if n.toAPIServer == nil {
		n.toAPIServer = map[string]map[*apiServerConn]struct{}{}
	}
	if n.toAPIServer[node] == nil {
		n.toAPIServer[node] = map[*apiServerConn]struct{}{}
	}
	n.toAPIServer[node][tc] = struct{}{}
	return tc
}

// ResetAPIServerConnections closes every connection the node's addresses hold open to the
// apiserver (Options.APIServer), as a reset would: the process reading one gets an error and
// connects again. It returns how many it closed.
func (n *Network) ResetAPIServerConnections(node string) int {
	n.toAPIServerMu.Lock()
	conns := n.toAPIServer[node]
	delete(n.toAPIServer, node)
	n.toAPIServerMu.Unlock()
	for c := range conns {
		_ = c.Conn.Close()
	}
	return len(conns)
}

// New returns a network with no address attached.
func New(opts Options) (*Network, error) {
	if opts.Services == nil || opts.EndpointSlices == nil {
		return nil, errors.New("network: Options.Services and Options.EndpointSlices are required")
	}
	if opts.Domain == "" {
		opts.Domain = DefaultDomain
	}
	if opts.Reachable == nil {
		opts.Reachable = func(string, string) bool { return true }
	}
	if opts.Rand == nil {
		opts.Rand = rand.NewPCG(rand.Uint64(), rand.Uint64())
	}
	return &Network{opts: opts, hosts: map[netip.Addr]*Interface{}, rand: rand.New(opts.Rand)}, nil
}

// Domain is the cluster domain.
func (n *Network) Domain() string { return n.opts.Domain }

// DNS is the cluster DNS server's address; the zero Addr when there is none.
func (n *Network) DNS() netip.Addr { return n.opts.DNS }

// Interface is one address on the network: a pod sandbox's or a node's.
type Interface struct {
	net  *Network
	addr netip.Addr
	node string

	// mu guards the fields below; it is never held while n.mu is taken.
	mu        sync.Mutex
	closed    bool
	listeners map[uint16]acceptor
	nextPort  uint16
	// uplink reaches the ports no listener of the process holds; nil: they refuse.
	uplink Uplink
}

// Uplink connects to a port of an interface's address outside the process: in the network
// namespace of a pod that runs a host binary (package hostproc), where a real process may listen.
// Its error for a port nobody listens on is a refusal.
type Uplink func(ctx context.Context, port uint16) (net.Conn, error)

// SetUplink makes the interface reach the ports it has no listener for through u (nil: none).
func (i *Interface) SetUplink(u Uplink) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.uplink = u
}

// acceptor takes the server side of a new connection.
type acceptor interface {
	accept(net.Conn) error
	close()
}

// Attach puts addr on the network, on node. An address is attached once until its interface is
// closed.
func (n *Network) Attach(addr netip.Addr, node string) (*Interface, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, taken := n.hosts[addr]; taken {
		return nil, fmt.Errorf("network: address %s is already attached", addr)
	}
	i := &Interface{net: n, addr: addr, node: node, listeners: map[uint16]acceptor{}, nextPort: 32768}
	n.hosts[addr] = i
	return i, nil
}

// Addr is the interface's address.
func (i *Interface) Addr() netip.Addr { return i.addr }

// Close takes the address off the network: its listeners stop accepting and nothing reaches it
// any more. Established connections stay open until their ends close them.
func (i *Interface) Close() {
	i.net.mu.Lock()
	if i.net.hosts[i.addr] == i {
		delete(i.net.hosts, i.addr)
	}
	i.net.mu.Unlock()
	i.mu.Lock()
	i.closed = true
	ls := i.listeners
	i.listeners = map[uint16]acceptor{}
	i.mu.Unlock()
	for _, l := range ls {
		l.close()
	}
}

// Listen opens a TCP listener on port of the interface's address.
func (i *Interface) Listen(port uint16) (net.Listener, error) {
	l := &listener{iface: i, port: port, conns: make(chan net.Conn), done: make(chan struct{})}
	if err := i.bind(port, l); err != nil {
		return nil, err
	}
	return l, nil
}

// Serve serves HTTP with h on port: every connection to it gets its own HTTP server. stop unbinds
// the port; connections already open are served to their end.
func (i *Interface) Serve(port uint16, h http.Handler) (stop func(), err error) {
	a := &httpAcceptor{handler: h}
	if err := i.bind(port, a); err != nil {
		return nil, err
	}
	return func() { i.unbind(port, a) }, nil
}

// ServeTLS is Serve behind TLS with cfg (HTTP/1.1 only, so that clients can upgrade to a
// stream, as kubectl exec and port-forward do).
func (i *Interface) ServeTLS(port uint16, h http.Handler, cfg *tls.Config) (stop func(), err error) {
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"http/1.1"}
	a := &httpAcceptor{handler: h, tls: cfg}
	if err := i.bind(port, a); err != nil {
		return nil, err
	}
	return func() { i.unbind(port, a) }, nil
}

func (i *Interface) bind(port uint16, a acceptor) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if port == 0 {
		return fmt.Errorf("listen tcp %s: port 0 is not supported", i.addr)
	}
	if i.closed {
		return &net.OpError{Op: "listen", Net: "tcp", Addr: tcpAddr(i.addr, port), Err: errors.New("cannot assign requested address")}
	}
	if _, taken := i.listeners[port]; taken {
		return &net.OpError{Op: "listen", Net: "tcp", Addr: tcpAddr(i.addr, port), Err: errors.New("bind: address already in use")}
	}
	i.listeners[port] = a
	return nil
}

func (i *Interface) unbind(port uint16, a acceptor) {
	i.mu.Lock()
	if i.listeners[port] == a {
		delete(i.listeners, port)
	}
	i.mu.Unlock()
	a.close()
}

// Listening reports whether something accepts connections on port: a listener of the process,
// or one the uplink connects to (it opens a connection and closes it).
func (i *Interface) Listening(port uint16) bool {
	i.mu.Lock()
	_, ok := i.listeners[port]
	up := i.uplink
	i.mu.Unlock()
	if ok || up == nil {
		return ok
	}
	c, err := up(context.Background(), port)
	if err != nil {
		return false
	}
	_ = c.Close() // the connection is refused either way
	return true
}

func (i *Interface) ephemeralPort() uint16 {
	i.mu.Lock()
	defer i.mu.Unlock()
	p := i.nextPort
	if i.nextPort++; i.nextPort == 0 || i.nextPort > 60999 {
		i.nextPort = 32768
	}
	return p
}

// Errors as the kernel reports them.
var (
	ErrRefused     = errors.New("connect: connection refused")
	ErrUnreachable = errors.New("connect: no route to host")
)

// Dial opens a TCP connection from the interface to address ("ip:port"). A Service's cluster IP
// reaches one of its ready endpoints, chosen at random as kube-proxy's rules choose; an address
// that is not up, or is cut off from this one, is unreachable; a port nobody listens on refuses.
func (i *Interface) Dial(ctx context.Context, address string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("address %s: not an IP and port", address)}
	}
	opErr := func(err error) error {
		return &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(ap), Err: err}
	}
	if err := ctx.Err(); err != nil {
		return nil, opErr(err)
	}
	target := ap
	if svcTarget, isService, err := i.net.route(ap); isService {
		if err != nil {
			return nil, opErr(err)
		}
		target = svcTarget
	}
	localIP := i.addr
	if ap.Addr().IsLoopback() {
		localIP = ap.Addr()
	}
	local := netip.AddrPortFrom(localIP, i.ephemeralPort())
	peer, here := i.net.peer(i, target.Addr())
	if !here && i.net.elsewhere(i, target.Addr()) {
		c, err := i.net.opts.Elsewhere.Dial(ctx, i.node, local, target)
		if err != nil {
			return nil, opErr(err)
		}
		return c, nil
	}
	if peer == nil {
		return nil, opErr(ErrUnreachable)
	}
	c, err := peer.connect(ctx, local, ap, target)
	if err != nil {
		return nil, opErr(err)
	}
	if i.net.opts.APIServer.IsValid() && target.Addr() == i.net.opts.APIServer {
		c = i.net.trackAPIServer(i.node, c)
	}
	return c, nil
}

// connect hands the server side of a new connection from local, which dialled dialled (a
// Service's address, or target itself), to whatever listens on target's port of the interface:
// a listener of the process, else the uplink.
func (i *Interface) connect(ctx context.Context, local, dialled, target netip.AddrPort) (net.Conn, error) {
	i.mu.Lock()
	a := i.listeners[target.Port()]
	up := i.uplink
	i.mu.Unlock()
	if a == nil && up != nil {
		c, err := up(ctx, target.Port())
		if err != nil {
			return nil, ErrRefused
		}
		return c, nil
	}
	if a == nil {
		return nil, ErrRefused
	}
	cc, sc := connPair(net.TCPAddrFromAddrPort(local), net.TCPAddrFromAddrPort(dialled), net.TCPAddrFromAddrPort(target))
	if err := a.accept(sc); err != nil {
		_ = cc.Close()
		_ = sc.Close()
		return nil, ErrRefused
	}
	return cc, nil
}

// Accept connects src, an address of node from that another process holds, to dst on this
// network, as Elsewhere's far end: dst must be attached here and its node not cut off from
// from's. The error wraps ErrUnreachable or ErrRefused.
func (n *Network) Accept(ctx context.Context, from string, src, dst netip.AddrPort) (net.Conn, error) {
	to := n.reachable(from, dst.Addr())
	if to == nil {
		return nil, ErrUnreachable
	}
	return to.connect(ctx, src, dst, dst)
}

// Answers reports whether dst, attached here, answers an ICMP echo from node from, which
// another process holds.
func (n *Network) Answers(from string, dst netip.Addr) bool { return n.reachable(from, dst) != nil }

// reachable is the interface at addr if it is attached here and node from may reach its node.
func (n *Network) reachable(from string, addr netip.Addr) *Interface {
	n.mu.Lock()
	to := n.hosts[addr]
	n.mu.Unlock()
	if to == nil || (to.node != from && !n.opts.Reachable(from, to.node)) {
		return nil
	}
	return to
}

// Ping sends an ICMP echo to addr: nil when a reply comes back. A Service's cluster IP answers
// no echo (kube-proxy's iptables rules route TCP and UDP only).
func (i *Interface) Ping(ctx context.Context, addr netip.Addr) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	peer, here := i.net.peer(i, addr)
	if !here && i.net.serviceAt(addr) == nil && i.net.elsewhere(i, addr) {
		return i.net.opts.Elsewhere.Ping(ctx, i.node, addr)
	}
	if peer == nil {
		return fmt.Errorf("no reply from %s", addr)
	}
	return nil
}

// Reaches reports whether a connection from the interface to addr would get through now: addr is
// up here and its node is not cut off from this one's (a partition). An address another process
// holds (Options.Elsewhere) is not asked: it does not reach.
func (i *Interface) Reaches(addr netip.Addr) bool {
	peer, _ := i.net.peer(i, addr)
	return peer != nil
}

// peer is the interface at addr as seen from i: nil when nothing is up there or the two nodes
// cannot reach each other. The loopback address is i itself. here is false when addr is not
// attached to this network at all.
func (n *Network) peer(from *Interface, addr netip.Addr) (to *Interface, here bool) {
	if addr.IsLoopback() || addr == from.addr {
		return from, true
	}
	n.mu.Lock()
	to = n.hosts[addr]
	n.mu.Unlock()
	if to == nil {
		return nil, false
	}
	if to.node != from.node && !n.opts.Reachable(from.node, to.node) {
		return nil, true
	}
	return to, true
}

// elsewhere reports whether addr, not attached here, is held by another process (Options.Elsewhere)
// for a node that from's may reach: both ends of a connection between processes ask, each for
// its own node's partition.
func (n *Network) elsewhere(from *Interface, addr netip.Addr) bool {
	if n.opts.Elsewhere == nil {
		return false
	}
	node, ok := n.opts.Elsewhere.Holder(addr)
	return ok && n.opts.Reachable(from.node, node)
}

// route maps a Service's cluster IP and port to one of its ready endpoints. isService is false
// when ap is not a Service's; err says why a Service's address leads nowhere.
func (n *Network) route(ap netip.AddrPort) (target netip.AddrPort, isService bool, err error) {
	svc := n.serviceAt(ap.Addr())
	if svc == nil {
		return netip.AddrPort{}, false, nil
	}
	idx := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
		return p.Port == int32(ap.Port()) && (p.Protocol == "" || p.Protocol == corev1.ProtocolTCP)
	})
	if idx < 0 {
		return netip.AddrPort{}, true, ErrRefused
	}
	if svc.Namespace == metav1.NamespaceDefault && svc.Name == "kubernetes" && n.opts.APIServer.IsValid() {
		return netip.AddrPortFrom(n.opts.APIServer, ap.Port()), true, nil
	}
	port := svc.Spec.Ports[idx]
	var targets []netip.AddrPort
	for _, slice := range n.slicesOf(svc) {
		sp := slices.IndexFunc(slice.Ports, func(p discoveryv1.EndpointPort) bool {
			return ptr.Deref(p.Name, "") == port.Name && (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP) && p.Port != nil
		})
		if sp < 0 {
			continue
		}
		for _, ep := range slice.Endpoints {
			if !ready(ep) {
				continue
			}
			for _, a := range ep.Addresses {
				if ip, err := netip.ParseAddr(a); err == nil {
					targets = append(targets, netip.AddrPortFrom(ip, uint16(*slice.Ports[sp].Port)))
				}
			}
		}
	}
	if len(targets) == 0 {
		return netip.AddrPort{}, true, ErrRefused // kube-proxy rejects: the Service has no endpoints
	}
	n.randMu.Lock()
	defer n.randMu.Unlock()
	return targets[n.rand.IntN(len(targets))], true, nil
}

// serviceAt is the Service whose cluster IP is addr, or nil.
func (n *Network) serviceAt(addr netip.Addr) *corev1.Service {
	svcs, err := n.opts.Services.List(labels.Everything())
	if err != nil {
		return nil
	}
	for _, svc := range svcs {
		for _, ip := range svc.Spec.ClusterIPs {
			if a, err := netip.ParseAddr(ip); err == nil && a == addr {
				return svc
			}
		}
	}
	return nil
}

// slicesOf lists the EndpointSlices of a Service.
func (n *Network) slicesOf(svc *corev1.Service) []*discoveryv1.EndpointSlice {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name})
	slices, err := n.opts.EndpointSlices.EndpointSlices(svc.Namespace).List(sel)
	if err != nil {
		return nil
	}
	return slices
}

// ready is CoreDNS's and kube-proxy's reading of an endpoint's condition: unset means ready.
func ready(ep discoveryv1.Endpoint) bool {
	return ep.Conditions.Ready == nil || *ep.Conditions.Ready
}

func tcpAddr(ip netip.Addr, port uint16) *net.TCPAddr {
	return net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, port))
}

// listener is a net.Listener bound to one port of an interface.
type listener struct {
	iface     *Interface
	port      uint16
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func (l *listener) accept(c net.Conn) error {
	select {
	case l.conns <- c:
		return nil
	case <-l.done:
		return net.ErrClosed
	}
}

func (l *listener) close() { l.closeOnce.Do(func() { close(l.done) }) }

// Accept waits for the next connection.
func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: net.ErrClosed}
	}
}

// Close unbinds the port.
func (l *listener) Close() error {
	l.iface.unbind(l.port, l)
	return nil
}

// Addr is the address the listener is bound to.
func (l *listener) Addr() net.Addr { return tcpAddr(l.iface.addr, l.port) }

// httpAcceptor serves HTTP on every connection it is given, behind TLS when tls is set.
type httpAcceptor struct {
	handler http.Handler
	tls     *tls.Config
}

func (a *httpAcceptor) accept(c net.Conn) error {
	srv := &http.Server{Handler: a.handler, ReadHeaderTimeout: httpReadHeaderTimeout, TLSConfig: a.tls,
		ErrorLog: log.New(io.Discard, "", 0)}
	l := &oneConn{conn: c, done: make(chan struct{})}
	if a.tls != nil {
		go func() { _ = srv.ServeTLS(l, "", "") }()
		return nil
	}
	go func() { _ = srv.Serve(l) }()
	return nil
}

func (a *httpAcceptor) close() {}

// httpReadHeaderTimeout bounds a client that connects and sends nothing.
const httpReadHeaderTimeout = 30 * time.Second

// oneConn is a listener that yields one connection, then blocks until that connection closes.
type oneConn struct {
	conn net.Conn
	once sync.Once
	done chan struct{}
}

func (o *oneConn) Accept() (net.Conn, error) {
	var c net.Conn
	o.once.Do(func() { c = &closeNotify{Conn: o.conn, done: o.done} })
	if c != nil {
		return c, nil
	}
	<-o.done
	return nil, net.ErrClosed
}

func (o *oneConn) Close() error   { return nil }
func (o *oneConn) Addr() net.Addr { return o.conn.LocalAddr() }

// closeNotify closes done when the connection is closed.
type closeNotify struct {
	net.Conn
	done chan struct{}
	once sync.Once
}

func (c *closeNotify) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}
