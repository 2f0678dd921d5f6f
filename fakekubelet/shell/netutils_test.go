package shell

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/fakekubelet/network"
	"github.com/restartbed/restartbed/fakekubelet/network/networktest"
	"github.com/restartbed/restartbed/internal/pki"
)

// netEnv is a container of pod js-rjob-0-0 in namespace ns, on a network where the headless
// Service js has two ready endpoints (itself and js-rjob-0-1, which serves HTTP on 8081 and
// whose Service web forwards port 80 to it).
func netEnv(t *testing.T) (Env, *strings.Builder) {
	t.Helper()
	dns := netip.MustParseAddr("10.0.0.10")
	n := networktest.New(t, network.Options{DNS: dns},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "js"}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.50",
			ClusterIPs: []string{"10.0.0.50"}, Ports: []corev1.ServicePort{{Port: 80}}}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "js-1", Labels: map[string]string{discoveryv1.LabelServiceName: "js"}},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.64.0.2"}, Hostname: ptr.To("js-rjob-0-0"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
				{Addresses: []string{"10.64.1.2"}, Hostname: ptr.To("js-rjob-0-1"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			Ports:     []discoveryv1.EndpointPort{{Name: ptr.To(""), Port: ptr.To[int32](8081)}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.64.1.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}},
	)
	self, _ := n.Attach(netip.MustParseAddr("10.64.0.2"), "node-a")
	peer, _ := n.Attach(netip.MustParseAddr("10.64.1.2"), "node-b")
	if _, err := peer.Serve(8081, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ua" {
			_, _ = io.WriteString(w, r.UserAgent()+" "+r.Header.Get("X-Test")+"\n")
			return
		}
		if r.URL.Path != "/ready" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})); err != nil {
		t.Fatal(err)
	}

	// An HTTPS server on js-rjob-0-1.js:8443, its certificate signed by a CA whose certificate the
	// container has at /ca.crt (as a pod has its service account's ca.crt).
	ca, err := pki.NewCA("test-ca", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Serving("js-rjob-0-1", []string{"js-rjob-0-1.js.ns.svc.cluster.local"}, net.ParseIP("10.64.1.2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := peer.ServeTLS(8443, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "secure "+r.Header.Get("Authorization")+"\n")
	}), &tls.Config{Certificates: []tls.Certificate{serving.TLS}, MinVersion: tls.VersionTLS12}); err != nil {
		t.Fatal(err)
	}

	env, _, _ := newEnv(t)
	_ = env.FS.WriteFile("/ca.crt", ca.CertPEM())
	var out strings.Builder
	env.Stdout, env.Stderr, env.Net = &out, &out, self
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "js-rjob-0-0-abcde"},
		Spec: corev1.PodSpec{Hostname: "js-rjob-0-0", Subdomain: "js"}}
	_ = env.FS.WriteFile(network.HostsPath, network.HostsFile(pod, []string{"10.64.0.2"}, network.DefaultDomain))
	_ = env.FS.WriteFile(network.ResolvConfPath, network.PodDNS(pod, dns, network.DefaultDomain).ResolvConf())
	return env, &out
}

