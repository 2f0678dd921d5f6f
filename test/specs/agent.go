package specs

import (
	"context"

	. "github.com/onsi/ginkgo/v2" //nolint:revive
	. "github.com/onsi/gomega"    //nolint:revive
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentconfig "github.com/restartbed/restartbed/config/agent"
)

// ApplyAgentRBAC creates config/agent/rbac.yaml's service account, Role and RoleBinding in the
// namespace: what a user applies for the in-place-restart agent.
func ApplyAgentRBAC(ctx context.Context, c client.Client, namespace string) {
	GinkgoHelper()
	Expect(CreateAgentRBAC(ctx, c, namespace)).To(Succeed())
}

// CreateAgentRBAC is ApplyAgentRBAC for tests and benchmarks outside Ginkgo: it returns the
// first error.
func CreateAgentRBAC(ctx context.Context, c client.Client, namespace string) error {
	objs, err := agentconfig.RBAC(namespace)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}
