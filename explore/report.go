package explore

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/restartbed/restartbed/internal/junit"
)

// WriteText writes the report for a reader: the schedules by verdict, then every violation with
// its scenario file and the changes before it.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "explored %s: reference run %s; %d points, %d schedules, %d run in %.0fs\n",
		r.Scenario, r.Reference.Verdict, len(r.Points), r.Total, len(r.Schedules), r.Seconds)
	if r.Reference.Verdict != Held {
		fmt.Fprintf(&b, "the reference run must hold before faults mean anything: %s\n", r.Reference.Detail)
	}
	counts := map[string]int{}
	for _, s := range r.Schedules {
		counts[s.Verdict]++
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, v := range []string{Violated, Held, Diverged, Unreached, Errored} {
		if counts[v] > 0 {
			fmt.Fprintf(tw, "  %s\t%d\n", v, counts[v])
		}
	}
	_ = tw.Flush() // into a strings.Builder
	for _, s := range r.sorted() {
		if s.Verdict != Violated && s.Verdict != Errored {
			continue
		}
		fmt.Fprintf(&b, "\nschedule %d: %s (point %d, at %.1fs of the reference run): %s\n",
			s.Index, s.String(), s.Point.Index, s.Point.At, strings.ToUpper(s.Verdict))
		for _, v := range s.Violations {
			fmt.Fprintf(&b, "  %s\n", v)
			for _, line := range v.Trace {
				fmt.Fprintf(&b, "      %s\n", line)
			}
		}
		if s.Verdict == Errored {
			fmt.Fprintf(&b, "  %s\n", s.Detail)
		}
		if s.File != "" {
			fmt.Fprintf(&b, "  replay: %s %s (reproduced %d of %d)\n", r.Replay, s.File, s.Reproduced, s.Confirmed)
			fmt.Fprintf(&b, "  trace:  %s\n", s.Trace)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// sorted is the schedules by index.
func (r *Report) sorted() []Schedule {
	out := slices.Clone(r.Schedules)
	slices.SortFunc(out, func(a, b Schedule) int { return a.Index - b.Index })
	return out
}

// WriteJUnit writes the report as one JUnit test suite, a test case per schedule: a violation
// is a failure, an error an error, an unreached point a skip.
func (r *Report) WriteJUnit(w io.Writer) error {
	suite := junit.Suite{Name: "explore " + r.Scenario, Time: r.Seconds}
	for _, s := range r.sorted() {
		c := junit.Case{Name: fmt.Sprintf("%d %s", s.Index, s.String()), Classname: r.Scenario, Time: s.Seconds}
		switch s.Verdict {
		case Violated:
			suite.Failures++
			var text strings.Builder
			for _, v := range s.Violations {
				fmt.Fprintf(&text, "%s\n%s\n", v, strings.Join(v.Trace, "\n"))
			}
			if s.File != "" {
				fmt.Fprintf(&text, "replay: %s %s\n", r.Replay, s.File)
			}
			c.Failure = &junit.Message{Message: s.Detail, Text: text.String()}
		case Errored:
			suite.Errors++
			c.Error = &junit.Message{Message: s.Detail}
		case Unreached:
			suite.Skipped++
			c.Skipped = &junit.Message{Message: "the replay never reached the point"}
		}
		suite.Cases = append(suite.Cases, c)
	}
	suite.Tests = len(suite.Cases)
	return junit.Write(w, suite)
}
