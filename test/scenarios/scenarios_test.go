// Package scenarios runs every bundled scenario of scenarios/examples on every supported
// Kubernetes release, as `restartbed run --kubernetes-version` does: the scenarios are both
// documentation and tests. The scenarios that can share a control plane (Scenario.Shares) run as
// its tenants, a namespace and nodes each, on one control plane per release and timing profile
// (envtest.Options.Tenants), as upstream's e2e suites share a cluster among their specs; the
// others (a control-plane fault, kubelet processes, a lone node that goes down, a node named in
// a manifest) and a profile's lone scenario run on clusters of their own. Those whose nodes run
// in kubelet processes (spec.kubelets) run them with cmd/restartbed, built once.
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

// How many scenarios run at once, over every release: on clusters of their own, and as tenants
// of a shared control plane, which cost a namespace and in-process nodes rather than four
// processes. Most of a scenario's time is spent waiting (its steps' waits and the timing
// profile's delays), so more run than the machine's cores.
const (
	ownClusters = 3
	tenants     = 6
)

func TestBundledScenarios(t *testing.T) {
	self := restartbedbin.Path(t)
	own, shared := make(chan struct{}, ownClusters), make(chan struct{}, tenants)
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
				for _, sc := range all {
					sc.Spec.KubernetesVersion = r.Kubernetes
				}
				hosts, err := scenarios.NewHosts(all, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() {
					if err := hosts.Stop(); err != nil {
						t.Error(err)
					}
				}()
				var wg sync.WaitGroup
				for _, sc := range all {
					wg.Go(func() {
						host, slots := hosts.For(sc), own
						if host != nil {
							slots = shared
						}
						slots <- struct{}{}
						defer func() { <-slots }()
						t.Run(sc.Metadata.Name, func(t *testing.T) {
							var report strings.Builder
							opts := scenarios.RunOptions{Progress: &report, KubeletCommand: []string{self}}
							where := ""
							if host != nil {
								var err error
								if opts.Host, err = hosts.Cluster(context.Background(), host); err != nil {
									t.Fatal(err)
								}
								where = " (a tenant of the shared control plane of " + host.Key + ")"
							}
							res := scenarios.Run(context.Background(), sc, opts)
							if !res.Passed() {
								t.Fatalf("scenario %s failed on Kubernetes %s%s:\n%s", sc.File, r.Kubernetes, where, report.String())
							}
							t.Logf("%s\n%s", where, report.String())
						})
					})
				}
				wg.Wait()
			})
		})
	}
	releases.Wait()
}
