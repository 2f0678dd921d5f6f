// Package scenarios runs every bundled scenario of scenarios/examples, each on its own cluster,
// as `restartbed run` does: the scenarios are both documentation and tests.
package scenarios

import (
	"context"
	"strings"
	"testing"

	"github.com/restartbed/restartbed/scenarios"
)

func TestBundledScenarios(t *testing.T) {
	all, err := scenarios.LoadAll([]string{"../../scenarios/examples"})
	if err != nil {
		t.Fatalf("the bundled scenarios must load:\n%v", err)
	}
	for _, sc := range all {
		t.Run(sc.Metadata.Name, func(t *testing.T) {
			var report strings.Builder
			res := scenarios.Run(context.Background(), sc, scenarios.RunOptions{Progress: &report})
			if !res.Passed() {
				t.Fatalf("scenario %s failed:\n%s", sc.File, report.String())
			}
			t.Logf("%s", report.String())
		})
	}
}
