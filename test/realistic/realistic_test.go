// Package realistic replays the node-failure scenarios in the realistic timing profile, as
// `restartbed run --timing realistic` does: their assertions read the timing variable, so the
// same files that check the fast profile's scaled delays check upstream's here (50 s node grace,
// 300 s default toleration, Kueue's 60 s). It is a package of its own because the upstream Job
// controller's tunables are process-wide: fast and realistic clusters cannot share a process,
// and these clusters, which mostly wait, run side by side (about eight minutes in all).
package realistic

import (
	"context"
	"path/filepath"
	"strings"
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

func TestNodeFailureScenariosInRealisticTiming(t *testing.T) {
	for _, file := range nodeFailureScenarios {
		sc, err := scenarios.Load(filepath.Join("../../scenarios/examples", file))
		if err != nil {
			t.Fatalf("the bundled scenario must load:\n%v", err)
		}
		sc.Spec.Timing = timing.RealisticName
		t.Run(sc.Metadata.Name, func(t *testing.T) {
			t.Parallel()
			var report strings.Builder
			res := scenarios.Run(context.Background(), sc, scenarios.RunOptions{Progress: &report})
			if !res.Passed() {
				t.Fatalf("scenario %s failed in realistic timing:\n%s", sc.File, report.String())
			}
			t.Logf("%s", report.String())
		})
	}
}
