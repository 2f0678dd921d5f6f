package kubernetes

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// serialLabel is the label of the specs that need a node alone.
const serialLabel = "Serial"

// spec is one spec of the chosen files as ginkgo's dry run lists it.
type spec struct {
	file, text string
	// serial: it has the Serial decorator (a kubelet restart, a node reboot) and runs on a
	// cluster alone.
	serial bool
	// runs: the dry run would run it; if not, note says why it is skipped.
	runs bool
	note string
}

func (s spec) key() string { return specKey(s.file, s.text) }

// specReport is what a ginkgo report says of one spec.
type specReport struct {
	spec
	// state is ginkgo's: passed, skipped, pending, failed, timedout, interrupted, ...
	state    string
	failure  string
	duration time.Duration
}

// ginkgoReport is one ginkgo run's report.
type ginkgoReport struct {
	specs []specReport
	// suiteFailures are the failures of the suite's own nodes (BeforeSuite, AfterSuite and the
	// like): after a failed BeforeSuite no spec runs.
	suiteFailures []string
}

// failed reports whether the report says why ginkgo failed: a spec or a suite node that failed.
func (r ginkgoReport) failed() bool {
	return len(r.suiteFailures) > 0 || slices.ContainsFunc(r.specs, func(s specReport) bool { return failedState(s.state) })
}

// find is the report's entry of the spec with the key.
func (r ginkgoReport) find(key string) (specReport, bool) {
	i := slices.IndexFunc(r.specs, func(s specReport) bool { return s.key() == key })
	if i < 0 {
		return specReport{}, false
	}
	return r.specs[i], true
}

// failedState reports whether a ginkgo state is one of its failures.
func failedState(state string) bool {
	return !slices.Contains([]string{"passed", "skipped", "pending"}, state)
}

// readReport reads a ginkgo JSON report: every spec of the chosen files but the out-of-scope
// ones, and the suite nodes that failed.
func readReport(t *testing.T, s suite, reportFile string, runErr error, out []byte) ginkgoReport {
	t.Helper()
	data, err := os.ReadFile(reportFile)
	if err != nil {
		t.Fatalf("ginkgo wrote no report (%v): %v\n%s", runErr, err, tail(string(out), 16<<10))
	}
	rep, err := parseReport(s, data)
	if err != nil {
		t.Fatalf("reading ginkgo's report %s: %v", reportFile, err)
	}
	return rep
}

// parseReport parses a ginkgo JSON report.
func parseReport(s suite, data []byte) (ginkgoReport, error) {
	var reports []struct {
		SpecReports []struct {
			LeafNodeType             string
			LeafNodeText             string
			LeafNodeLocation         struct{ FileName string }
			LeafNodeLabels           []string
			ContainerHierarchyTexts  []string
			ContainerHierarchyLabels [][]string
			IsSerial                 bool
			State                    string
			RunTime                  time.Duration
			Failure                  *struct{ Message string }
		}
	}
	if err := json.Unmarshal(data, &reports); err != nil {
		return ginkgoReport{}, err
	}
	focus := make([]*regexp.Regexp, 0, len(s.focus()))
	for _, f := range s.focus() {
		focus = append(focus, regexp.MustCompile(f))
	}
	var rep ginkgoReport
	for _, r := range reports {
		for _, sr := range r.SpecReports {
			message := ""
			if sr.Failure != nil {
				message = sr.Failure.Message
			}
			if sr.LeafNodeType != "It" {
				if failedState(sr.State) {
					rep.suiteFailures = append(rep.suiteFailures, fmt.Sprintf("%s %s: %s", sr.LeafNodeType, sr.State, firstLine(message)))
				}
				continue
			}
			if !slices.ContainsFunc(focus, func(f *regexp.Regexp) bool { return f.MatchString(sr.LeafNodeLocation.FileName) }) {
				continue
			}
			// Upstream marks a serial spec with the Serial label (framework.WithSerial), which the
			// harness's label filters read; the decorator of the same name counts too.
			serial := sr.IsSerial || slices.Contains(sr.LeafNodeLabels, serialLabel) ||
				slices.ContainsFunc(sr.ContainerHierarchyLabels, func(l []string) bool { return slices.Contains(l, serialLabel) })
			sp := spec{file: filepath.Base(sr.LeafNodeLocation.FileName), text: strings.Join(append(slices.Clone(sr.ContainerHierarchyTexts), sr.LeafNodeText), " "),
				serial: serial}
			if s.outOfScope != "" && regexp.MustCompile(s.outOfScope).MatchString(sp.text) {
				continue
			}
			rep.specs = append(rep.specs, specReport{spec: sp, state: sr.State, failure: message, duration: sr.RunTime})
		}
	}
	return rep, nil
}

