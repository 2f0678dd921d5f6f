package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/restartbed/restartbed/validate"
)

// validate's exit status and its two output formats, offline (no control plane).
func TestValidateOutputAndExitStatus(t *testing.T) {
	offline := validateFlags{output: "text", dryRun: false}
	var out bytes.Buffer
	err := runValidate(context.Background(), &out, &out, []string{"../../validate/testdata/seed000-story1.yaml"}, offline)
	var exit exitError
	if !errors.As(err, &exit) || exit.code != exitFailed {
		t.Fatalf("errors found: want exit %d, got %v", exitFailed, err)
	}
	first := strings.SplitN(out.String(), "\n", 2)[0]
	if want := "../../validate/testdata/seed000-story1.yaml:10: error: spec.failurePolicy.maxRestarts: placeholder"; !strings.HasPrefix(first, want) {
		t.Errorf("first line %q, want it to start with %q", first, want)
	}
	if !strings.Contains(out.String(), "error(s)") || !strings.Contains(out.String(), "dry-run: turned off") {
		t.Errorf("no summary:\n%s", out.String())
	}

	out.Reset()
	asJSON := offline
	asJSON.output = "json"
	if err := runValidate(context.Background(), &out, &out, []string{"../../validate/testdata/story1-corrected.yaml"}, asJSON); err != nil {
		t.Fatalf("a clean manifest: %v\n%s", err, out.String())
	}
	var rep validate.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, out.String())
	}
	if rep.Documents != 4 || len(rep.Findings) != 0 {
		t.Errorf("report: %+v", rep)
	}
}
