package kubernetes

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The harness's own decisions, without a cluster: how specs are dealt, and how reports are
// judged.

func TestSchedule(t *testing.T) {
	specs := []spec{
		{file: "a.go", text: "p1", runs: true},
		{file: "a.go", text: "p2", runs: true},
		{file: "a.go", text: "skipped", runs: false},
		{file: "b.go", text: "[Serial] s90", serial: true, runs: true},
		{file: "b.go", text: "[Serial] s80", serial: true, runs: true},
		{file: "b.go", text: "[Serial] s70", serial: true, runs: true},
		{file: "b.go", text: "[Serial] s60", serial: true, runs: true},
		{file: "b.go", text: "[Serial] new", serial: true, runs: true}, // not recorded: the median, 80 s
	}
	rec := durations{Parallel: 100, Specs: map[string]float64{
		specKey("b.go", "[Serial] s90"): 90, specKey("b.go", "[Serial] s80"): 80,
		specKey("b.go", "[Serial] s70"): 70, specKey("b.go", "[Serial] s60"): 60,
	}}
	got := func(lanes []lane) string {
		var out string
		for _, l := range lanes {
			out += fmt.Sprintf("%s %s:", l.name, l.estimate)
			for _, s := range l.steps {
				out += " " + s.name + "["
				for _, sp := range s.specs {
					out += " " + sp.text
				}
				out += " ]"
			}
			out += "\n"
		}
		return out
	}
	// Longest first, each to the least loaded: s90 and new (80 s, the median, before s80 by
	// name) to the empty clusters 2 and 3, s80 to the one at 80, s70 to the one at 90, s60 to
	// the parallel cluster at 100.
	want := "cluster-1 2m40s: parallel[ p1 p2 ] serial[ [Serial] s60 ]\n" +
		"cluster-2 2m40s: serial[ [Serial] s90 [Serial] s70 ]\n" +
		"cluster-3 2m40s: serial[ [Serial] new [Serial] s80 ]\n"
	if diff := cmp.Diff(want, got(schedule(specs, rec, 3, false))); diff != "" {
		t.Errorf("schedule (-want +got):\n%s", diff)
	}
	// Last: the same deal, the parallel step after the serial one.
	want = "cluster-1 2m40s: serial[ [Serial] s60 ] parallel[ p1 p2 ]\n" +
		"cluster-2 2m40s: serial[ [Serial] s90 [Serial] s70 ]\n" +
		"cluster-3 2m40s: serial[ [Serial] new [Serial] s80 ]\n"
	if diff := cmp.Diff(want, got(schedule(specs, rec, 3, true))); diff != "" {
		t.Errorf("schedule, parallel last (-want +got):\n%s", diff)
	}
	// Nothing recorded: the defaults; a cluster with nothing to run is left out.
	want = "cluster-1 9m0s: parallel[ p1 ]\n"
	if diff := cmp.Diff(want, got(schedule(specs[:1], durations{}, 3, false))); diff != "" {
		t.Errorf("schedule without durations (-want +got):\n%s", diff)
	}
}

func TestFocusOf(t *testing.T) {
	got := focusOf([]spec{{text: "b [Serial] x (y)"}, {text: "a"}})
	if want := ` (?:a|b \[Serial\] x \(y\))$`; got != want {
		t.Errorf("focusOf = %q, want %q", got, want)
	}
}

func TestJudge(t *testing.T) {
	defer func(na []notApplicableSpec) { notApplicable = na }(notApplicable)
	notApplicable = []notApplicableSpec{{text: "^needs a GPU", reason: "no GPU"}}
	all := []spec{
		{file: "f.go", text: "passes", runs: true},
		{file: "f.go", text: "fails", runs: true},
		{file: "f.go", text: "missing", runs: true},
		{file: "f.go", text: "skips itself", runs: true},
		{file: "f.go", text: "needs a GPU", runs: false, note: "no GPU"},
		{file: "f.go", text: "label filtered", runs: false, note: "skipped by the suite's default label filter"},
		{file: "f.go", text: "ordered", runs: true},
	}
	owners := map[string]string{}
	for _, s := range all {
		owners[s.key()] = "cluster-1/parallel"
	}
	reports := map[string]ginkgoReport{"cluster-1/parallel": {specs: []specReport{
		{spec: all[0], state: "passed", duration: time.Second},
		{spec: all[1], state: "timedout", failure: "took too long\nmore"},
		{spec: all[3], state: "skipped", failure: "Skipping: gate off"},
		{spec: all[6], state: "skipped", failure: "Spec skipped because an earlier spec in an ordered container failed"},
	}}}
	var got []string
	for _, r := range judge(all, owners, reports) {
		got = append(got, r.text+": "+r.outcome+": "+r.note)
	}
	want := []string{
		"fails: fail: timedout: took too long",
		"label filtered: fail: the dry run skips it, and notApplicable does not say why: skipped by the suite's default label filter",
		"missing: fail: not run: the report of cluster-1/parallel does not list it (a failed BeforeSuite, the suite's timeout, a crash?)",
		"needs a GPU: n/a: no GPU",
		"ordered: fail: not run: an earlier spec of its ordered container failed",
		"passes: pass: ",
		"skips itself: fail: skipped on cluster-1/parallel, and notApplicable does not say why: Skipping: gate off",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("judge (-want +got):\n%s", diff)
	}
}

func TestParseReportSuiteFailures(t *testing.T) {
	data := []byte(`[{"SpecReports": [
		{"LeafNodeType": "BeforeSuite", "State": "failed", "Failure": {"Message": "the node is not Ready\nwaited 5m"}},
		{"LeafNodeType": "It", "LeafNodeText": "x", "LeafNodeLocation": {"FileName": "/m/test/e2e_node/container_lifecycle_test.go"},
		 "ContainerHierarchyTexts": ["[sig-node] A", "B"], "ContainerHierarchyLabels": [["sig-node"], ["Serial"]], "State": "skipped"},
		{"LeafNodeType": "It", "LeafNodeText": "y", "LeafNodeLocation": {"FileName": "/m/test/e2e_node/other_test.go"}, "State": "passed"}
	]}]`)
	rep, err := parseReport(suites["1.37"], data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"BeforeSuite failed: the node is not Ready"}, rep.suiteFailures); diff != "" {
		t.Errorf("suite failures (-want +got):\n%s", diff)
	}
	want := []specReport{{spec: spec{file: "container_lifecycle_test.go", text: "[sig-node] A B x", serial: true}, state: "skipped"}}
	if diff := cmp.Diff(want, rep.specs, cmp.AllowUnexported(specReport{}, spec{})); diff != "" {
		t.Errorf("specs (-want +got):\n%s", diff)
	}
	if !rep.failed() {
		t.Error("a report with a failed BeforeSuite must count as failed")
	}
}