// judge gives every spec the dry run listed its outcome:
//   - the dry run skips it: n/a when notApplicable names it (the harness skips those), a failure
//     otherwise (a label filter or a skip nobody decided on);
//   - it was to run: what the report of the step that owns it says. Passed passes. Skipped at
//     run time (the spec skipped itself) is n/a only when notApplicable names it. Missing from
//     the report (a failed BeforeSuite, the suite's timeout, a crash) fails, as does every
//     failure state.
func judge(all []spec, owners map[string]string, reports map[string]ginkgoReport) []result {
	var results []result
	for _, sp := range all {
		r := result{file: sp.file, text: sp.text}
		named := notApplicableReason(sp)
		switch {
		case !sp.runs && named != "":
			r.outcome, r.note = "n/a", named
		case !sp.runs:
			r.outcome, r.note = "fail", "the dry run skips it, and notApplicable does not say why: "+sp.note
		default:
			owner := owners[sp.key()]
			sr, ok := reports[owner].find(sp.key())
			switch {
			case !ok:
				r.outcome, r.note = "fail", fmt.Sprintf("not run: the report of %s does not list it (a failed BeforeSuite, the suite's timeout, a crash?)", owner)
			case sr.state == "passed":
				r.outcome = "pass"
			case failedState(sr.state):
				r.outcome, r.note = "fail", sr.state+": "+firstLine(sr.failure)
			case strings.Contains(sr.failure, "earlier spec in an ordered container failed"):
				r.outcome, r.note = "fail", "not run: an earlier spec of its ordered container failed"
			case named != "":
				r.outcome, r.note = "n/a", named
			default:
				r.outcome, r.note = "fail", fmt.Sprintf("%s on %s, and notApplicable does not say why: %s", sr.state, owner, firstLine(sr.failure))
			}
			r.failure, r.duration = sr.failure, sr.duration
		}
		results = append(results, r)
	}
	slices.SortFunc(results, func(a, b result) int { return strings.Compare(specKey(a.file, a.text), specKey(b.file, b.text)) })
	return results
}

// notApplicableReason is notApplicable's reason for the spec, or "".
func notApplicableReason(sp spec) string {
	for _, na := range notApplicable {
		if (na.file != "" && na.file == sp.file) || (na.text != "" && regexp.MustCompile(na.text).MatchString(sp.text)) {
			return na.reason
		}
	}
	return ""
}

// skipReason says why the dry run skips a spec: ours, or the one it gave.
func skipReason(sp spec, message string) string {
	if r := notApplicableReason(sp); r != "" {
		return r
	}
	if message != "" {
		return "skipped itself: " + firstLine(message)
	}
	return "skipped by the suite's default label filter (off-by-default or deprecated feature)"
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// report logs the results and fails the test for every spec that failed; it reports whether
// none did.
func report(t *testing.T, results []result) bool {
	t.Helper()
	c := count(results)
	for _, r := range results {
		if r.outcome == "fail" {
			t.Errorf("FAIL %s (%s): %s\n%s", r.text, r.duration.Round(time.Second), r.note, tail(r.failure, 4<<10))
		}
	}
	t.Logf("upstream node e2e specs: %d pass, %d fail, %d not applicable", c["pass"], c["fail"], c["n/a"])
	if c["pass"]+c["fail"] == 0 {
		t.Error("no applicable spec ran")
		return false
	}
	return c["fail"] == 0
}

// count counts the results by outcome.
func count(results []result) map[string]int {
	c := map[string]int{}
	for _, r := range results {
		c[r.outcome]++
	}
	return c
}

func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// Markers around the generated tables in docs/upstream-tests.md.
const (
	tableBegin = "<!-- node e2e table: generated by `make node-e2e-docs` (go test ./... -args -update-docs in test/upstream/kubernetes) -->"
	tableEnd   = "<!-- end of node e2e table -->"
)

// summaryRow is the release's row of the summary table.
func summaryRow(r releaseRun) string {
	c := count(r.results)
	return fmt.Sprintf("| %s | %d | %d | **%d** | %d |\n", r.release.Kubernetes, len(r.results), c["pass"]+c["fail"], c["pass"], c["n/a"])
}

// details is the release's table of specs.
func details(r releaseRun) string {
	var b strings.Builder
	c := count(r.results)
	fmt.Fprintf(&b, "<details><summary>Kubernetes %s: %d of %d applicable specs pass</summary>\n\n", r.release.Kubernetes, c["pass"], c["pass"]+c["fail"])
	fmt.Fprintf(&b, "| file | spec | result | why |\n|---|---|---|---|\n")
	for _, res := range r.results {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", res.file, escape(res.text), res.outcome, escape(res.note))
	}
	b.WriteString("\n</details>\n")
	return b.String()
}

// writeDocs replaces what is between the markers: a summary of the releases, then each
// release's table of specs.
func writeDocs(t *testing.T, path string, ran map[string]releaseRun) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	begin, end := strings.Index(doc, tableBegin), strings.Index(doc, tableEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s has no node e2e table markers", path)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nMeasured %s.\n\n| release | specs | applicable | pass | not applicable |\n|---|---|---|---|---|\n", tableBegin,
		time.Now().UTC().Format("2006-01-02"))
	minors := slices.Sorted(maps.Keys(ran))
	for _, minor := range minors {
		b.WriteString(summaryRow(ran[minor]))
	}
	for _, minor := range minors {
		b.WriteString("\n" + details(ran[minor]))
	}
	doc = doc[:begin] + b.String() + "\n" + doc[end:]
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkDocs fails t when the docs' tables do not say what the release's run found: its row of
// the summary and its table of specs, each spec's outcome and note.
func checkDocs(t *testing.T, path string, r releaseRun) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, want := range []string{summaryRow(r), details(r)} {
		if !strings.Contains(doc, want) {
			t.Errorf("%s does not say what this run of %s found (its row or its table differs): run `make node-e2e-docs` and commit the tables; this run's:\n%s",
				path, r.release.Kubernetes, want)
		}
	}
}
