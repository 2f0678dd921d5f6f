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
	objs, err := agentconfig.RBAC(namespace)
	Expect(err).NotTo(HaveOccurred())
	for _, o := range objs {
		Expect(c.Create(ctx, o)).To(Succeed())
	}
}