func TestNetworkUtilities(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		code         int
		output       string
	}{
		{"ping a peer by hostname.subdomain", "ping -c 1 js-rjob-0-1.js", 0,
			"PING js-rjob-0-1.js (10.64.1.2): 56 data bytes\n64 bytes from 10.64.1.2: seq=0 ttl=64 time=0.100 ms\n\n" +
				"--- js-rjob-0-1.js ping statistics ---\n1 packets transmitted, 1 packets received, 0% packet loss\nround-trip min/avg/max = 0.100/0.100/0.100 ms\n"},
		{"JobSet's e2e ping loop", `for pod in js-rjob-0-0.js js-rjob-0-1.js; do until ping -c 1 $pod > /dev/null 2>&1; do sleep 1; done; echo "pinged $pod"; done`, 0,
			"pinged js-rjob-0-0.js\npinged js-rjob-0-1.js\n"},
		{"ping an unknown name", "ping -c 1 nope", 1, "ping: bad address 'nope'\n"},
		{"nslookup through the search path", "nslookup web", 0,
			"Server:\t\t10.0.0.10\nAddress:\t10.0.0.10:53\n\nName:\tweb.ns.svc.cluster.local\nAddress: 10.0.0.50\n\n"},
		{"nslookup of a missing name", "nslookup missing", 1,
			"Server:\t\t10.0.0.10\nAddress:\t10.0.0.10:53\n\n** server can't find missing: NXDOMAIN\n\n"},
		{"nslookup at a server that is not there", "nslookup web 10.9.9.9", 1, ";; connection timed out; no servers could be reached\n"},
		{"getent reads the hosts file first", "getent hosts js-rjob-0-0; getent hosts js-rjob-0-1.js.ns.svc.cluster.local", 0,
			"10.64.0.2       js-rjob-0-0.js.ns.svc.cluster.local\n10.64.1.2       js-rjob-0-1.js.ns.svc.cluster.local\n"},
		{"getent of a missing name", "getent hosts missing", 2, ""},
		{"wget to stdout", "wget -qO- http://js-rjob-0-1.js:8081/ready", 0, "ready\n"},
		{"wget through a Service", "wget -q -O /tmp/r web/ready && cat /tmp/r", 0, "ready\n"},
		{"wget of a missing page", "wget -qO- http://web/x", 1, "wget: server returned error: HTTP/1.1 404 Not Found\n"},
		{"wget to a closed port", "wget -qO- http://js-rjob-0-1.js:9/", 1, "wget: can't connect to remote host (js-rjob-0-1.js): Connection refused\n"},
		{"curl", "curl -s http://web/ready; curl -s -o /dev/null -w '%{http_code}\\n' http://web/x", 0, "ready\n404\n"},
		{"curl exit codes", "curl -sf http://web/x; echo $?; curl -s http://nope/; echo $?; curl -sS http://10.64.1.2:9/; echo $?", 0,
			"22\n6\ncurl: (7) Failed to connect to 10.64.1.2: Connection refused\n7\n"},
		{"request headers", "wget -qO- -U probe --header 'X-Test: 1' http://web/ua; curl -s -H 'X-Test: 2' http://web/ua", 0, "probe 1\ncurl 2\n"},
		{"curl over TLS with the CA and a bearer token", `curl -sS --cacert /ca.crt -H "Authorization: Bearer t0k" -H 'X-Test: 1' https://js-rjob-0-1.js.ns.svc.cluster.local:8443/healthz`, 0,
			"secure Bearer t0k\n"},
		{"curl over TLS without the CA", "curl -sS https://10.64.1.2:8443/; echo $?; curl -sk https://10.64.1.2:8443/", 0,
			"curl: (60) SSL certificate problem: unable to get local issuer certificate\n60\nsecure \n"},
		{"curl over TLS to a name the certificate lacks", "curl -sS --cacert /ca.crt https://js-rjob-0-1.js:8443/; echo $?", 0,
			"curl: (60) SSL: no alternative certificate subject name matches target host name 'js-rjob-0-1.js'\n60\n"},
		{"curl over TLS to a plain HTTP server, and a missing CA file", "curl -sSk https://web:80/ready; echo $?; curl -sS --cacert /nope https://web/; echo $?", 0,
			"curl: (35) TLS connect error: error:0A00010B:SSL routines::wrong version number\n35\ncurl: (77) error setting certificate file: /nope\n77\n"},
		{"wget over TLS does not verify", "wget -O- https://10.64.1.2:8443/ 2>&1 | grep -v Connecting", 0,
			"wget: note: TLS certificate validation not implemented\nsecure \n"},
		{"nc -z", "nc -z js-rjob-0-1.js 8081 && echo open; nc -z js-rjob-0-1.js 9 || echo closed", 0, "open\nclosed\n"},
		{"nc server and client", "nc -l -p 9000 > /tmp/got & until echo hi | nc 127.0.0.1 9000 2>/dev/null; do :; done; wait; cat /tmp/got", 0, "hi\n"},
		{"HTTP by hand over nc", `printf 'GET /ready HTTP/1.0\r\n\r\n' | nc web 80 | tail -n 1`, 0, "ready\n"},
		{"background jobs and wait", "(echo a; exit 3) & wait $!; echo rc=$?", 0, "a\nrc=3\n"},
		{"/proc/1/fd/1 is the log", "echo to-log > /proc/1/fd/1", 0, "to-log\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, out := netEnv(t)
			code := Exec(context.Background(), []string{"sh", "-c", tc.script}, env)
			if code != tc.code || out.String() != tc.output {
				t.Errorf("exit %d, output:\n%s\nwant exit %d, output:\n%s", code, out.String(), tc.code, tc.output)
			}
		})
	}
}

func TestNoNetwork(t *testing.T) {
	env, out, _ := newEnv(t)
	code := Exec(context.Background(), []string{"sh", "-c", "ping -c 1 10.64.0.3; nslookup web; getent hosts web; echo $?; wget -q http://10.64.0.3/"}, env)
	want := "ping: sendto: Network is unreachable\n;; connection timed out; no servers could be reached\n2\n" +
		"wget: can't connect to remote host (10.64.0.3): Network is unreachable\n"
	if code != 1 || out.String() != want {
		t.Fatalf("exit %d, output:\n%s\nwant exit 1, output:\n%s", code, out.String(), want)
	}
}
