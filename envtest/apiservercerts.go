package envtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/restartbed/restartbed/internal/pki"
)

// controller-runtime's envtest writes the apiserver's serving certificate for localhost and
// 127.0.0.1 only, unless the cert directory already holds one. restartbed writes its own, for
// the names and the cluster IP of the kubernetes Service as well, as kubeadm does, so that a
// process in a pod (a host binary, package hostproc) reaches the apiserver with the in-cluster
// configuration and verifies it with the pod's ca.crt. The files keep envtest's names.
const (
	// defaultServiceCIDR is envtest's --service-cluster-ip-range.
	defaultServiceCIDR = "10.0.0.0/24"
	apiserverCertFile  = "apiserver.crt"
	apiserverKeyFile   = "apiserver.key"
	saSignerCertFile   = "sa-signer.crt"
	saSignerKeyFile    = "sa-signer.key"
)

// writeAPIServerCerts writes the apiserver's serving certificate and key and the
// service-account signing key into its cert directory, and gives envtest the CA to trust.
func (c *Cluster) writeAPIServerCerts(apiserver *crenvtest.APIServer, serviceCIDR string) error {
	first, err := firstServiceIP(serviceCIDR)
	if err != nil {
		return err
	}
	ca, err := pki.NewCA("restartbed-apiserver-ca", c.Clock.Now)
	if err != nil {
		return err
	}
	names := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	serving, err := ca.Serving("kube-apiserver", names, net.IPv4(127, 0, 0, 1), first.AsSlice())
	if err != nil {
		return err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating the service-account signing key: %w", err)
	}
	saDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return err
	}
	saPub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return err
	}
	files := map[string][]byte{
		apiserverCertFile: serving.CertPEM,
		apiserverKeyFile:  serving.KeyPEM,
		saSignerKeyFile:   pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saDER}),
		saSignerCertFile:  pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(apiserver.CertDir, name), data, 0o600); err != nil {
			return fmt.Errorf("writing the apiserver's %s: %w", name, err)
		}
	}
	apiserver.CA = ca.CertPEM()
	return nil
}

// firstServiceIP is the kubernetes Service's cluster IP: the first address of the range.
func firstServiceIP(cidr string) (netip.Addr, error) {
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("--service-cluster-ip-range %q: %w", cidr, err)
	}
	return prefix.Masked().Addr().Next(), nil
}
