package fakekubelet

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/kubernetes"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/fakekubelet/kubeletconfig"
	"github.com/restartbed/restartbed/fakekubelet/logs"
	"github.com/restartbed/restartbed/fakekubelet/network"
	"github.com/restartbed/restartbed/fakekubelet/nodes"
	"github.com/restartbed/restartbed/fakekubelet/server"
	"github.com/restartbed/restartbed/internal/hangup"
	"github.com/restartbed/restartbed/internal/pki"
)

// GateFineGrainedAuthz is the gate that authorizes /pods, /healthz and /configz by their own
// nodes subresource before proxy; on by default in every supported release.
const GateFineGrainedAuthz = "KubeletFineGrainedAuthz"

// The kubelet's defaults for what /configz reports (pkg/kubelet/apis/config/v1beta1/defaults.go).
const (
	authnCacheTTL      = 2 * time.Minute
	authzAllowCacheTTL = 5 * time.Minute
	authzDenyCacheTTL  = 30 * time.Second
)

// newAPIServer builds the kubelet API (package server) every node serves: one handler per node,
// with the kubelet's delegated authentication and authorization.
func (k *Kubelet) newAPIServer() (*server.Server, error) {
	api := k.opts.API
	caContent, err := dynamiccertificates.NewStaticCAContent("client-ca", api.ClientCAs)
	if err != nil {
		return nil, fmt.Errorf("fakekubelet: the kubelet API's client CAs: %w", err)
	}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                          nil,
		CacheTTL:                           authnCacheTTL,
		TokenAccessReviewClient:            k.client.AuthenticationV1(),
		TokenAccessReviewTimeout:           10 * time.Second,
		WebhookRetryBackoff:                options.DefaultAuthWebhookRetryBackoff(),
		ClientCertificateCAContentProvider: caContent,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("fakekubelet: the kubelet API's authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: k.client.AuthorizationV1(),
		AllowCacheTTL:             authzAllowCacheTTL,
		DenyCacheTTL:              authzDenyCacheTTL,
		WebhookRetryBackoff:       options.DefaultAuthWebhookRetryBackoff(),
	}.New()
	if err != nil {
		return nil, fmt.Errorf("fakekubelet: the kubelet API's authorizer: %w", err)
	}
	fineGrained, set := k.opts.FeatureGates[GateFineGrainedAuthz]
	indexer := k.pods.watch.store
	srv, err := server.New(server.Options{
		Runtime:          k.rt,
		Authenticator:    authn,
		Authorizer:       authz,
		FineGrainedAuthz: fineGrained || !set,
		PodWatch:         k.PodWatch,
		Pod: func(node, namespace, name string) (*corev1.Pod, bool) {
			obj, exists, err := indexer.GetByKey(namespace + "/" + name)
			if err != nil || !exists {
				return nil, false
			}
			pod := obj.(*corev1.Pod)
			return pod, pod.Spec.NodeName == node
		},
		Pods: func(node string) []*corev1.Pod {
			objs, _ := indexer.ByIndex(nodeIndex, node) // fails only for an index the informer lacks, and it has this one
			out := make([]*corev1.Pod, 0, len(objs))
			for _, obj := range objs {
				out = append(out, obj.(*corev1.Pod))
			}
			return out
		},
		Status:  k.status.Latest,
		Configz: k.configz,
		Clock:   k.clock,
	})
	if err != nil {
		return nil, fmt.Errorf("fakekubelet: %w", err)
	}
	return srv, nil
}

// nodeServing is what a node of the kubelet holds open: its address on the pod network and its
// kubelet API's listeners.
type nodeServing struct {
	iface *network.Interface
	// listener is the node's kubelet API on a real network (APIOptions.Listen), or nil.
	listener net.Listener
	stops    []func()
}

// close stops the node's kubelet API and takes its address off the pod network.
func (s *nodeServing) close() {
	for _, stop := range s.stops {
		stop()
	}
	if s.iface != nil {
		s.iface.Close()
	}
	if s.listener != nil {
		_ = s.listener.Close() // stops the server's accept loop; closing twice only reports it
	}
}

