package scenarios

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/restartbed/restartbed/internal/junit"
)

// reporter writes a scenario's report as it runs. Lines are prefixed with the scenario's name,
// so that scenarios running in parallel can share a writer.
type reporter struct {
	w  io.Writer
	sc *Scenario
}

// lockedWriter serializes whole writes to w; Run's reports write one line at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// SyncWriter returns a writer that scenarios running in parallel can share.
func SyncWriter(w io.Writer) io.Writer { return &lockedWriter{w: w} }

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (r *reporter) printf(format string, args ...any) {
	if r.w == nil {
		return
	}
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(fmt.Sprintf(format, args...), "\n"), "\n") {
		fmt.Fprintf(&b, "%s | %s\n", r.sc.Metadata.Name, line)
	}
	_, _ = io.WriteString(r.w, b.String()) // progress output: a failed write loses only the progress line
}

func (r *reporter) header() {
	desc := strings.Join(strings.Fields(r.sc.Spec.Description), " ")
	if desc != "" {
		desc = ": " + desc
	}
	r.printf("RUN %s (%s, timing %s)%s", r.sc.Metadata.Name, r.sc.File, r.sc.Spec.Timing, desc)
}

func (r *reporter) step(s StepResult) {
	r.printf("%3d  %-4s  %7s  at %-7s  %s", s.Index, s.Status, round(s.Took), round(s.At), oneLine(s.Title, 100))
	if s.Failure != "" {
		r.printf("%s", indent(s.Failure))
	}
}

func (r *reporter) violation(v Violation) {
	r.printf("BROKEN %s", v)
	if len(v.Trace) > 0 {
		r.printf("  the changes observed before it, oldest first:\n%s", indent(strings.Join(v.Trace, "\n")))
	}
}

// summary is one line of an observed object: what a reader of a violation needs of it.
func summary(u *unstructured.Unstructured) string {
	obj := u.Object
	name := u.GetKind() + " " + u.GetName()
	switch u.GetKind() {
	case "Pod":
		phase, _, _ := unstructured.NestedString(obj, "status", "phase")
		node, _, _ := unstructured.NestedString(obj, "spec", "nodeName")
		parts := []string{name, orDash(phase), "node=" + orDash(node)}
		if a, ok := u.GetAnnotations()["jobset.sigs.k8s.io/in-place-restart-attempt"]; ok {
			parts = append(parts, "attempt="+a)
		}
		if u.GetDeletionTimestamp() != nil {
			parts = append(parts, "terminating")
		}
		for _, field := range []string{"initContainerStatuses", "containerStatuses"} {
			statuses, _, _ := unstructured.NestedSlice(obj, "status", field)
			for _, s := range statuses {
				sm, _ := s.(map[string]any)
				parts = append(parts, fmt.Sprintf("%v=%s/%v", sm["name"], containerState(sm), sm["restartCount"]))
			}
		}
		return strings.Join(parts, " ")
	case "JobSet":
		parts := []string{name}
		for _, f := range []string{"restarts", "currentInPlaceRestartAttempt", "previousInPlaceRestartAttempt", "terminalState"} {
			if v, ok, _ := unstructured.NestedFieldNoCopy(obj, "status", f); ok {
				parts = append(parts, fmt.Sprintf("%s=%v", f, v))
			}
		}
		return strings.Join(parts, " ")
	case "Node":
		conds, _, _ := unstructured.NestedSlice(obj, "status", "conditions")
		for _, c := range conds {
			if cm, _ := c.(map[string]any); cm["type"] == "Ready" {
				return fmt.Sprintf("%s Ready=%v", name, cm["status"])
			}
		}
	case "Event":
		reason, _, _ := unstructured.NestedString(obj, "reason")
		involved, _, _ := unstructured.NestedString(obj, "involvedObject", "name")
		return fmt.Sprintf("%s %s of %s", name, reason, involved)
	}
	return name
}

func (r *reporter) summary(res *Result) {
	if res.Err != nil {
		r.printf("ERROR %v", res.Err)
	}
	passed, skipped := 0, 0
	for _, s := range res.Steps {
		switch s.Status {
		case Passed:
			passed++
		case Skipped:
			skipped++
		}
	}
	verdict := "PASS"
	if !res.Passed() {
		verdict = "FAIL"
	}
	broken := ""
	if n := len(res.Violations); n > 0 {
		broken = fmt.Sprintf(", %d invariant(s) broken", n)
	}
	r.printf("%s %s: %d/%d steps passed, %d skipped%s (wall %s)", verdict, r.sc.Metadata.Name, passed, len(res.Steps), skipped, broken, round(res.Wall))
}

