package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// markingControlPlane points KUBEBUILDER_ASSETS at a kube-apiserver and an etcd that only leave
// a mark when they run, and returns the mark's path: a test that must start nothing checks that
// the mark does not exist.
func markingControlPlane(t *testing.T) string {
	t.Helper()
	assets := t.TempDir()
	mark := filepath.Join(t.TempDir(), "started")
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		script := "#!/bin/sh\ntouch " + mark + "\nexit 1\n"
		if err := os.WriteFile(filepath.Join(assets, bin), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("KUBEBUILDER_ASSETS", assets)
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
		{"bad pod reference", "  steps:\n  - exec: {pod: {selector: 'a in (b'}, container: c, command: [true]}\n", "s.yaml:6: spec.steps[0].exec.pod.selector: bad label selector"},
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
