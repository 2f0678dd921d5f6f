package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad flags and an unreadable --compare exit 2 with what is wrong, before any control plane
// starts.
func TestBenchRefusesBadFlags(t *testing.T) {
	mark := markingControlPlane(t)
	notReport := filepath.Join(t.TempDir(), "scenario.json") // also a file that is not executable
	if err := os.WriteFile(notReport, []byte(`{"kind": "Scenario"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pods", "0"}, "--pods must be at least 1, got 0"},
		{[]string{"--pods", "10"}, "--pods 10 is not a multiple of --pods-per-job 4"},
		{[]string{"--strategy", "blocking"}, `--strategy must be inplace, recreate or both, got "blocking"`},
		{[]string{"-o", "yaml"}, `-o must be table or json, got "yaml"`},
		{[]string{"--timing", "slow"}, "--timing:"},
		{[]string{"--compare", filepath.Join(t.TempDir(), "missing.json")}, "--compare: open"},
		{[]string{"--compare", notReport}, "--compare: " + notReport + ": not a restartbed bench JSON report"},
		{[]string{"--heartbeats-per-second", "-1"}, "--heartbeats-per-second must be 0"},
		{[]string{"extra"}, `unknown command "extra"`},
		{[]string{"--cpuprofile", "a.pprof", "--restart-cpuprofile", "b.pprof"}, "--cpuprofile and --restart-cpuprofile cannot be given together"},
		{[]string{"--restart-cpuprofile", filepath.Join(t.TempDir(), "no", "dir", "restart.pprof")}, "--restart-cpuprofile: open"},
		{[]string{"--agent-binary", "/bin/true"}, "--agent-binary names the host binary /bin/true, and --allow-host-binaries was not given"},
		{[]string{"--agent-binary", "/no/such/agent", "--allow-host-binaries"}, "--agent-binary: stat /no/such/agent"},
		{[]string{"--agent-binary", notReport, "--allow-host-binaries"}, "--agent-binary: " + notReport + " is not an executable file"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := newRootCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(append([]string{"bench"}, tc.args...))
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("bench %v = %v, want an error containing %q", tc.args, err, tc.want)
			}
			var exit exitError
			if errors.As(err, &exit) && exit.code != exitInvalid {
				t.Errorf("exit %d, want %d", exit.code, exitInvalid)
			}
			if _, err := os.Stat(mark); err == nil {
				t.Fatal("a control-plane binary ran")
			}
		})
	}
}

// validate's drill takes a host binary as its agents only with --allow-host-binaries and --drill.
func TestValidateDrillRefusesHostBinariesWithoutOptIn(t *testing.T) {
	mark := markingControlPlane(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--drill", "--drill-agent-binary", "/bin/true"}, "--drill-agent-binary names the host binary /bin/true, and --allow-host-binaries was not given"},
		{[]string{"--drill-agent-binary", "/bin/true", "--allow-host-binaries"}, "--drill-agent-binary needs --drill"},
	} {
		cmd := newRootCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append([]string{"validate", "x.yaml"}, tc.args...))
		err := cmd.Execute()
		var exit exitError
		if !errors.As(err, &exit) || exit.code != exitInvalid || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("validate %v = %v, want exit %d saying %q", tc.args, err, exitInvalid, tc.want)
		}
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("a control-plane binary ran")
	}
}
