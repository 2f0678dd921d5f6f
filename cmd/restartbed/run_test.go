package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restartbed/restartbed/envtest/controlplane"
)

// markingControlPlane points the user cache at control planes of every release whose binaries
// only leave a mark when they run, and returns the mark's path: a test that must start nothing
// checks that the mark does not exist.
func markingControlPlane(t *testing.T) string {
	t.Helper()
	cache := t.TempDir()
	mark := filepath.Join(t.TempDir(), "started")
	for _, r := range controlplane.Releases() {
		dir := filepath.Join(cache, "restartbed", "controlplane", r.Key())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, bin := range controlplane.Binaries {
			script := "#!/bin/sh\ntouch " + mark + "\nexit 1\n"
			if err := os.WriteFile(filepath.Join(dir, bin), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Setenv("XDG_CACHE_HOME", cache)
	return mark
}

// A malformed scenario exits 2 with FILE:LINE and starts nothing.
func TestRunRefusesMalformedScenarios(t *testing.T) {
	mark := markingControlPlane(t)
	head := "apiVersion: restartbed.dev/v1alpha1\nkind: Scenario\nmetadata: {name: bad}\nspec:\n"
	for _, tc := range []struct{ name, body, want string }{
		{"unknown field", "  stpes: []\n", "s.yaml:5: spec.stpes: unknown field"},
		{"bad CEL", "  steps:\n  - waitFor: 'pods.size( =='\n", "s.yaml:6: spec.steps[0].waitFor: CEL does not compile"},
		{"missing file", "  objects:\n  - file: nowhere.yaml\n", "s.yaml:6: spec.objects[0].file: cannot read"},
		{"bad duration", "  steps:\n  - sleep: 5 seconds\n", "s.yaml:6: spec.steps[0].sleep: bad duration \"5 seconds\""},
		{"two actions in a step", "  steps:\n  - sleep: 1s\n    expect: 'true'\n", "s.yaml:6: spec.steps[0]: 2 actions (expect, sleep)"},
		{"unsupported Kubernetes version", "  kubernetesVersion: '1.34'\n", "s.yaml:5: spec.kubernetesVersion: Kubernetes 1.34 is not supported; supported: 1.35 (v1.35.8), 1.36 (v1.36.4), 1.37 (v1.37.2)"},
		{"gate locked in the scenario's release", "  kubernetesVersion: '1.37'\n  featureGates: {NodeDeclaredFeatures: false}\n", "s.yaml:6: spec.featureGates: feature gates of Kubernetes v1.37.2: cannot set feature gate NodeDeclaredFeatures to false"},
		{"bad pod reference", "  steps:\n  - exec: {pod: {selector: 'a in (b'}, container: c, command: [true]}\n", "s.yaml:6: spec.steps[0].exec.pod.selector: bad label selector"},
		{"missing binary", "  programs:\n  - container: agent\n    binary: bin/agent\n", "s.yaml:7: spec.programs[0].binary: cannot use "},
		{"binary with another program", "  programs:\n  - container: agent\n    builtin: agent\n    binary: /bin/true\n", "s.yaml:6: spec.programs[0]: exactly one of builtin, program, run and binary must be set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "s.yaml")
			if err := os.WriteFile(file, []byte(head+tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			err := runScenarios(context.Background(), &out, &errOut, []string{file}, runFlags{parallel: 1})
			var exit exitError
			if !errors.As(err, &exit) || exit.code != exitInvalid {
				t.Fatalf("want exit %d, got %v", exitInvalid, err)
			}
			if got := strings.ReplaceAll(errOut.String(), filepath.Dir(file)+"/", ""); !strings.Contains(got, tc.want) {
				t.Errorf("stderr:\n%s\nwant it to contain %q", got, tc.want)
			}
			if _, err := os.Stat(mark); err == nil {
				t.Fatal("a control-plane binary ran")
			}
		})
	}
}

// A scenario that names a host binary is refused without --allow-host-binaries: exit 2 with
// FILE:LINE, and nothing starts.
func TestRunRefusesHostBinariesWithoutOptIn(t *testing.T) {
	mark := markingControlPlane(t)
	dir, file := hostBinaryScenario(t)
	var out, errOut bytes.Buffer
	err := runScenarios(context.Background(), &out, &errOut, []string{file}, runFlags{parallel: 1})
	var exit exitError
	if !errors.As(err, &exit) || exit.code != exitInvalid || !strings.Contains(err.Error(), "--allow-host-binaries was not given; nothing was started") {
		t.Fatalf("want exit %d refusing the host binary, got %v", exitInvalid, err)
	}
	want := file + ":7: spec.programs[0].binary: names the host binary " + filepath.Join(dir, "agent") + ", and this run does not allow host binaries"
	if !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr:\n%s\nwant it to contain %q", errOut.String(), want)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("a control-plane binary ran")
	}
}

// hostBinaryScenario writes a scenario whose program runs dir/agent, an executable, at line 7.
func hostBinaryScenario(t *testing.T) (dir, file string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "agent"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(dir, "s.yaml")
	body := "apiVersion: restartbed.dev/v1alpha1\nkind: Scenario\nmetadata: {name: agent}\nspec:\n  programs:\n  - container: agent\n    binary: agent\n"
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

// --kubernetes-version is checked for every scenario, with the scenario's own gates, before
// anything starts.
func TestRunChecksTheVersionFlag(t *testing.T) {
	mark := markingControlPlane(t)
	file := filepath.Join(t.TempDir(), "s.yaml")
	// HPAConfigurableTolerance is beta in 1.36 and GA, locked, in 1.37.
	body := "apiVersion: restartbed.dev/v1alpha1\nkind: Scenario\nmetadata: {name: ok}\nspec:\n  kubernetesVersion: '1.36'\n" +
		"  featureGates: {HPAConfigurableTolerance: false}\n"
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	for version, want := range map[string]string{
		"1.34": "Kubernetes 1.34 is not supported",
		"1.37": "s.yaml: feature gates of Kubernetes v1.37.2: cannot set feature gate HPAConfigurableTolerance to false",
	} {
		var out, errOut bytes.Buffer
		err := runScenarios(context.Background(), &out, &errOut, []string{file}, runFlags{parallel: 1, version: version})
		var exit exitError
		if !errors.As(err, &exit) || exit.code != exitInvalid || !strings.Contains(err.Error(), want) {
			t.Errorf("--kubernetes-version %s: got %v, want exit %d saying %q", version, err, exitInvalid, want)
		}
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("a control-plane binary ran")
	}
}
