package explore

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/utils/clock"

	"github.com/restartbed/restartbed/internal/yamlpath"
	"github.com/restartbed/restartbed/scenarios"
)

// Options configure Explore.
type Options struct {
	// Faults are the kinds of fault to inject (FaultNames); empty means all.
	Faults []string
	// PointFilter keeps only the points it accepts (nil: all).
	PointFilter func(Point) bool
	// Pairs adds, after every single fault, the schedules of two faults: one at a point and
	// another at a later point of the reference run, in the seed's order.
	Pairs bool
	// Budget stops starting schedules once this much time has passed (0: no limit);
	// MaxSchedules once this many have started (0: no limit).
	Budget       time.Duration
	MaxSchedules int
	// Parallel is how many replays run at once, each on its own cluster (at least 1).
	Parallel int
	// Seed orders the schedules; the same seed gives the same order.
	Seed uint64
	// Shard and Shards split the schedules: this run takes those whose index is Shard modulo
	// Shards (Shards 0 or 1: all).
	Shard, Shards int
	// OutDir receives, for each violation, a scenario file that replays it.
	OutDir string
	// Confirm is how many times each violation's scenario file is replayed to see that it
	// reproduces.
	Confirm int
	// Run are the options of every replay (the controller, host binaries, kubelet command);
	// Progress and Trace are explore's own.
	Run scenarios.RunOptions
	// Progress receives a line per replay. Nil: nothing.
	Progress io.Writer
	// ReplayCommand is the command, before a violation's file, that replays it as the
	// exploration ran it: the report shows it (default "restartbed run"; the CLI adds its
	// --controller, --crds and --allow-host-binaries).
	ReplayCommand string
}

// Verdicts of a schedule.
const (
	// Violated: an invariant broke.
	Violated = "violated"
	// Held: every invariant held and the scenario's own steps passed.
	Held = "held"
	// Diverged: every invariant held but a step of the scenario failed: the fault changed the
	// outcome the scenario expects, which a fault may do.
	Diverged = "diverged"
	// Unreached: the replay never reached the point, so the fault was not injected.
	Unreached = "unreached"
	// Errored: the replay could not run (the cluster failed to start, ...).
	Errored = "error"
)

// Schedule is one replay: one fault at one point, and with Pairs perhaps a second one later.
type Schedule struct {
	Index int    `json:"index"`
	Point Point  `json:"point"`
	Fault string `json:"fault"`
	// Then is the second fault of a pair: it is injected when its point is reached after the
	// first fault's (a trigger of its own, which may never fire once the first has changed the run).
	Then *Injection `json:"then,omitempty"`
	// Verdict is one of the verdicts above; Detail explains a divergence or an error.
	Verdict    string                `json:"verdict"`
	Detail     string                `json:"detail,omitempty"`
	Violations []scenarios.Violation `json:"violations,omitempty"`
	// File is the scenario file written for a violation; Trace the replay's every observed
	// change beside it (JSON lines, as restartbed run --trace writes them); Reproduced how many
	// of the Confirm replays of it broke the same invariant.
	File       string  `json:"file,omitempty"`
	Trace      string  `json:"trace,omitempty"`
	Reproduced int     `json:"reproduced,omitempty"`
	Confirmed  int     `json:"confirmed,omitempty"`
	Seconds    float64 `json:"seconds"`
}

// Injection is one fault at one point.
type Injection struct {
	Point Point  `json:"point"`
	Fault string `json:"fault"`
}

// String says what the schedule injects, where: "exit-worker when …, then partition when …".
func (s *Schedule) String() string {
	out := s.Fault + " when " + s.Point.Description
	if s.Then != nil {
		out += ", then " + s.Then.Fault + " when " + s.Then.Point.Description
	}
	return out
}

// schedules are the order of the replays: the single faults, then the pairs, each in the seed's
// order, as indexes into base (every fault at every point it can act on). A pair is only built
// when its turn comes: there are as many as the singles squared.
type schedules struct {
	base    []Schedule
	singles []int32
	pairs   [][2]int32
}

func (s *schedules) len() int { return len(s.singles) + len(s.pairs) }

// at is schedule i of the order.
func (s *schedules) at(i int) Schedule {
	if i < len(s.singles) {
		out := s.base[s.singles[i]]
		out.Index = i
		return out
	}
	p := s.pairs[i-len(s.singles)]
	out, then := s.base[p[0]], s.base[p[1]]
	out.Index, out.Then = i, &Injection{Point: then.Point, Fault: then.Fault}
	return out
}

