// Package validate runs restartbed validate's dry-run and drill on the embedded control plane,
// with the seed stories as they were written and as corrected.
package validate

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restartbed/restartbed/validate"
)

const testdata = "../../validate/testdata/"

// The testdata files seed000-*.yaml are KEP-467's Story 1 and Story 2 manifests and its agent
// RBAC, copied verbatim from the KEP's draft (the sections "Story 1", "Story 2" and
// "Implementation - Permissions for the agent sidecar"); the findings below name their lines.
// They must stay as copied: the hashes were taken when the copies were checked against the draft.
func TestSeedManifestsAreAsCopied(t *testing.T) {
	for file, want := range map[string]string{
		"seed000-story1.yaml": "fbf4965f846f496d06805667d2c30485dfa022e051a9b7697b6068cd727213e9",
		"seed000-story2.yaml": "a097ee20a68815304df6b9017c80c8b80e459026f3137b23896ab0ed0f387ad7",
		"seed000-rbac.yaml":   "62bd357804cc984f245ed315d779fc591fac45489bcb25594b5fd5ab3542a8d1",
	} {
		data, err := os.ReadFile(testdata + file)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%x", sha256.Sum256(data)); got != want {
			t.Errorf("%s changed (sha256 %s): it must stay the seed's manifest as written; put corrections in a file of their own", file, got)
		}
	}
}

func find(rep *validate.Report, file string, line int, path, words string) bool {
	for _, f := range rep.Findings {
		if filepath.Base(f.File) == file && f.Line == line && f.Severity == validate.Error && strings.HasSuffix(f.Path, path) &&
			strings.Contains(f.Message, words) {
			return true
		}
	}
	return false
}

// The apiserver's words for what the seeds' manifests would hit once deployed, each with its
// released fix; the offline findings are covered by the validate package's own tests.
func TestSeedStoriesOnTheApiserver(t *testing.T) {
	rep, err := validate.Run(context.Background(), []string{testdata + "seed000-story1.yaml", testdata + "seed000-story2.yaml"},
		validate.Options{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		file        string
		line        int
		path, words string
	}{
		{"seed000-story1.yaml", 79, "spec.resources.requests[google.com/tpu]", "request extended resources such as google.com/tpu as container limits"},
		{"seed000-story1.yaml", 67, "containers[0].image", "the controller's Job jobset-example-in-place-restart-workers-0 would be refused"},
		{"seed000-story2.yaml", 37, "template.spec.template.spec.restartPolicy", `only "Never" is supported when podFailurePolicy is specified — JobSet's webhook sets an empty pod restartPolicy to OnFailure`},
		{"seed000-story2.yaml", 98, "spec.resources.requests[google.com/tpu]", "container limits"},
	} {
		if !find(rep, w.file, w.line, w.path, w.words) {
			t.Errorf("%s:%d: no error at %s saying %q", w.file, w.line, w.path, w.words)
		}
	}
	if t.Failed() {
		for _, f := range rep.Findings {
			t.Log(f)
		}
	}
}

// The corrected stories validate clean on the apiserver, and Story 1's group restarts in place
// when a worker crashes.
func TestCorrectedStoriesAreCleanAndRestartInPlace(t *testing.T) {
	rep, err := validate.Run(context.Background(), []string{testdata + "story1-corrected.yaml"},
		validate.Options{DryRun: true, Drill: &validate.DrillOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("unexpected: %s", f)
	}
	if rep.DryRun != rep.Documents || rep.Documents != 4 {
		t.Errorf("the apiserver accepted %d of %d documents, want 4 of 4", rep.DryRun, rep.Documents)
	}
	d := rep.Drill
	if d == nil || !d.Passed() || d.Recreated != 0 || d.Pods != 4 || d.GroupRestart <= 0 {
		t.Fatalf("drill: %+v", d)
	}
	t.Log(d)

	rep, err = validate.Run(context.Background(), []string{testdata + "story2-corrected.yaml"}, validate.Options{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("unexpected: %s", f)
	}
}

// A drill whose agents have no permissions reports that the group never came up, with the pods.
func TestDrillReportsABarrierThatNeverLifts(t *testing.T) {
	data, err := os.ReadFile(testdata + "story1-corrected.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "\n---\n")
	file := filepath.Join(t.TempDir(), "jobset-only.yaml")
	if err := os.WriteFile(file, []byte(docs[len(docs)-1]), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := validate.Run(context.Background(), []string{file},
		validate.Options{DryRun: true, Drill: &validate.DrillOptions{Timeout: 10e9, Timing: "fast"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Count(validate.Error) != 0 || rep.Count(validate.Warning) != 1 {
		t.Errorf("want only the warning that no RBAC is among the files: %v", rep.Findings)
	}
	d := rep.Drill
	if d == nil || d.Passed() || d.Skipped != "" || !strings.Contains(d.Report, "barrier-is-down") {
		t.Fatalf("drill: %+v", d)
	}
}
