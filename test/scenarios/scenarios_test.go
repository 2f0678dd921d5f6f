// Package scenarios runs every bundled scenario of scenarios/examples on every supported
// Kubernetes release, each on its own cluster, as `restartbed run --kubernetes-version` does: the
// scenarios are both documentation and tests. Those whose nodes run in kubelet processes
// (spec.kubelets) run them with cmd/restartbed, built once.
package scenarios

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/scenarios"
	"github.com/restartbed/restartbed/test/restartbedbin"
)

func TestMain(m *testing.M) {
	code := m.Run()
	restartbedbin.Remove()
	os.Exit(code)
}

func TestBundledScenarios(t *testing.T) {
	self := restartbedbin.Path(t)
	for _, r := range controlplane.Releases() {
		t.Run(r.Minor(), func(t *testing.T) {
			all, err := scenarios.LoadAll([]string{"../../scenarios/examples"})
			if err != nil {
				t.Fatalf("the bundled scenarios must load:\n%v", err)
			}
			for _, sc := range all {
				sc.Spec.KubernetesVersion = r.Kubernetes
				t.Run(sc.Metadata.Name, func(t *testing.T) {
					t.Parallel()
					var report strings.Builder
					res := scenarios.Run(context.Background(), sc, scenarios.RunOptions{Progress: &report, KubeletCommand: []string{self}})
					if !res.Passed() {
						t.Fatalf("scenario %s failed on Kubernetes %s:\n%s", sc.File, r.Kubernetes, report.String())
					}
					t.Logf("%s", report.String())
				})
			}
		})
	}
}
