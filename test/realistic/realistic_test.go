// Package realistic replays the node-failure scenarios in the realistic timing profile, as
// `restartbed run --timing realistic` does: their assertions read the timing variable, so the
// same files that check the fast profile's scaled delays check upstream's here (50 s node grace,
// 300 s default toleration, Kueue's 60 s). They mostly wait, so they run side by side (about
// eight minutes in all): those that can share a control plane (scenarios.Scenario.Shares) as
// tenants of one in realistic timing, the others on clusters of their own.
package realistic

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/restartbed/restartbed/scenarios"
	"github.com/restartbed/restartbed/timing"
)

// nodeFailureScenarios are the bundled node-failure scenarios; each passes in both profiles.
var nodeFailureScenarios = []string{
	"kep6757-story1-stuck-terminating.yaml",
	"kep6757-story1-failure-recovery.yaml",
	"inplace-restart-node-loss.yaml",
	"node-back-before-eviction.yaml",
	"node-deleted-pod-gc.yaml",
}

// The scenarios run all at once (they mostly wait; t.Parallel would run only GOMAXPROCS of them
// at a time), and each is reported as a subtest.
func TestNodeFailureScenariosInRealisticTiming(t *testing.T) {
	all := make([]*scenarios.Scenario, len(nodeFailureScenarios))
	for i, file := range nodeFailureScenarios {
		sc, err := scenarios.Load(filepath.Join("../../scenarios/examples", file))
		if err != nil {
			t.Fatalf("the bundled scenario must load:\n%v", err)
		}
		sc.Spec.Timing = timing.RealisticName
		all[i] = sc
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
	results := make([]*scenarios.Result, len(all))
	reports := make([]strings.Builder, len(all))
	var wg sync.WaitGroup
	for i, sc := range all {
		wg.Go(func() {
			opts := scenarios.RunOptions{Progress: &reports[i]}
			if host := hosts.For(sc); host != nil {
				var err error
				if opts.Host, err = hosts.Cluster(context.Background(), host); err != nil {
					results[i] = &scenarios.Result{Scenario: sc, Err: err}
					reports[i].WriteString(err.Error())
					return
				}
			}
			results[i] = scenarios.Run(context.Background(), sc, opts)
		})
	}
	wg.Wait()
	for i, sc := range all {
		t.Run(sc.Metadata.Name, func(t *testing.T) {
			if !results[i].Passed() {
				t.Fatalf("scenario %s failed in realistic timing:\n%s", sc.File, reports[i].String())
			}
			t.Logf("%s", reports[i].String())
		})
	}
}
