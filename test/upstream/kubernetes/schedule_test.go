package kubernetes

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

var updateDurations = flag.Bool("update-durations", false, "write this run's spec durations into "+durationsFile+
	" (make node-e2e-durations), for the releases that ran and passed")

// durationsFile records how long each spec took in a full run, by release: the harness deals a
// release's specs to its clusters by these durations. `make node-e2e-durations` refreshes it.
const durationsFile = "testdata/durations.json"

// durations are one release's recorded durations, in seconds.
type durations struct {
	// Parallel is the wall time of the parallel specs under ginkgo with parallelism processes.
	Parallel float64 `json:"parallel"`
	// Specs are every spec's own run time, by specKey; the serial ones are what the schedule
	// deals.
	Specs map[string]float64 `json:"specs"`
}

// recorded is the durations file: durations by minor ("1.36").
type recorded map[string]durations

func readDurations(path string) (recorded, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return recorded{}, nil
	}
	if err != nil {
		return nil, err
	}
	var r recorded
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

func (r recorded) write(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// specKey names a spec in the durations file and in the harness's maps: its file and its text.
func specKey(file, text string) string { return file + ": " + text }

// Defaults for what the durations file does not have (a new release, a new spec): a serial spec
// takes about a minute of its own waits (a kubelet restart's start grace, healthz polls,
// Consistently checks), and a release's parallel specs about nine minutes under ginkgo.
const (
	defaultSerial   = 60 * time.Second
	defaultParallel = 9 * time.Minute
)

// step is one ginkgo run on a lane's cluster: the parallel specs, or a list of serial specs.
type step struct {
	name string
	// parallel: the release's specs that are not serial, --label-filter=!Serial under
	// parallelism processes; else the serial specs of specs, through an anchored --focus.
	parallel bool
	specs    []spec
	// estimate is how long the step should take, from the durations file.
	estimate time.Duration
}

// lane is one cluster of a release and the steps it runs, in order.
type lane struct {
	name     string
	steps    []step
	estimate time.Duration
}

// clustersPerRelease is how many clusters each release's specs run on: the parallel specs on
// one, the serial specs (which restart the kubelet and so need a cluster alone) dealt among all.
const clustersPerRelease = 4

// schedule deals the release's specs to clusters clusters: the parallel specs as one step, on
// the first cluster, first or last (parallelLast) so that releases side by side do not all run
// their parallel specs, which keep the cores busiest, at once; then each serial spec, longest
// first, to the cluster whose work is the least so far (longest processing time first), by
// the recorded durations. Only specs that would run are dealt.
func schedule(specs []spec, rec durations, clusters int, parallelLast bool) []lane {
	var parallel, serial []spec
	for _, s := range specs {
		switch {
		case !s.runs:
		case s.serial:
			serial = append(serial, s)
		default:
			parallel = append(parallel, s)
		}
	}
	lanes := make([]lane, clusters)
	for i := range lanes {
		lanes[i].name = fmt.Sprintf("cluster-%d", i+1)
	}
	var par *step
	if len(parallel) > 0 {
		par = &step{name: "parallel", parallel: true, specs: parallel, estimate: defaultParallel}
		if rec.Parallel > 0 {
			par.estimate = seconds(rec.Parallel)
		}
		lanes[0].estimate = par.estimate
	}
	known := rec.serialMedian()
	took := func(s spec) time.Duration {
		if d, ok := rec.Specs[s.key()]; ok {
			return seconds(d)
		}
		return known
	}
	slices.SortStableFunc(serial, func(a, b spec) int {
		return cmp.Or(cmp.Compare(took(b), took(a)), strings.Compare(a.key(), b.key()))
	})
	dealt := make([][]spec, clusters)
	for _, s := range serial {
		i := 0
		for j := range lanes {
			if lanes[j].estimate < lanes[i].estimate {
				i = j
			}
		}
		dealt[i] = append(dealt[i], s)
		lanes[i].estimate += took(s)
	}
	for i := range lanes {
		if len(dealt[i]) > 0 {
			var est time.Duration
			for _, s := range dealt[i] {
				est += took(s)
			}
			lanes[i].steps = append(lanes[i].steps, step{name: "serial", specs: dealt[i], estimate: est})
		}
	}
	if par != nil {
		if parallelLast {
			lanes[0].steps = append(lanes[0].steps, *par)
		} else {
			lanes[0].steps = append([]step{*par}, lanes[0].steps...)
		}
	}
	return slices.DeleteFunc(lanes, func(l lane) bool { return len(l.steps) == 0 })
}

// serialMedian is the median recorded duration of the serial-looking specs (the default when
// none is recorded): what a spec the file does not know yet is taken to take.
func (d durations) serialMedian() time.Duration {
	var all []float64
	for k, v := range d.Specs {
		if strings.Contains(k, "[Serial]") {
			all = append(all, v)
		}
	}
	if len(all) == 0 {
		return defaultSerial
	}
	slices.Sort(all)
	return seconds(all[len(all)/2])
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// focusOf is the anchored --focus that chooses exactly the specs: ginkgo matches it against the
// suite's description, a space and the spec's full text.
func focusOf(specs []spec) string {
	var alternatives []string
	for _, s := range specs {
		alternatives = append(alternatives, regexp.QuoteMeta(s.text))
	}
	slices.Sort(alternatives)
	return " (?:" + strings.Join(alternatives, "|") + ")$"
}

// measured are a run's durations for the durations file: the parallel step's wall time and
// every spec's run time.
func measured(parallel time.Duration, results []result) durations {
	d := durations{Parallel: parallel.Round(time.Second).Seconds(), Specs: map[string]float64{}}
	for _, r := range results {
		if r.outcome == "pass" {
			d.Specs[specKey(r.file, r.text)] = r.duration.Round(100 * time.Millisecond).Seconds()
		}
	}
	return d
}

// describe says what a schedule is, for the test's log.
func describe(lanes []lane) string {
	var b strings.Builder
	for _, l := range lanes {
		fmt.Fprintf(&b, "%s (about %s):", l.name, l.estimate.Round(time.Second))
		for _, s := range l.steps {
			fmt.Fprintf(&b, " %s %d specs (%s);", s.name, len(s.specs), s.estimate.Round(time.Second))
		}
		b.WriteString("\n")
	}
	return b.String()
}
