package envtest

import (
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeconfigContext is the name of the context (and cluster and user) in Kubeconfig.
const KubeconfigContext = "restartbed"

// Kubeconfig renders a kubeconfig that reaches the cluster as its admin, for kubectl and for
// controllers run as separate processes.
func (c *Cluster) Kubeconfig() ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[KubeconfigContext] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData}
	cfg.AuthInfos[KubeconfigContext] = &clientcmdapi.AuthInfo{ClientCertificateData: c.Config.CertData,
		ClientKeyData: c.Config.KeyData, Token: c.Config.BearerToken}
	cfg.Contexts[KubeconfigContext] = &clientcmdapi.Context{Cluster: KubeconfigContext, AuthInfo: KubeconfigContext, Namespace: "default"}
	cfg.CurrentContext = KubeconfigContext
	return clientcmd.Write(*cfg)
}
