package network_test

import (
	"context"
	"errors"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/fakekubelet/network"
	"github.com/restartbed/restartbed/fakekubelet/network/networktest"
)

var dnsIP = netip.MustParseAddr("10.0.0.10")

// cluster is a network over fixed Services and EndpointSlices.
func cluster(t *testing.T, reachable func(from, to string) bool, objs ...any) *network.Network {
	t.Helper()
	return networktest.New(t, network.Options{DNS: dnsIP, Reachable: reachable}, objs...)
}

func attach(t *testing.T, n *network.Network, ip, node string) *network.Interface {
	t.Helper()
	i, err := n.Attach(netip.MustParseAddr(ip), node)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func service(name, clusterIP string, ports ...corev1.ServicePort) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: clusterIP, Ports: ports}}
	if clusterIP != corev1.ClusterIPNone {
		svc.Spec.ClusterIPs = []string{clusterIP}
	}
	return svc
}

type endpoint struct {
	ip, hostname string
	ready        bool
}

func slice(svc string, port int32, eps ...endpoint) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: svc + "-abcde", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(""), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, e := range eps {
		ep := discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(e.ready)}}
		if e.hostname != "" {
			ep.Hostname = ptr.To(e.hostname)
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}

// echo accepts one connection on port and writes back what it reads, upper-cased.
func echo(t *testing.T, i *network.Interface, port uint16) {
	t.Helper()
	l, err := i.Listen(port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(io.LimitReader(c, 5))
				_, _ = c.Write([]byte(strings.ToUpper(string(b)) + " from " + c.LocalAddr().String()))
			}()
		}
	}()
}

func exchange(t *testing.T, from *network.Interface, addr string) (string, error) {
	t.Helper()
	c, err := from.Dial(context.Background(), addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello")); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}

func TestDial(t *testing.T) {
	cut := map[string]bool{"node-c": true}
	n := cluster(t, func(from, to string) bool { return !cut[from] && !cut[to] },
		service("web", "10.0.0.50", corev1.ServicePort{Port: 80}),
		slice("web", 8080, endpoint{ip: "10.64.1.2", ready: true}, endpoint{ip: "10.64.0.3", ready: false}),
		service("empty", "10.0.0.51", corev1.ServicePort{Port: 80}),
	)
	a := attach(t, n, "10.64.0.2", "node-a")
	b := attach(t, n, "10.64.1.2", "node-b")
	c := attach(t, n, "10.64.2.2", "node-c")
	notReady := attach(t, n, "10.64.0.3", "node-a")
	echo(t, b, 8080)
	echo(t, c, 8080)
	echo(t, notReady, 8080)
	echo(t, a, 9000)

	for _, tc := range []struct {
		name, addr string
		from       *network.Interface
		want       string
		wantErr    string
	}{
		{"pod to pod", "10.64.1.2:8080", a, "HELLO from 10.64.1.2:8080", ""},
		{"loopback", "127.0.0.1:9000", a, "HELLO from 127.0.0.1:9000", ""},
		{"service to its ready endpoint", "10.0.0.50:80", a, "HELLO from 10.64.1.2:8080", ""},
		{"service port not served", "10.0.0.50:81", a, "", "connection refused"},
		{"service without endpoints", "10.0.0.51:80", a, "", "connection refused"},
		{"nobody listens", "10.64.1.2:9999", a, "", "connection refused"},
		{"nothing is there", "10.64.9.9:8080", a, "", "no route to host"},
		{"into a partitioned node", "10.64.2.2:8080", a, "", "no route to host"},
		{"out of a partitioned node", "10.64.1.2:8080", c, "", "no route to host"},
		{"not an address", "web:80", a, "", "not an IP and port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := exchange(t, tc.from, tc.addr)
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case got != tc.want:
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestListen(t *testing.T) {
	n := cluster(t, nil)
	a := attach(t, n, "10.64.0.2", "node-a")
	b := attach(t, n, "10.64.0.3", "node-a")
	if _, err := n.Attach(a.Addr(), "node-b"); err == nil {
		t.Fatal("a second Attach of an address succeeded")
	}
	l, err := a.Listen(8081)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Listen(8081); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("second Listen: %v, want address already in use", err)
	}
	if !a.Listening(8081) || a.Listening(8082) {
		t.Fatal("Listening does not say which port is bound")
	}
	_ = l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	if _, err := a.Listen(8081); err != nil {
		t.Fatalf("Listen after Close: %v", err)
	}
	a.Close()
	if _, err := b.Dial(context.Background(), "10.64.0.2:8081"); err == nil || !strings.Contains(err.Error(), "no route to host") {
		t.Fatalf("Dial of a closed interface: %v", err)
	}
	if err := b.Ping(context.Background(), a.Addr()); err == nil {
		t.Fatal("a closed interface answers ping")
	}
	if _, err := n.Attach(a.Addr(), "node-b"); err != nil {
		t.Fatalf("the address of a closed interface cannot be attached again: %v", err)
	}
}

func TestServe(t *testing.T) {
	n := cluster(t, nil)
	a := attach(t, n, "10.64.0.2", "node-a")
	b := attach(t, n, "10.64.1.2", "node-b")
	stop, err := b.Serve(8081, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "barrier "+r.URL.Path+" from "+strings.Split(r.RemoteAddr, ":")[0])
	}))
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		return a.Dial(ctx, addr)
	}}}
	for range 3 { // keep-alive and new connections alike
		resp, err := client.Get("http://10.64.1.2:8081/ready")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if string(body) != "barrier /ready from 10.64.0.2" {
			t.Fatalf("body %q", body)
		}
	}
	stop()
	client.CloseIdleConnections() // an open connection is served to its end, as a real server's would be
	if _, err := client.Get("http://10.64.1.2:8081/ready"); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("after stop: %v", err)
	}
}

