// Package bench runs restartbed bench's measurement on a real control plane: a small run as a
// test of what every report must show, and the measurement as Go benchmarks. Nothing here
// asserts a speed; docs/performance.md holds the figures.
package bench

import (
	"context"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/restartbed/restartbed/bench"
	"github.com/restartbed/restartbed/timing"
)

// benchPods sizes the Go benchmarks: go test ./test/bench -run '^$' -bench . -benchtime 1x -pods 1000
var benchPods = flag.Int("pods", 100, "workers in the benchmarks' JobSet, one per node")

// A run of both strategies at 8 pods completes and reports what each strategy is: the in-place
// restart replaces no pod and restarts every agent; the recreation replaces every pod; the bound
// and the writes are measured, the jitter is as asked, and every stage a group restart passes
// through is reached by every pod.
func TestReportOfASmallRun(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	profile := timing.Fast()
	var progress strings.Builder
	restarted := map[bench.Strategy]bool{}
	rep, err := bench.Run(context.Background(), bench.Options{Pods: 8, Timing: &profile, Timeout: 3 * time.Minute,
		AgentJitter: new(false), Progress: &progress, Restarted: func(s bench.Strategy) { restarted[s] = true }})
	if err != nil {
		t.Fatalf("bench.Run: %v\n%s", err, progress.String())
	}
	if rep.Bound.CreatesPerSecond <= 0 || rep.Bound.PatchesPerSecond <= 0 || rep.Bound.Pods != 1000 {
		t.Errorf("write bound not measured: %+v", rep.Bound)
	}
	if len(rep.Restarts) != 2 || !restarted[bench.InPlace] || !restarted[bench.Recreate] {
		t.Fatalf("want both strategies measured, got %d restarts, Restarted called for %v", len(rep.Restarts), restarted)
	}
	for _, r := range rep.Restarts {
		t.Run(string(r.Strategy), func(t *testing.T) {
			if r.Restart <= 0 || r.Start <= 0 || r.Wall < r.Restart {
				t.Errorf("times: start %s, restart %s, wall %s", r.Start, r.Restart, r.Wall)
			}
			if r.WritesTotal == 0 || r.Writes["PATCH pods/status"] < 8 || r.AtBound <= 0 || r.OverBound <= 0 {
				t.Errorf("writes: %d in all, %v; at the bound %s (%.2f×)", r.WritesTotal, r.Writes, r.AtBound, r.OverBound)
			}
			if r.CPU.Available <= 0 || r.CPU.Restartbed <= 0 || r.CPU.APIServer <= 0 {
				t.Errorf("CPU: %+v", r.CPU)
			}
			if r.Agents == nil || r.Agents.Processes != 8 || r.Agents.Jitter || r.Agents.Failed != 0 {
				t.Errorf("agents: %+v", r.Agents)
			}
			// Every agent watched again after its watch broke, having listed first.
			if h := r.Herd; h == nil || h.Agents != 8 || h.Back <= 0 || h.Requests < 16 || h.Jitter {
				t.Errorf("herd: %+v", r.Herd)
			}
			reached := map[string]bool{}
			for _, m := range r.Milestones {
				reached[m.Stage] = m.All != nil
			}
			switch r.Strategy {
			case bench.InPlace:
				if r.Replaced != 0 || r.Writes["CREATE pods"] != 0 || r.Writes["APPLY pods"] != 8 {
					t.Errorf("in place: %d pods replaced, writes %v; want none replaced and one attempt written per pod", r.Replaced, r.Writes)
				}
				for _, stage := range []string{"agent restarted", "pod at the new attempt", "controller: barrier lifted", "worker running again"} {
					if !reached[stage] {
						t.Errorf("in place: stage %q not reached by every pod: %+v", stage, r.Milestones)
					}
				}
			case bench.Recreate:
				if r.Replaced != 8 || r.Writes["CREATE pods"] != 8 {
					t.Errorf("recreate: %d pods replaced, writes %v; want all 8 replaced", r.Replaced, r.Writes)
				}
				for _, stage := range []string{"old pod gone", "new pod created", "new pod bound to a node", "worker running again"} {
					if !reached[stage] {
						t.Errorf("recreate: stage %q not reached by every pod: %+v", stage, r.Milestones)
					}
				}
			}
		})
	}
	if rep.RecreateOverInPlace <= 0 || rep.Memory.Restartbed <= 0 || rep.Memory.APIServer <= 0 || rep.Memory.Etcd <= 0 {
		t.Errorf("ratio %.2f, memory %+v", rep.RecreateOverInPlace, rep.Memory)
	}
	var table strings.Builder
	rep.WriteTable(&table, rep)
	t.Logf("\n%s", table.String())
}

// BenchmarkInPlaceRestart and BenchmarkRecreateRestart run restartbed bench's measurement, one
// cluster per benchmark, and report its figures as benchmark metrics.
func BenchmarkInPlaceRestart(b *testing.B) { benchmarkRestart(b, bench.InPlace) }

func BenchmarkRecreateRestart(b *testing.B) { benchmarkRestart(b, bench.Recreate) }

func benchmarkRestart(b *testing.B, s bench.Strategy) {
	ctrllog.SetLogger(logr.Discard())
	for range b.N {
		rep, err := bench.Run(context.Background(), bench.Options{Pods: *benchPods, Strategies: []bench.Strategy{s}})
		if err != nil {
			b.Fatal(err)
		}
		r := rep.Restarts[0]
		b.ReportMetric(r.Restart.Seconds(), "restart-s")
		b.ReportMetric(r.WritesPerPod, "writes/pod")
		b.ReportMetric(r.OverBound, "x-bound")
		b.ReportMetric(float64(rep.Memory.Restartbed)/(1<<20), "peak-MiB")
	}
	b.Logf("%d pods, %s", *benchPods, s)
}