// Report is what an exploration found.
type Report struct {
	Scenario string `json:"scenario"`
	// Reference is the reference run's verdict: schedules run only when it held.
	Reference Schedule   `json:"reference"`
	Points    []Point    `json:"points"`
	Faults    []string   `json:"faults"`
	Total     int        `json:"total"`
	Schedules []Schedule `json:"schedules"`
	Seconds   float64    `json:"seconds"`
	// Replay is the command that, given a violation's file, replays it (Options.ReplayCommand).
	Replay string `json:"replay"`
}

// Violations counts the schedules that broke an invariant.
func (r *Report) Violations() int {
	n := 0
	for _, s := range r.Schedules {
		if s.Verdict == Violated {
			n++
		}
	}
	return n
}

// Explore replays the scenario in file once as a reference, with the built-in invariants on,
// then once per schedule (a fault at a point of the reference run), in the seed's order, within
// the budget, and writes a scenario file for every violation.
func Explore(ctx context.Context, file string, opts Options) (*Report, error) {
	faults, err := FaultsNamed(opts.Faults)
	if err != nil {
		return nil, err
	}
	if opts.Parallel < 1 {
		opts.Parallel = 1
	}
	if opts.Shards > 1 && (opts.Shard < 0 || opts.Shard >= opts.Shards) {
		return nil, fmt.Errorf("shard %d of %d: the shard counts from 0 to %d", opts.Shard, opts.Shards, opts.Shards-1)
	}
	src, err := readSource(file)
	if err != nil {
		return nil, err
	}
	// The budget is wall time: the replays' components run on the real clock too.
	clk := clock.RealClock{}
	start := clk.Now()
	rep := &Report{Scenario: file, Faults: FaultNames(), Replay: cmp.Or(opts.ReplayCommand, "restartbed run")}
	progress := func(format string, args ...any) {
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, format+"\n", args...)
		}
	}

	var trace bytes.Buffer
	ref, err := src.with(nil, "", file)
	if err != nil {
		return nil, err
	}
	rep.Reference = replay(ctx, ref, opts.Run, &trace)
	progress("reference run: %s (%.0fs)%s", rep.Reference.Verdict, rep.Reference.Seconds, suffix(rep.Reference.Detail))
	if rep.Reference.Verdict != Held {
		rep.Seconds = clk.Since(start).Seconds()
		return rep, nil
	}
	if rep.Points, err = pointsOf(&trace); err != nil {
		return nil, err
	}
	var fallback *PodTarget
	for _, p := range rep.Points {
		if p.Pod != nil {
			fallback = p.Pod
			break
		}
	}
	var all []Schedule
	for _, p := range rep.Points {
		if opts.PointFilter != nil && !opts.PointFilter(p) {
			continue
		}
		for _, f := range faults {
			if f.steps(p.target(fallback)) != nil {
				all = append(all, Schedule{Point: p, Fault: f.Name})
			}
		}
	}
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	seq := &schedules{base: all, singles: make([]int32, len(all))}
	for i := range seq.singles {
		seq.singles[i] = int32(i)
	}
	rng.Shuffle(len(seq.singles), func(i, j int) { seq.singles[i], seq.singles[j] = seq.singles[j], seq.singles[i] })
	if opts.Pairs {
		// Every single fault followed by every other at a later point of the reference run.
		for i := range all {
			for j := range all {
				if all[j].Point.Index > all[i].Point.Index {
					seq.pairs = append(seq.pairs, [2]int32{int32(i), int32(j)})
				}
			}
		}
		rng.Shuffle(len(seq.pairs), func(i, j int) { seq.pairs[i], seq.pairs[j] = seq.pairs[j], seq.pairs[i] })
	}
	rep.Total = seq.len()
	var mine []int
	for i := range rep.Total {
		if opts.Shards <= 1 || i%opts.Shards == opts.Shard {
			mine = append(mine, i)
		}
	}
	progress("%d points, %d schedules (%d of them pairs); this run takes %d", len(rep.Points), rep.Total, len(seq.pairs), len(mine))

	var mu sync.Mutex
	next := 0
	take := func() (Schedule, bool) {
		mu.Lock()
		defer mu.Unlock()
		if next >= len(mine) || ctx.Err() != nil || (opts.Budget > 0 && clk.Since(start) > opts.Budget) ||
			(opts.MaxSchedules > 0 && next >= opts.MaxSchedules) {
			return Schedule{}, false
		}
		next++
		return seq.at(mine[next-1]), true
	}
	var wg sync.WaitGroup
	for range opts.Parallel {
		wg.Go(func() {
			for {
				s, ok := take()
				if !ok {
					return
				}
				s = runSchedule(ctx, src, s, fallback, faults, opts)
				progress("schedule %d: %s: %s (%.0fs)%s", s.Index, s.String(), s.Verdict, s.Seconds, suffix(s.Detail))
				mu.Lock()
				rep.Schedules = append(rep.Schedules, s)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	rep.Seconds = clk.Since(start).Seconds()
	return rep, ctx.Err()
}

func suffix(detail string) string {
	if detail == "" {
		return ""
	}
	return ": " + detail
}

// runSchedule replays the scenario with the schedule's fault as a trigger and, on a violation,
// writes the scenario file and replays it opts.Confirm times.
func runSchedule(ctx context.Context, src *source, s Schedule, fallback *PodTarget, faults []Fault, opts Options) Schedule {
	trigger := func(in Injection) map[string]any {
		i := slices.IndexFunc(faults, func(f Fault) bool { return f.Name == in.Fault })
		return map[string]any{"name": fmt.Sprintf("%s when %s", in.Fault, in.Point.Description), "when": in.Point.When,
			"steps": faults[i].steps(in.Point.target(fallback))}
	}
	triggers := []map[string]any{trigger(Injection{Point: s.Point, Fault: s.Fault})}
	name := fmt.Sprintf("%s-%s-at-%d", src.name, s.Fault, s.Point.Index)
	if s.Then != nil {
		triggers = append(triggers, trigger(*s.Then))
		name += fmt.Sprintf("-then-%s-at-%d", s.Then.Fault, s.Then.Point.Index)
	}
	path := filepath.Join(opts.OutDir, name+".yaml")
	if opts.OutDir == "" {
		path = filepath.Join(filepath.Dir(src.file), name+".yaml")
	}
	data, err := src.with(triggers, name, path)
	if err != nil {
		s.Verdict, s.Detail = Errored, err.Error()
		return s
	}
	// The replay's trace is kept only if it breaks an invariant: it is what tells why.
	var trace *os.File
	var w io.Writer // nil, not a nil *os.File, when there is no trace
	if opts.OutDir != "" {
		if err = os.MkdirAll(opts.OutDir, 0o755); err == nil {
			trace, err = os.CreateTemp(opts.OutDir, name+"-*.trace.partial")
		}
		if err != nil {
			s.Verdict, s.Detail = Errored, err.Error()
			return s
		}
		defer func() { _ = os.Remove(trace.Name()) }() // gone once renamed
		w = trace
	}
	got := replay(ctx, data, opts.Run, w)
	s.Verdict, s.Detail, s.Violations, s.Seconds = got.Verdict, got.Detail, got.Violations, got.Seconds
	if trace != nil {
		if err := trace.Close(); err != nil && s.Verdict == Violated {
			s.Detail = fmt.Sprintf("writing the trace of %s: %v", path, err)
			return s
		}
	}
	if s.Verdict != Violated || opts.OutDir == "" {
		return s
	}
	tracePath := strings.TrimSuffix(path, ".yaml") + ".trace.jsonl"
	err = os.WriteFile(path, data.bytes, 0o644)
	if err == nil {
		err = os.Rename(trace.Name(), tracePath)
	}
	if err != nil {
		s.Detail = fmt.Sprintf("writing %s: %v", path, err)
		return s
	}
	s.File, s.Trace = path, tracePath
	for range opts.Confirm {
		again := replay(ctx, data, opts.Run, nil)
		s.Confirmed++
		if again.Verdict == Violated && again.Violations[0].Invariant == s.Violations[0].Invariant {
			s.Reproduced++
		}
	}
	return s
}

// replay runs a scenario and judges it.
func replay(ctx context.Context, data *variant, run scenarios.RunOptions, trace io.Writer) Schedule {
	sc, err := scenarios.Parse(data.file, data.bytes)
	if err != nil {
		return Schedule{Verdict: Errored, Detail: err.Error()}
	}
	run.Progress, run.Trace = nil, trace
	clk := clock.RealClock{}
	began := clk.Now()
	res := scenarios.Run(ctx, sc, run)
	s := Schedule{Seconds: clk.Since(began).Seconds(), Violations: res.Violations}
	switch {
	case len(res.Violations) > 0:
		s.Verdict = Violated
		s.Detail = res.Violations[0].String()
	case res.Err != nil:
		s.Verdict, s.Detail = Errored, res.Err.Error()
	case slices.ContainsFunc(res.Triggers, func(t scenarios.TriggerResult) bool { return !t.Fired }):
		s.Verdict = Unreached
	case !res.Passed():
		s.Verdict = Diverged
		s.Detail = firstFailure(res)
	default:
		s.Verdict = Held
	}
	return s
}

// firstFailure says which step of the scenario, or of a fault's trigger, failed first.
func firstFailure(res *scenarios.Result) string {
	for _, st := range res.Steps {
		if st.Status == scenarios.Failed {
			return fmt.Sprintf("step %d (%s) failed", st.Index, st.Title)
		}
	}
	for _, t := range res.Triggers {
		for _, st := range t.Steps {
			if st.Status == scenarios.Failed {
				return fmt.Sprintf("the fault's step %s failed: %s", st.Title, firstLine(st.Failure))
			}
		}
	}
	return ""
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// source is the scenario file as a YAML tree, to which each schedule adds its trigger.
type source struct {
	file, name string
	doc        *yaml.Node
}

// variant is a scenario file made from the source: where it is meant to live, and its bytes.
type variant struct {
	file  string
	bytes []byte
}

func readSource(file string) (*source, error) {
	sc, err := scenarios.Load(file)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &source{file: file, name: sc.Metadata.Name, doc: &doc}, nil
}

// with is the scenario with the built-in invariants on and the triggers added, named
// name (empty: its own), to be written at path: the files it names are made relative to path's
// directory.
func (s *source) with(add []map[string]any, name, path string) (*variant, error) {
	var doc yaml.Node
	if err := copyNode(s.doc, &doc); err != nil {
		return nil, err
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		root = root.Content[0]
	}
	spec := yamlpath.Value(root, "spec")
	if spec == nil {
		return nil, errors.New(s.file + ": no spec")
	}
	if v := yamlpath.Value(yamlpath.Value(root, "metadata"), "name"); v != nil && name != "" {
		v.Value = name // each schedule's file is a scenario of its own, which restartbed run tells apart by name
	}
	if err := s.rebase(spec, filepath.Dir(path)); err != nil {
		return nil, err
	}
	invs := yamlpath.Value(spec, "invariants")
	if invs == nil {
		invs = &yaml.Node{Kind: yaml.SequenceNode}
		spec.Content = append(spec.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "invariants"}, invs)
	}
	builtin := false
	for _, inv := range invs.Content {
		if b := yamlpath.Value(inv, "builtin"); b != nil && b.Value == scenarios.BuiltinJobSetInPlace {
			builtin = true
		}
	}
	if !builtin {
		var n yaml.Node
		if err := n.Encode(map[string]any{"builtin": scenarios.BuiltinJobSetInPlace}); err != nil {
			return nil, err
		}
		invs.Content = append(invs.Content, &n)
	}
	for _, trigger := range add {
		triggers := yamlpath.Value(spec, "triggers")
		if triggers == nil {
			triggers = &yaml.Node{Kind: yaml.SequenceNode}
			spec.Content = append(spec.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "triggers"}, triggers)
		}
		var n yaml.Node
		if err := n.Encode(trigger); err != nil {
			return nil, err
		}
		triggers.Content = append(triggers.Content, &n)
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	return &variant{file: path, bytes: b.Bytes()}, nil
}

// rebase rewrites the relative paths the spec names (objects' files, programs' binaries, a
// step's apply files) to be relative to dir.
func (s *source) rebase(spec *yaml.Node, dir string) error {
	from, err := filepath.Abs(filepath.Dir(s.file))
	if err != nil {
		return err
	}
	to, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	fix := func(v *yaml.Node) {
		if v != nil && v.Kind == yaml.ScalarNode && v.Value != "" && !filepath.IsAbs(v.Value) {
			if rel, err := filepath.Rel(to, filepath.Join(from, v.Value)); err == nil {
				v.Value = rel
			}
		}
	}
	each := func(list *yaml.Node, f func(*yaml.Node)) {
		if list != nil && list.Kind == yaml.SequenceNode {
			for _, item := range list.Content {
				f(item)
			}
		}
	}
	each(yamlpath.Value(spec, "objects"), func(o *yaml.Node) { fix(yamlpath.Value(o, "file")) })
	each(yamlpath.Value(spec, "programs"), func(p *yaml.Node) { fix(yamlpath.Value(p, "binary")) })
	steps := func(list *yaml.Node) {
		each(list, func(st *yaml.Node) {
			each(yamlpath.Value(st, "apply"), func(o *yaml.Node) { fix(yamlpath.Value(o, "file")) })
		})
	}
	steps(yamlpath.Value(spec, "steps"))
	each(yamlpath.Value(spec, "triggers"), func(t *yaml.Node) { steps(yamlpath.Value(t, "steps")) })
	return nil
}

// copyNode deep-copies a YAML tree by encoding and decoding it.
func copyNode(in, out *yaml.Node) error {
	data, err := yaml.Marshal(in)
	if err != nil {
		return err
	}
	return yaml.Unmarshal(data, out)
}