func TestPing(t *testing.T) {
	n := cluster(t, func(from, to string) bool { return from != "node-c" && to != "node-c" },
		service("web", "10.0.0.50", corev1.ServicePort{Port: 80}))
	a := attach(t, n, "10.64.0.2", "node-a")
	attach(t, n, "10.64.1.2", "node-b")
	attach(t, n, "10.64.2.2", "node-c")
	for addr, want := range map[string]bool{"10.64.1.2": true, "127.0.0.1": true, "10.64.0.2": true,
		"10.64.2.2": false, "10.64.9.9": false, "10.0.0.50": false} {
		if err := a.Ping(context.Background(), netip.MustParseAddr(addr)); (err == nil) != want {
			t.Errorf("Ping(%s) = %v, want reply %v", addr, err, want)
		}
	}
}

func TestQuery(t *testing.T) {
	n := cluster(t, nil,
		service("web", "10.0.0.50", corev1.ServicePort{Port: 80}),
		service("js", corev1.ClusterIPNone),
		slice("js", 0, endpoint{ip: "10.64.0.2", hostname: "js-rjob-0-0", ready: true},
			endpoint{ip: "10.64.1.2", hostname: "js-rjob-0-1", ready: true},
			endpoint{ip: "10.64.2.2", hostname: "js-rjob-0-2", ready: false}),
		service("none", corev1.ClusterIPNone),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ext"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}},
	)
	a := attach(t, n, "10.64.0.2", "node-a")
	for _, tc := range []struct {
		name string
		want string // addresses joined by space; "NXDOMAIN"
	}{
		{"web.ns.svc.cluster.local", "10.0.0.50"},
		{"WEB.ns.svc.cluster.local.", "10.0.0.50"},
		{"js.ns.svc.cluster.local", "10.64.0.2 10.64.1.2"},
		{"js-rjob-0-1.js.ns.svc.cluster.local", "10.64.1.2"},
		{"10-64-1-2.js.ns.svc.cluster.local", "10.64.1.2"},
		{"js-rjob-0-2.js.ns.svc.cluster.local", "NXDOMAIN"},  // not ready
		{"js-rjob-0-1.web.ns.svc.cluster.local", "NXDOMAIN"}, // endpoint names are a headless Service's
		{"none.ns.svc.cluster.local", "NXDOMAIN"},
		{"ext.ns.svc.cluster.local", ""},
		{"missing.ns.svc.cluster.local", "NXDOMAIN"},
		{"10-64-7-7.ns.pod.cluster.local", "10.64.7.7"},
		{"web.ns.svc", "NXDOMAIN"},
		{"example.com", "NXDOMAIN"},
	} {
		addrs, err := a.Query(context.Background(), dnsIP, tc.name)
		var got string
		if dnsErr := (*net.DNSError)(nil); errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			got = "NXDOMAIN"
		} else if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		} else {
			var s []string
			for _, a := range addrs {
				s = append(s, a.String())
			}
			got = strings.Join(s, " ")
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	_, err := a.Query(context.Background(), netip.MustParseAddr("127.0.0.1"), "web.ns.svc.cluster.local")
	if dnsErr := (*net.DNSError)(nil); !errors.As(err, &dnsErr) || !dnsErr.IsTimeout {
		t.Fatalf("a query to a server that is not there: %v, want a timeout", err)
	}
}

