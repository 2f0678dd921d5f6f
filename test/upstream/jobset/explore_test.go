package jobset

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/explore"
	"github.com/restartbed/restartbed/test/specs"
)

// The upstream sweep of docs/explore.md; make explore-upstream sets these.
var (
	exploreSweep = flag.Bool("explore-sweep", false,
		"explore Story 1, Story 2 and the node-loss scenario with every default fault instead of the smoke run")
	exploreBudget = flag.Duration("explore-budget", 0, "with -explore-sweep, how long each scenario's sweep may start schedules (0: until every one ran)")
	exploreOut    = flag.String("explore-out", "",
		"with -explore-sweep, the directory for each scenario's report (text and JSON) and its violations' scenarios")
)

// exploredScenarios are the bundled scenarios the sweep explores.
var exploredScenarios = []string{"story1-fast-recovery", "story2-recreate-then-fail", "inplace-restart-node-loss"}

// TestExploreUpstream explores KEP-467's stories with upstream JobSet v0.12.0's manager and its
// agent binary, every built-in invariant judged on upstream's behaviour. By default it is the
// smoke run: Story 1, four schedules of a few faults (the agent's exit, the manager's restart,
// every pod's connections reset) at points where the group starts or restarts. With
// -explore-sweep it is docs/explore.md's sweep (make explore-upstream). What a sweep finds is written up in
// docs/explore.md, not asserted here: the test fails only when explore cannot run upstream (a
// reference run fails, a replay errors) or a violation's scenario is not written.
func TestExploreUpstream(t *testing.T) {
	t.Parallel()
	agent, manager := upstreamBinaries(t)
	opts := upstreamOptions(t, func(ctx context.Context, cluster *envtest.Cluster) error {
		start, err := managerStart(ctx, cluster, manager, cluster.Dir(), inPlaceGate, &specs.SyncBuffer{})
		if err != nil {
			return err
		}
		return cluster.RunController(start) // restart-controller kills and starts it
	})
	if !*exploreSweep {
		rep := exploreUpstream(t, agent, "story1-fast-recovery", t.TempDir(), explore.Options{
			Faults:       []string{"exit-agent", "restart-controller", "reset-connections"},
			PointFilter:  func(p explore.Point) bool { return strings.Contains(p.Description, "attempt") },
			MaxSchedules: 4, Run: opts,
		})
		if len(rep.Schedules) != 4 {
			t.Errorf("%d schedules ran, want 4", len(rep.Schedules))
		}
		return
	}
	out := *exploreOut
	if out == "" {
		out = t.TempDir()
	}
	// The violations' scenarios name the agent binary: keep it beside them.
	agent = keepBinary(t, agent, out)
	for _, name := range exploredScenarios {
		t.Run(name, func(t *testing.T) {
			exploreUpstream(t, agent, name, filepath.Join(out, name), explore.Options{
				Faults: explore.DefaultFaults(true), Budget: *exploreBudget, Run: opts,
			})
		})
	}
}

// keepBinary copies the binary into dir and returns the copy's absolute path.
func keepBinary(t *testing.T, binary, dir string) string {
	t.Helper()
	data, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := filepath.Abs(filepath.Join(dir, filepath.Base(binary)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kept, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return kept
}

// exploreUpstream explores the bundled scenario with upstream's agent binary, two replays at
// once and seed 1, writes the report into out (NAME.txt, NAME.json, violations under NAME/),
// logs it and fails t if explore could not run a schedule.
func exploreUpstream(t *testing.T, agent, name, out string, opts explore.Options) *explore.Report {
	t.Helper()
	file := withAgentBinary(t, filepath.Join("..", "..", "..", "scenarios", "examples", name+".yaml"), agent)
	var progress strings.Builder
	opts.Parallel, opts.Seed, opts.Confirm, opts.OutDir, opts.Progress = 2, 1, 1, out, &progress
	rep, err := explore.Explore(context.Background(), file, opts)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	_ = rep.WriteText(&text)
	t.Logf("%s\n%s", progress.String(), text.String())
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, content := range map[string][]byte{name + ".txt": []byte(text.String()), name + ".json": data} {
		if err := os.WriteFile(filepath.Join(out, file), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if rep.Reference.Verdict != explore.Held {
		t.Fatalf("the reference run of %s with upstream's manager and agent: %s: %s", name, rep.Reference.Verdict, rep.Reference.Detail)
	}
	for _, s := range rep.Schedules {
		switch {
		case s.Verdict == explore.Errored:
			t.Errorf("schedule %s could not run: %s", s.String(), s.Detail)
		case s.Verdict == explore.Violated && s.File == "":
			t.Errorf("schedule %s broke an invariant and no scenario was written for it", s.String())
		}
	}
	return rep
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
