package jobset

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/explore"
	"github.com/restartbed/restartbed/test/specs"
)

// TestExploreUpstream explores KEP-467 Story 1 with upstream JobSet v0.12.0's manager and its
// agent binary: a few faults — the agent's exit, the manager's restart, every pod's connections
// reset — at points where the group starts or restarts, every built-in invariant judged on
// upstream's behaviour. It is the smoke run of docs/explore.md's upstream sweep; what a sweep
// finds there is written up in docs/explore.md, not asserted here, so the test fails only when
// explore cannot run upstream (the reference run fails, a replay errors) or a violation's
// scenario does not replay.
func TestExploreUpstream(t *testing.T) {
	t.Parallel()
	agent, manager := upstreamBinaries(t)
	file := withAgentBinary(t, filepath.Join("..", "..", "..", "scenarios", "examples", "story1-fast-recovery.yaml"), agent)
	opts := upstreamOptions(t, func(ctx context.Context, cluster *envtest.Cluster) error {
		start, err := managerStart(ctx, cluster, manager, cluster.Dir(), inPlaceGate, &specs.SyncBuffer{})
		if err != nil {
			return err
		}
		return cluster.RunController(start) // restart-controller kills and starts it
	})
	var progress strings.Builder
	rep, err := explore.Explore(context.Background(), file, explore.Options{
		Faults:       []string{"exit-agent", "restart-controller", "reset-connections"},
		PointFilter:  func(p explore.Point) bool { return strings.Contains(p.Description, "attempt") },
		MaxSchedules: 4, Parallel: 2, Seed: 1, OutDir: t.TempDir(), Confirm: 1,
		Run: opts, Progress: &progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	_ = rep.WriteText(&text)
	t.Logf("%s\n%s", progress.String(), text.String())
	if rep.Reference.Verdict != explore.Held {
		t.Fatalf("the reference run with upstream's manager and agent: %s: %s", rep.Reference.Verdict, rep.Reference.Detail)
	}
	if len(rep.Schedules) != 4 {
		t.Errorf("%d schedules ran, want 4", len(rep.Schedules))
	}
	for _, s := range rep.Schedules {
		switch {
		case s.Verdict == explore.Errored:
			t.Errorf("schedule %s could not run: %s", s.String(), s.Detail)
		case s.Verdict == explore.Violated && s.File == "":
			t.Errorf("schedule %s broke an invariant and no scenario was written for it", s.String())
		}
	}
}

// withAgentBinary writes the scenario, with its agent program upstream's binary and its files'
// paths absolute, into the test's directory, and returns its path.
func withAgentBinary(t *testing.T, file, agent string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	dir, err := filepath.Abs(filepath.Dir(file))
	if err != nil {
		t.Fatal(err)
	}
	spec := doc["spec"].(map[string]any)
	for _, o := range spec["objects"].([]any) {
		if f, ok := o.(map[string]any)["file"].(string); ok {
			o.(map[string]any)["file"] = filepath.Join(dir, f)
		}
	}
	replaced := 0
	for _, p := range spec["programs"].([]any) {
		if p := p.(map[string]any); p["builtin"] == "agent" {
			delete(p, "builtin")
			p["binary"] = agent
			replaced++
		}
	}
	if replaced == 0 {
		t.Fatalf("%s has no agent program to replace", file)
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), filepath.Base(file))
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