// TestServiceEndpointsFromTheNetworksSource: a Service's endpoint is picked from the network's
// own source, so that two networks seeded alike route alike, and every ready endpoint is used.
func TestServiceEndpointsFromTheNetworksSource(t *testing.T) {
	routes := func(seed uint64) []string {
		n := networktest.New(t, network.Options{DNS: dnsIP, Rand: rand.NewPCG(seed, 0)},
			service("web", "10.0.0.50", corev1.ServicePort{Port: 80}),
			slice("web", 8080, endpoint{ip: "10.64.1.2", ready: true}, endpoint{ip: "10.64.2.2", ready: true},
				endpoint{ip: "10.64.3.2", ready: true}))
		a := attach(t, n, "10.64.0.2", "node-a")
		for _, ip := range []string{"10.64.1.2", "10.64.2.2", "10.64.3.2"} {
			echo(t, attach(t, n, ip, "node-"+ip), 8080)
		}
		var got []string
		for range 30 {
			out, err := exchange(t, a, "10.0.0.50:80")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, strings.TrimPrefix(out, "HELLO from "))
		}
		return got
	}
	first, again := routes(7), routes(7)
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("the same seed routed otherwise (-first +again):\n%s", diff)
	}
	used := map[string]bool{}
	for _, r := range first {
		used[r] = true
	}
	if len(used) != 3 {
		t.Errorf("30 connections reached %v, want each of the 3 ready endpoints", slices.Sorted(maps.Keys(used)))
	}
	if other := routes(8); cmp.Equal(first, other) {
		t.Errorf("seeds 7 and 8 routed the same 30 connections alike: %v", first)
	}
}

// The kubernetes Service leads to the control plane's address, whatever endpoints the apiserver
// advertises, and on through that address's uplink; a partitioned node does not reach it.
func TestKubernetesServiceLeadsToTheControlPlane(t *testing.T) {
	cut := map[string]bool{"node-c": true}
	kubernetes := service("kubernetes", "10.0.0.1", corev1.ServicePort{Name: "https", Port: 443})
	kubernetes.Namespace = metav1.NamespaceDefault
	endpoints := slice("kubernetes", 6443, endpoint{ip: "192.0.2.2", ready: true})
	endpoints.Namespace, endpoints.Ports[0].Name = metav1.NamespaceDefault, ptr.To("https")
	controlPlane := netip.MustParseAddr("172.31.255.254")
	n := networktest.New(t, network.Options{DNS: dnsIP, APIServer: controlPlane, Reachable: func(from, to string) bool { return !cut[from] && !cut[to] }},
		kubernetes, endpoints)
	cp, err := n.Attach(controlPlane, "")
	if err != nil {
		t.Fatal(err)
	}
	apiserver := attach(t, n, "10.99.0.1", "elsewhere") // stands for the apiserver outside the network
	echo(t, apiserver, 6443)
	cp.SetUplink(func(ctx context.Context, _ uint16) (net.Conn, error) { return apiserver.Dial(ctx, "127.0.0.1:6443") })
	a := attach(t, n, "10.64.0.2", "node-a")
	c := attach(t, n, "10.64.2.2", "node-c")
	if got, err := exchange(t, a, "10.0.0.1:443"); err != nil || got != "HELLO from 127.0.0.1:6443" {
		t.Errorf("a pod to the kubernetes Service: %q, %v", got, err)
	}
	if _, err := exchange(t, c, "10.0.0.1:443"); err == nil || !strings.Contains(err.Error(), "no route to host") {
		t.Errorf("a partitioned node's pod to the kubernetes Service: %v, want no route to host", err)
	}

	// A reset closes the node's open connections to the apiserver, and only those; the ones
	// already closed are forgotten.
	open, err := a.Dial(context.Background(), "10.0.0.1:443")
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, ok := open.(interface{ CloseWrite() error }); !ok {
		t.Error("a connection to the apiserver lost its halves")
	}
	if got := n.ResetAPIServerConnections("node-c"); got != 0 {
		t.Errorf("node-c had %d connections to reset, want 0", got)
	}
	if got := n.ResetAPIServerConnections("node-a"); got != 1 {
		t.Errorf("node-a had %d connections to reset, want 1 (the closed exchange is forgotten)", got)
	}
	if _, err := open.Read(make([]byte, 1)); err == nil {
		t.Error("a read on a reset connection succeeded")
	}
}
