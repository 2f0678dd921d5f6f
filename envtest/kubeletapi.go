package envtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/internal/pki"
)

// The apiserver reaches the emulated kubelets and pods as it reaches a cluster's through
// konnectivity: its egress selector sends "cluster" traffic (kubelet API calls for logs, exec,
// attach and port-forward; the pods, services and nodes proxy) as HTTP CONNECT requests to a
// proxy, here on a Unix socket in the cluster's directory, which dials the address on the pod
// network in-process; a loopback address, where a kubelet joined from another process on this
// machine serves, it dials for real. The in-process kubelets' serving certificates come from a
// CA of the cluster's; the apiserver's client certificate for kubelets from its client CA (see
// clientCertAuthn), as kubeadm's do. Without in-process nodes (only joined ones) there is no egress:
// the apiserver dials the nodes' addresses itself and, as kubeadm's, does not verify their
// self-signed serving certificates.

// Files in the cluster's directory for the kubelet API.
const (
	egressSocket       = "egress.sock"
	egressConfigFile   = "egress-selector.yaml"
	kubeletCAFile      = "kubelet-ca.crt"
	kubeletClientCert  = "apiserver-kubelet-client.crt"
	kubeletClientKey   = "apiserver-kubelet-client.key"
	kubeletClientUser  = "kube-apiserver-kubelet-client"
	kubeletClientGroup = "system:masters"
	// apiserverClientCAFile is where controller-runtime's envtest writes the CA of the
	// apiserver's --client-ca-file, in the apiserver's certificate directory.
	apiserverClientCAFile = "client-cert-auth-ca.crt"
)

// kubeletAPI is the cluster's side of the kubelet API: the CAs, the egress proxy and the files the
// apiserver reads.
type kubeletAPI struct {
	ca *pki.CA
	// clientCA signs the apiserver's client certificate for kubelets.
	clientCA *pki.CA
	listener net.Listener
	server   *http.Server
	// dial reaches the pod network once the kubelets run.
	dial atomic.Pointer[func(ctx context.Context, address string) (net.Conn, error)]
}

// startKubeletAPI writes the apiserver's client certificate for kubelets and sets its flags;
// with in-process nodes it also makes their serving CA and starts the egress proxy to them, and
// unless other processes' nodes join (external) the apiserver verifies kubelets by that CA.
func (c *Cluster) startKubeletAPI(args *crenvtest.Arguments, clientCA *pki.CA, inProcess, external bool) (*kubeletAPI, error) {
	client, err := clientCA.Client(kubeletClientUser, kubeletClientGroup)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{kubeletClientCert: client.CertPEM, kubeletClientKey: client.KeyPEM}
	args.Set("kubelet-client-certificate", c.work.file(kubeletClientCert))
	args.Set("kubelet-client-key", c.work.file(kubeletClientKey))
	args.Set("kubelet-preferred-address-types", "InternalIP", "Hostname")
	api := &kubeletAPI{clientCA: clientCA}
	if inProcess {
		if api.ca, err = pki.NewCA("restartbed-kubelet-ca", c.Clock.Now); err != nil {
			return nil, err
		}
		files[kubeletCAFile] = api.ca.CertPEM()
		sock := c.work.file(egressSocket)
		files[egressConfigFile] = fmt.Appendf(nil, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, sock)
		if !external {
			args.Set("kubelet-certificate-authority", c.work.file(kubeletCAFile))
		}
		args.Set("egress-selector-config-file", c.work.file(egressConfigFile))
		if api.listener, err = net.Listen("unix", sock); err != nil {
			return nil, fmt.Errorf("the apiserver's egress proxy: %w", err)
		}
		api.server = &http.Server{Handler: http.HandlerFunc(api.connect), ReadHeaderTimeout: 30 * time.Second}
		l := api.listener
		go func() { _ = api.server.Serve(l) }()
	}
	for name, data := range files {
		if err := os.WriteFile(c.work.file(name), data, 0o600); err != nil {
			return nil, fmt.Errorf("writing the kubelet API's files: %w", err)
		}
	}
	return api, nil
}

// connect serves one CONNECT: it dials the address on the pod network and joins the two.
func (a *kubeletAPI) connect(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "only CONNECT", http.StatusMethodNotAllowed)
		return
	}
	var conn net.Conn
	var err error
	if ap, perr := netip.ParseAddrPort(r.Host); perr == nil && ap.Addr().IsLoopback() {
		// A node joined from another process on this machine (docs/join.md).
		var d net.Dialer
		conn, err = d.DialContext(r.Context(), "tcp", r.Host)
	} else if dial := a.dial.Load(); dial == nil {
		http.Error(w, "restartbed: the kubelets have not started, so no pod network", http.StatusServiceUnavailable)
		return
	} else {
		conn, err = (*dial)(r.Context(), r.Host)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = conn.Close()
		http.Error(w, "cannot hijack", http.StatusInternalServerError)
		return
	}
	client, rw, err := hj.Hijack()
	if err != nil {
		_ = conn.Close()
		return
	}
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		_ = conn.Close()
		_ = client.Close()
		return
	}
	go join(conn, client, rw.Reader)
}

// join copies between the pod network's conn and the apiserver's until both are done.
func join(conn, client net.Conn, buffered *bufio.Reader) {
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(conn, buffered) // a tunnel's copy ends when either side closes; nothing to report
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		close(done)
	}()
	_, _ = io.Copy(client, conn) // a tunnel's copy ends when either side closes; nothing to report
	_ = client.Close()
	<-done
	_ = conn.Close()
}

// kubeletOptions are the in-process kubelets' side: their serving CA, and the client CA they
// trust, the apiserver's.
func (a *kubeletAPI) kubeletOptions() *fakekubelet.APIOptions {
	return &fakekubelet.APIOptions{ServingCA: a.ca, ClientCAs: a.clientCA.CertPEM()}
}

// connectTo sends the proxy's connections to dial.
func (a *kubeletAPI) connectTo(dial func(ctx context.Context, address string) (net.Conn, error)) {
	a.dial.Store(&dial)
}

func (a *kubeletAPI) stop() error {
	if a == nil || a.server == nil {
		return nil
	}
	err := a.server.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
