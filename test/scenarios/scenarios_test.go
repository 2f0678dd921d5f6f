// Package scenarios runs every bundled scenario of scenarios/examples on every supported
// Kubernetes release, each on its own cluster, as `restartbed run --kubernetes-version` does: the
// scenarios are both documentation and tests. Those whose nodes run in kubelet processes
// (spec.kubelets) run them with cmd/restartbed, built once.
package scenarios

import (
	"context"
	"os"
	"strings"
	"sync"
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

// concurrently is how many scenarios run at once. Most of a scenario's time is spent waiting
// (its steps' waits and the timing profile's delays), so more run than the machine's cores, as
// t.Parallel would allow.
const concurrently = 4

func TestBundledScenarios(t *testing.T) {
	self := restartbedbin.Path(t)
	slots := make(chan struct{}, concurrently)
	// t.Run may be called from several goroutines at once: every release's scenarios are
	// started together and each waits for a slot.
	var releases sync.WaitGroup
	for _, r := range controlplane.Releases() {
		releases.Go(func() {
			t.Run(r.Minor(), func(t *testing.T) {
				all, err := scenarios.LoadAll([]string{"../../scenarios/examples"})
				if err != nil {
					t.Fatalf("the bundled scenarios must load:\n%v", err)
				}
				var wg sync.WaitGroup
				for _, sc := range all {
					sc.Spec.KubernetesVersion = r.Kubernetes
					wg.Go(func() {
						slots <- struct{}{}
						defer func() { <-slots }()
						t.Run(sc.Metadata.Name, func(t *testing.T) {
							var report strings.Builder
							res := scenarios.Run(context.Background(), sc, scenarios.RunOptions{Progress: &report, KubeletCommand: []string{self}})
							if !res.Passed() {
								t.Fatalf("scenario %s failed on Kubernetes %s:\n%s", sc.File, r.Kubernetes, report.String())
							}
							t.Logf("%s", report.String())
						})
					})
				}
				wg.Wait()
			})
		})
	}
	releases.Wait()
}
