package envtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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
// network in-process. The kubelets' serving certificates and the apiserver's client certificate
// for them come from one CA of the cluster's, as kubeadm's do.

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

// kubeletAPI is the cluster's side of the kubelet API: the CA, the egress proxy and the files the
// apiserver reads.
type kubeletAPI struct {
	ca       *pki.CA
	listener net.Listener
	server   *http.Server
	// dial reaches the pod network once the kubelets run.
	dial atomic.Pointer[func(ctx context.Context, address string) (net.Conn, error)]
}

// startKubeletAPI makes the CA, writes the apiserver's files and starts the egress proxy, and
// sets the apiserver's flags that use them.
func (c *Cluster) startKubeletAPI(args *crenvtest.Arguments) (*kubeletAPI, error) {
	ca, err := pki.NewCA("restartbed-kubelet-ca", c.Clock.Now)
	if err != nil {
		return nil, err
	}
	client, err := ca.Client(kubeletClientUser, kubeletClientGroup)
	if err != nil {
		return nil, err
	}
	sock := c.work.file(egressSocket)
	files := map[string][]byte{
		kubeletCAFile:     ca.CertPEM(),
		kubeletClientCert: client.CertPEM,
		kubeletClientKey:  client.KeyPEM,
		egressConfigFile: fmt.Appendf(nil, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, sock),
	}
	for name, data := range files {
		if err := os.WriteFile(c.work.file(name), data, 0o600); err != nil {
			return nil, fmt.Errorf("writing the kubelet API's files: %w", err)
		}
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("the apiserver's egress proxy: %w", err)
	}
	api := &kubeletAPI{ca: ca, listener: l}
	api.server = &http.Server{Handler: http.HandlerFunc(api.connect), ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = api.server.Serve(l) }()

	args.Set("kubelet-client-certificate", c.work.file(kubeletClientCert))
	args.Set("kubelet-client-key", c.work.file(kubeletClientKey))
	args.Set("kubelet-certificate-authority", c.work.file(kubeletCAFile))
	args.Set("kubelet-preferred-address-types", "InternalIP", "Hostname")
	args.Set("egress-selector-config-file", c.work.file(egressConfigFile))
	return api, nil
}

// connect serves one CONNECT: it dials the address on the pod network and joins the two.
func (a *kubeletAPI) connect(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "only CONNECT", http.StatusMethodNotAllowed)
		return
	}
	dial := a.dial.Load()
	if dial == nil {
		http.Error(w, "restartbed: the cluster has no nodes, so no pod network", http.StatusServiceUnavailable)
		return
	}
	conn, err := (*dial)(r.Context(), r.Host)
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

// kubeletOptions are the kubelets' side: their serving CA, and the client CAs they trust (the
// apiserver's and this one's).
func (a *kubeletAPI) kubeletOptions(apiserverClientCA []byte) *fakekubelet.APIOptions {
	return &fakekubelet.APIOptions{ServingCA: a.ca, ClientCAs: append(append([]byte{}, apiserverClientCA...), a.ca.CertPEM()...)}
}

// connectTo sends the proxy's connections to dial.
func (a *kubeletAPI) connectTo(dial func(ctx context.Context, address string) (net.Conn, error)) {
	a.dial.Store(&dial)
}

func (a *kubeletAPI) stop() error {
	if a == nil {
		return nil
	}
	err := a.server.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