func round(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		return s[:max-3] + "..."
	}
	return s
}

// podTable shows the pods the way a reader needs them to see why a step failed: phase, the
// conditions that hold, each container's state and restart count.
func podTable(pods []map[string]any) string {
	if len(pods) == 0 {
		return "pods: none in the scenario's namespace\n"
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tNODE\tPHASE\tCONDITIONS\tCONTAINERS (state, restarts)")
	for _, p := range pods {
		// A pod's fields have these types in the apiserver's objects; a missing one reads as empty.
		name, _, _ := unstructured.NestedString(p, "metadata", "name")
		if ts, ok, _ := unstructured.NestedString(p, "metadata", "deletionTimestamp"); ok && ts != "" {
			name += " (terminating)"
		}
		node, _, _ := unstructured.NestedString(p, "spec", "nodeName")
		phase, _, _ := unstructured.NestedString(p, "status", "phase")
		var conds []string
		list, _, _ := unstructured.NestedSlice(p, "status", "conditions")
		for _, c := range list {
			cm, _ := c.(map[string]any)
			if cm["status"] == "True" {
				conds = append(conds, fmt.Sprint(cm["type"]))
			}
		}
		var containers []string
		for _, field := range []string{"initContainerStatuses", "containerStatuses"} {
			statuses, _, _ := unstructured.NestedSlice(p, "status", field)
			for _, s := range statuses {
				sm, _ := s.(map[string]any)
				containers = append(containers, fmt.Sprintf("%v=%s/%v", sm["name"], containerState(sm), sm["restartCount"]))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, orDash(node), orDash(phase), orDash(strings.Join(conds, ",")), orDash(strings.Join(containers, " ")))
	}
	_ = tw.Flush() // progress output, as above
	return b.String()
}

// containerState is running, waiting(Reason) or terminated(Reason:code).
func containerState(status map[string]any) string {
	state, _ := status["state"].(map[string]any)
	for _, kind := range []string{"running", "waiting", "terminated"} {
		s, ok := state[kind].(map[string]any)
		if !ok {
			continue
		}
		switch kind {
		case "waiting":
			return fmt.Sprintf("waiting(%v)", s["reason"])
		case "terminated":
			return fmt.Sprintf("terminated(%v:%v)", s["reason"], s["exitCode"])
		}
		return kind
	}
	return "unknown"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// WriteJUnit writes the results as JUnit XML.
func WriteJUnit(w io.Writer, results []*Result) error {
	sorted := append([]*Result(nil), results...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Scenario.Metadata.Name < sorted[j].Scenario.Metadata.Name })
	var doc junit.Suites
	for _, res := range sorted {
		suite := junit.Suite{Name: res.Scenario.Metadata.Name, File: res.Scenario.File, Time: res.Wall.Seconds()}
		if res.Err != nil {
			suite.Errors = 1
			suite.Error = &junit.Message{Message: res.Err.Error()}
		}
		for _, s := range res.Steps {
			c := junit.Case{Name: fmt.Sprintf("%d %s", s.Index, oneLine(s.Title, 200)), Classname: res.Scenario.Metadata.Name, Time: s.Took.Seconds()}
			switch s.Status {
			case Failed:
				suite.Failures++
				c.Failure = &junit.Message{Message: strings.SplitN(s.Failure, "\n", 2)[0], Text: s.Failure}
			case Skipped:
				suite.Skipped++
				c.Skipped = &junit.Message{}
			}
			suite.Cases = append(suite.Cases, c)
		}
		for _, t := range res.Triggers {
			for _, s := range t.Steps {
				c := junit.Case{Name: fmt.Sprintf("trigger %s: %d %s", t.Name, s.Index, oneLine(s.Title, 200)), Classname: res.Scenario.Metadata.Name, Time: s.Took.Seconds()}
				if s.Status == Failed {
					suite.Failures++
					c.Failure = &junit.Message{Message: strings.SplitN(s.Failure, "\n", 2)[0], Text: s.Failure}
				}
				suite.Cases = append(suite.Cases, c)
			}
		}
		for _, v := range res.Violations {
			suite.Failures++
			suite.Cases = append(suite.Cases, junit.Case{Name: "invariant " + v.Invariant, Classname: res.Scenario.Metadata.Name,
				Failure: &junit.Message{Message: v.String(), Text: v.String() + "\n" + strings.Join(v.Trace, "\n")}})
		}
		suite.Tests = len(suite.Cases)
		doc.Suites = append(doc.Suites, suite)
	}
	return junit.Write(w, doc)
}
