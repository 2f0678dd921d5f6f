package cli

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/restartbed/restartbed/explore"
)

// `restartbed explore` as CI or a user runs it: one fault at one point of a steady JobSet, the
// report as JSON and JUnit, exit status 0 when every invariant held.
func TestExplore(t *testing.T) {
	t.Parallel() // its own process and cluster
	bin := buildCLI(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	junit := filepath.Join(dir, "explore.xml")
	cmd := exec.CommandContext(ctx, bin, "explore", "../explore/testdata/steady.yaml", "--faults", "restart-scheduler",
		"--point-match", "JobSet story1: status.currentInPlaceRestartAttempt is 0", "--out", filepath.Join(dir, "violations"),
		"-o", "json", "--junit", junit)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
			stderr = exit.Stderr
		}
		t.Fatalf("restartbed explore: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
	}
	var rep explore.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("the JSON report: %v\n%s", err, out)
	}
	if rep.Reference.Verdict != explore.Held || len(rep.Points) == 0 || len(rep.Schedules) != 1 {
		t.Fatalf("reference %s, %d points, %d schedules; want a reference that held, points, 1 schedule:\n%s",
			rep.Reference.Verdict, len(rep.Points), len(rep.Schedules), out)
	}
	if s := rep.Schedules[0]; s.Fault != "restart-scheduler" || s.Verdict != explore.Held {
		t.Errorf("schedule: %s %s (%s), want restart-scheduler held", s.Fault, s.Verdict, s.Detail)
	}
	xml, err := os.ReadFile(junit)
	if err != nil || !strings.Contains(string(xml), `<testsuite name="explore ../explore/testdata/steady.yaml" tests="1" failures="0"`) {
		t.Errorf("--junit: %v\n%s", err, xml)
	}
}

// --controller runs the user's controller against each replay's cluster with its kubeconfig, in
// place of restartbed's JobSet controller: here one that labels the node the scenario waits for.
// The restart-controller fault kills it and starts it again.
func TestExploreRunsTheUsersController(t *testing.T) {
	t.Parallel() // its own process and cluster
	bin, kubectl := buildCLI(t), kubectl(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	starts := filepath.Join(t.TempDir(), "starts")
	cmd := exec.CommandContext(ctx, bin, "explore", "testdata/explore-controller.yaml", "--out", t.TempDir(), "-o", "json",
		"--faults", "restart-controller", "--max-schedules", "1",
		"--controller", "echo started >> "+starts+" && "+kubectl+` label --overwrite node node-0 controller=ran && exec sleep 600`)
	out, err := cmd.Output()
	var rep explore.Report
	if err != nil || json.Unmarshal(out, &rep) != nil || rep.Reference.Verdict != explore.Held || len(rep.Schedules) != 1 || rep.Schedules[0].Verdict != explore.Held {
		var stderr []byte
		if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
			stderr = exit.Stderr
		}
		t.Fatalf("restartbed explore --controller: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
	}
	// Once for the reference run, twice for the schedule: started, killed, started again.
	if data, err := os.ReadFile(starts); err != nil || strings.Count(string(data), "started") != 3 {
		t.Errorf("the controller started %q times (%v), want 3", data, err)
	}
	// A violation's scenario replays with the same controller.
	if want := "restartbed run --controller "; !strings.HasPrefix(rep.Replay, want) {
		t.Errorf("the report's replay command is %q, want it to start with %q", rep.Replay, want)
	}
}

// restartbed run --controller runs the user's controller for the scenario, and its
// killComponent and startComponent steps kill it and start it again.
func TestRunRunsTheUsersController(t *testing.T) {
	t.Parallel() // its own process and cluster
	bin, kubectl := buildCLI(t), kubectl(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	starts := filepath.Join(t.TempDir(), "starts")
	cmd := exec.CommandContext(ctx, bin, "run", "testdata/run-controller.yaml",
		"--controller", "echo started >> "+starts+" && "+kubectl+` label --overwrite node node-0 controller=start-$(wc -l < `+starts+`) && exec sleep 600`)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("restartbed run --controller: %v\n%s", err, out)
	}
	if data, err := os.ReadFile(starts); err != nil || strings.Count(string(data), "started") != 2 {
		t.Errorf("the controller started %q times (%v), want 2", data, err)
	}
}

// Bad input is refused with what is wrong, before anything starts.
func TestExploreRefusesBadInput(t *testing.T) {
	t.Parallel() // its own process and cluster
	bin := buildCLI(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--shard", "2/2"}, `--shard "2/2": give i/n with 0 <= i < n`},
		{[]string{"--faults", "exit-worker,flood"}, `--faults: unknown fault "flood": the faults are exit-worker, `},
		{[]string{"-o", "yaml"}, `-o "yaml": use text or json`},
		{[]string{"-p", "0"}, `-p must be at least 1, got 0`},
	} {
		args := append([]string{"explore", "../explore/testdata/steady.yaml"}, tc.args...)
		cmd := exec.Command(bin, args...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("restartbed %v: %v, want exit status 2 and %q:\n%s", args, err, tc.want, out)
		}
	}
}
