package envtest

import (
	"fmt"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/fakekubelet/program"
)

// ServiceAccountConfig returns a copy of the admin Config that acts as the service account
// namespace/name, with the groups a token of that account carries. The apiserver authorizes its
// requests as it would a pod's: RBAC and ValidatingAdmissionPolicy apply. The account need not
// exist, as with a token.
func (c *Cluster) ServiceAccountConfig(namespace, name string) *rest.Config {
	return program.ServiceAccountConfig(c.Config, namespace, name)
}

// ServiceAccountClient is a controller-runtime client on ServiceAccountConfig.
func (c *Cluster) ServiceAccountClient(namespace, name string) (client.Client, error) {
	cl, err := client.New(c.ServiceAccountConfig(namespace, name), client.Options{Scheme: c.Scheme})
	if err != nil {
		return nil, fmt.Errorf("client for service account %s/%s: %w", namespace, name, err)
	}
	return cl, nil
}