// listen opens the node's kubelet API listener on the real network when APIOptions.Listen says
// so, and makes the node advertise it. Call it before the node is registered or adopted.
func (k *Kubelet) listen(n *nodes.Node, serving *nodeServing) error {
	api := k.opts.API
	if api == nil || !api.Listen.IsValid() {
		return nil
	}
	port := 0
	if api.Port != 0 {
		if port = int(api.Port) + n.Index(); port > 65535 {
			return fmt.Errorf("fakekubelet: node %s: no port left for its kubelet API past %d", n.Name(), api.Port)
		}
	}
	l, err := net.Listen("tcp", netip.AddrPortFrom(api.Listen, uint16(port)).String())
	if err != nil {
		return fmt.Errorf("fakekubelet: node %s: the kubelet API's listener: %w", n.Name(), err)
	}
	serving.listener = l
	n.SetEndpoint(api.Advertise, int32(l.Addr().(*net.TCPAddr).Port))
	return nil
}

// serve serves the kubelet API of the node on its pod-network address and on its listener,
// behind TLS with a serving certificate signed by the serving CA for the node's name and
// addresses, minted when a client first connects.
func (k *Kubelet) serve(n *nodes.Node, serving *nodeServing) error {
	name := n.Name()
	var once sync.Once
	var cert *tls.Certificate
	var certErr error
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			once.Do(func() {
				ips := []net.IP{net.IP(n.InternalIP().AsSlice())}
				if n.Address() != n.InternalIP() {
					ips = append(ips, net.IP(n.Address().AsSlice()))
				}
				kp, err := k.opts.API.ServingCA.Serving("system:node:"+name, []string{name}, ips...)
				cert, certErr = &kp.TLS, err
			})
			return cert, certErr
		}}
	handler := refusedWhileStopped(n, k.api.Handler(name))
	stop, err := serving.iface.ServeTLS(nodes.KubeletPort, handler, cfg)
	if err != nil {
		return fmt.Errorf("fakekubelet: node %s: serving the kubelet API: %w", name, err)
	}
	serving.stops = append(serving.stops, stop)
	if serving.listener != nil {
		real := cfg.Clone()
		real.NextProtos = []string{"http/1.1"} // so that clients can upgrade to a stream, as exec and port-forward do
		srv := &http.Server{Handler: handler, TLSConfig: real, ReadHeaderTimeout: 30 * time.Second,
			ErrorLog: log.New(io.Discard, "", 0)}
		l := serving.listener
		go func() { _ = srv.ServeTLS(l, "", "") }() // returns when closed, with nothing to report
		serving.stops = append(serving.stops, func() { _ = srv.Close() })
	}
	return nil
}

// refusedWhileStopped serves the node's kubelet API while its kubelet runs. A stopped kubelet has
// no server: each request's connection is closed unanswered (hangup.Hangup).
func refusedWhileStopped(n *nodes.Node, api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !n.KubeletStopped() {
			api.ServeHTTP(w, r)
			return
		}
		hangup.Hangup(w, fmt.Sprintf("the kubelet of node %s is stopped", n.Name()))
	})
}

// podsByNode is the pod informer's index by node.
func podsByNode(obj any) ([]string, error) {
	if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
		return []string{pod.Spec.NodeName}, nil
	}
	return nil, nil
}

// configz is the KubeletConfiguration the node reports on /configz: what restartbed's kubelet
// does, in the kubelet's configuration fields, with what the node's kubelet took from its
// configuration file.
func (k *Kubelet) configz(node string) any {
	cfg := k.baseConfigz()
	k.kubeletConfig(node).Apply(cfg)
	return cfg
}

