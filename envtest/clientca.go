package envtest

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/restartbed/restartbed/internal/pki"
)

// clientCertAuthn is the apiserver's client-certificate authentication (its --client-ca-file), with a
// CA of restartbed's instead of controller-runtime's, so that the same CA signs the apiserver's
// client certificate for kubelets, as kubeadm's cluster CA does. A kubelet then trusts the
// apiserver by the CA the apiserver publishes (kube-system/extension-apiserver-authentication's
// client-ca-file), whether it runs in this process or joins from another (docs/join.md).
type clientCertAuthn struct {
	ca   *pki.CA
	file string
}

var _ crenvtest.Authn = (*clientCertAuthn)(nil)

// Configure points the apiserver at the CA's file in its directory.
func (a *clientCertAuthn) Configure(workDir string, args *crenvtest.Arguments) error {
	a.file = filepath.Join(workDir, apiserverClientCAFile)
	args.Set("client-ca-file", a.file)
	return nil
}

// Start writes the CA's certificate for the apiserver.
func (a *clientCertAuthn) Start() error {
	if err := os.WriteFile(a.file, a.ca.CertPEM(), 0o600); err != nil {
		return fmt.Errorf("writing the apiserver's client CA: %w", err)
	}
	return nil
}

// AddUser returns a copy of base that authenticates as the user by a client certificate.
func (a *clientCertAuthn) AddUser(user crenvtest.User, base *rest.Config) (*rest.Config, error) {
	kp, err := a.ca.Client(user.Name, user.Groups...)
	if err != nil {
		return nil, fmt.Errorf("client certificate for %s: %w", user.Name, err)
	}
	cfg := rest.CopyConfig(base)
	cfg.CertData, cfg.KeyData = kp.CertPEM, kp.KeyPEM
	return cfg, nil
}

// Stop does nothing: the file goes with the cluster's directory.
func (a *clientCertAuthn) Stop() error { return nil }
