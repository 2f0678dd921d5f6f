package fakekubelet

import (
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/options"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/fakekubelet/logs"
	"github.com/restartbed/restartbed/fakekubelet/network"
	"github.com/restartbed/restartbed/fakekubelet/nodes"
	"github.com/restartbed/restartbed/fakekubelet/server"
)

// GateFineGrainedAuthz is the gate that authorizes /pods, /healthz and /configz by their own
// nodes subresource before proxy; on by default in every supported release.
const GateFineGrainedAuthz = "KubeletFineGrainedAuthz"

// nodeIndex indexes the pod informer by the node a pod is bound to.
const nodeIndex = "restartbed-node"

// The kubelet's defaults for what /configz reports (pkg/kubelet/apis/config/v1beta1/defaults.go).
const (
	authnCacheTTL      = 2 * time.Minute
	authzAllowCacheTTL = 5 * time.Minute
	authzDenyCacheTTL  = 30 * time.Second
)

// serveAPI serves the kubelet API on port 10250 of every node's address, behind TLS with a
// serving certificate signed by the serving CA, each minted when a client first connects.
func (k *Kubelet) serveAPI(ifaces map[string]*network.Interface) error {
	api := k.opts.API
	caContent, err := dynamiccertificates.NewStaticCAContent("client-ca", api.ClientCAs)
	if err != nil {
		return fmt.Errorf("fakekubelet: the kubelet API's client CAs: %w", err)
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
		return fmt.Errorf("fakekubelet: the kubelet API's authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: k.client.AuthorizationV1(),
		AllowCacheTTL:             authzAllowCacheTTL,
		DenyCacheTTL:              authzDenyCacheTTL,
		WebhookRetryBackoff:       options.DefaultAuthWebhookRetryBackoff(),
	}.New()
	if err != nil {
		return fmt.Errorf("fakekubelet: the kubelet API's authorizer: %w", err)
	}
	fineGrained, set := k.opts.FeatureGates[GateFineGrainedAuthz]
	indexer := k.pods.informer.GetIndexer()
	srv, err := server.New(server.Options{
		Runtime:          k.rt,
		Authenticator:    authn,
		Authorizer:       authz,
		FineGrainedAuthz: fineGrained || !set,
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
		return fmt.Errorf("fakekubelet: %w", err)
	}
	var certs sync.Map // node name → *tls.Certificate
	for name, iface := range ifaces {
		n := k.nodes.Get(name)
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				if c, ok := certs.Load(name); ok {
					return c.(*tls.Certificate), nil
				}
				kp, err := api.ServingCA.Serving("system:node:"+name, []string{name}, net.IP(n.InternalIP().AsSlice()))
				if err != nil {
					return nil, err
				}
				c, _ := certs.LoadOrStore(name, &kp.TLS)
				return c.(*tls.Certificate), nil
			}}
		if _, err := iface.ServeTLS(nodes.KubeletPort, srv.Handler(name), cfg); err != nil {
			return fmt.Errorf("fakekubelet: node %s: serving the kubelet API: %w", name, err)
		}
	}
	return nil
}

// podsByNode is the pod informer's index by node.
func podsByNode(obj any) ([]string, error) {
	if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
		return []string{pod.Spec.NodeName}, nil
	}
	return nil, nil
}

// configz is the KubeletConfiguration the node reports on /configz: what restartbed's kubelet
// does, in the kubelet's configuration fields.
func (k *Kubelet) configz(string) any {
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
	return cfg
}