// baseConfigz is every node's configuration without a file, under the cluster's gates: what a
// file may restate (package kubeletconfig).
func (k *Kubelet) baseConfigz() *kubeletconfigv1beta1.KubeletConfiguration {
	t := k.opts.Timing
	cfg := &kubeletconfigv1beta1.KubeletConfiguration{
		TypeMeta:      metav1.TypeMeta{Kind: "KubeletConfiguration", APIVersion: kubeletconfigv1beta1.SchemeGroupVersion.String()},
		EnableServer:  ptr.To(true),
		Address:       "0.0.0.0",
		Port:          nodes.KubeletPort,
		ReadOnlyPort:  0,
		SyncFrequency: metav1.Duration{Duration: syncFrequency},
		ClusterDomain: k.network.Domain(),
		ClusterDNS:    []string{k.network.DNS().String()},
		Authentication: kubeletconfigv1beta1.KubeletAuthentication{
			X509:      kubeletconfigv1beta1.KubeletX509Authentication{ClientCAFile: "/etc/kubernetes/pki/ca.crt"},
			Webhook:   kubeletconfigv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true), CacheTTL: metav1.Duration{Duration: authnCacheTTL}},
			Anonymous: kubeletconfigv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
		},
		Authorization: kubeletconfigv1beta1.KubeletAuthorization{Mode: kubeletconfigv1beta1.KubeletAuthorizationModeWebhook,
			Webhook: kubeletconfigv1beta1.KubeletWebhookAuthorization{CacheAuthorizedTTL: metav1.Duration{Duration: authzAllowCacheTTL},
				CacheUnauthorizedTTL: metav1.Duration{Duration: authzDenyCacheTTL}}},
		NodeStatusUpdateFrequency:       metav1.Duration{Duration: t.NodeLeaseRenewInterval},
		NodeStatusReportFrequency:       metav1.Duration{Duration: t.NodeStatusReportFrequency},
		NodeLeaseDurationSeconds:        int32(t.NodeLeaseDuration / time.Second),
		StreamingConnectionIdleTimeout:  metav1.Duration{Duration: 4 * time.Hour},
		ContainerLogMaxSize:             "10Mi",
		ContainerLogMaxFiles:            ptr.To[int32](logs.DefaultMaxFiles),
		ContainerRuntimeEndpoint:        "unix:///run/containerd/containerd.sock",
		CgroupDriver:                    "systemd",
		MaxPods:                         110,
		FeatureGates:                    k.opts.FeatureGates,
		FailSwapOn:                      ptr.To(true),
		RegisterNode:                    ptr.To(true),
		ShutdownGracePeriod:             metav1.Duration{},
		ShutdownGracePeriodCriticalPods: metav1.Duration{},
	}
	kubeletconfig.Defaults(k.opts.FeatureGates).Apply(cfg)
	return cfg
}

// Where the apiserver publishes the CA of its client certificates, for the servers it calls
// (aggregated apiservers, kubelets) to authenticate it.
const (
	authenticationConfigMap = "extension-apiserver-authentication"
	clientCAKey             = "client-ca-file"
)

// JoinAPI completes the kubelet API options of nodes that join a cluster restartbed did not
// start (api.Listen set): a serving CA of the process's own, its certificates starting at now, as
// a kubelet signs its own; and, before api.ClientCAs, the CA the apiserver publishes for the
// servers it calls to authenticate it (kube-system/extension-apiserver-authentication's
// client-ca-file: on kubeadm and kind clusters, and restartbed's, the issuer of its client
// certificate for kubelets). Without a published CA, api.ClientCAs must hold one.
func JoinAPI(ctx context.Context, client kubernetes.Interface, api *APIOptions, now func() time.Time) error {
	published, err := publishedClientCA(ctx, client)
	if err != nil && len(api.ClientCAs) == 0 {
		return fmt.Errorf("fakekubelet: %w; give the CA of the apiserver's kubelet client certificate (its --kubelet-client-certificate's issuer)", err)
	}
	api.ClientCAs = append(append(published, '\n'), api.ClientCAs...)
	if api.ServingCA, err = pki.NewCA("restartbed-kubelet-serving-ca", now); err != nil {
		return err
	}
	return nil
}

func publishedClientCA(ctx context.Context, client kubernetes.Interface) ([]byte, error) {
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, authenticationConfigMap, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the apiserver's client CA (%s/%s): %w", metav1.NamespaceSystem, authenticationConfigMap, err)
	}
	ca := cm.Data[clientCAKey]
	if strings.TrimSpace(ca) == "" {
		return nil, fmt.Errorf("the apiserver publishes no client CA in %s/%s", metav1.NamespaceSystem, authenticationConfigMap)
	}
	return []byte(ca), nil
}
