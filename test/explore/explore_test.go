// Package explore runs `restartbed explore`'s engine on a steady JobSet with restartbed's agent
// and with a deliberately broken one, to show that the built-in invariants catch the broken
// agent, stay quiet for the correct one, and that the scenario written for the violation
// replays it.
package explore

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/restartbed/restartbed/agent"
	"github.com/restartbed/restartbed/builtins"
	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/explore"
	"github.com/restartbed/restartbed/fakekubelet/program"
	"github.com/restartbed/restartbed/fakekubelet/shell"
	"github.com/restartbed/restartbed/invariants"
	"github.com/restartbed/restartbed/scenarios"
)

// forgetfulAgent is JobSet's agent with a bug: once its pod has restarted in place it forgets
// the protocol. It reports its barrier down at once and never records the pod's new attempt, so
// its worker runs again while the rest of the group goes on with the old attempt: the lost sync
// that in-place restart exists to prevent.
func forgetfulAgent() program.Program {
	var mu sync.Mutex
	starts := map[types.UID]int{}
	correct := builtins.AgentProgram(builtins.AgentOptions{})
	return program.Func(func(ctx context.Context, c *program.Container) int {
		mu.Lock()
		starts[c.Pod.UID]++
		restarted := starts[c.Pod.UID] > 1
		mu.Unlock()
		if !restarted {
			return correct.Run(ctx, c)
		}
		cfg, err := agent.ConfigFromEnv(c.LookupEnv, c.FS.ReadFile)
		if err != nil {
			return 1
		}
		c.Serve(cfg.ProbePort, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
		<-ctx.Done()
		return shell.ExitTerminated
	})
}

// exploreSteady explores testdata/steady.yaml with the faults at one point, once the group
// runs, under the given agent; started is called with each replay's cluster, one after another.
func exploreSteady(t *testing.T, agentProgram program.Program, faults []string, started func(context.Context, *envtest.Cluster)) *explore.Report {
	t.Helper()
	out := t.TempDir()
	rep, err := explore.Explore(context.Background(), "testdata/steady.yaml", explore.Options{
		Faults: faults,
		// One point: the first worker of the first Job is running, at the first attempt.
		PointFilter: func(p explore.Point) bool {
			return p.Description == "container worker of pod story1-workers-0-0 is running (restart 0)"
		},
		OutDir: out, Confirm: 1,
		Run: scenarios.RunOptions{Configure: func(o *envtest.Options) {
			o.Builtins = program.Builtins{builtins.Agent: agentProgram}
		}, Started: func(ctx context.Context, c *envtest.Cluster) error {
			if started != nil {
				started(ctx, c)
			}
			return nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Reference.Verdict != explore.Held {
		t.Fatalf("the reference run did not hold: %s: %s", rep.Reference.Verdict, rep.Reference.Detail)
	}
	if len(rep.Schedules) != len(faults) {
		var b strings.Builder
		for _, p := range rep.Points {
			b.WriteString("\n  " + p.Description)
		}
		t.Fatalf("want %d schedules, got %d; the points:%s", len(faults), len(rep.Schedules), b.String())
	}
	return rep
}

// The correct agent recovers from a worker's crash with every invariant kept, and so does the
// group when the real apiserver refuses its kubelets' writes with 429 for a while, as API
// Priority and Fairness does (seen in the apiserver's own metrics).
func TestCorrectAgentHolds(t *testing.T) {
	t.Parallel()
	seen := &throttleSeen{rejected: map[string]bool{}}
	var clusters []string
	rep := exploreSteady(t, builtins.AgentProgram(builtins.AgentOptions{}), []string{"exit-worker", "throttle-kubelets"},
		func(ctx context.Context, c *envtest.Cluster) {
			clusters = append(clusters, c.Dir()) // one replay after another: the reference, then the schedules in their order
			go seen.watch(ctx, c, "restartbed-throttle-kubelets")
		})
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if seen.rejected[clusters[0]] {
		t.Error("the reference run's apiserver rejected kubelet requests: nothing throttled it")
	}
	for i, s := range rep.Schedules {
		if s.Verdict != explore.Held {
			t.Errorf("schedule %s: %s: %s", s.String(), s.Verdict, s.Detail)
		}
		if got, want := seen.rejected[clusters[i+1]], s.Fault == "throttle-kubelets"; got != want {
			t.Errorf("schedule %s: the apiserver rejected kubelet requests: %t, want %t", s.String(), got, want)
		}
	}
}

// The broken agent's worker runs again while the rest of its group never restarts: the
// group-restart invariant catches it, the scenario written for it is valid, and replaying it
// breaks the same invariant.
func TestForgetfulAgentIsCaught(t *testing.T) {
	t.Parallel()
	rep := exploreSteady(t, forgetfulAgent(), []string{"exit-worker"}, nil)
	s := rep.Schedules[0]
	if s.Verdict != explore.Violated {
		t.Fatalf("schedule %s (%s): the broken agent was not caught", s.Verdict, s.Detail)
	}
	got := []string{}
	for _, v := range s.Violations {
		got = append(got, v.Invariant)
	}
	if !slices.Contains(got, invariants.GroupRestart) {
		t.Errorf("broken invariants %v, want %s among them", got, invariants.GroupRestart)
	}
	if s.File == "" {
		t.Fatal("no scenario file was written for the violation")
	}
	if _, err := scenarios.Load(s.File); err != nil {
		t.Fatalf("the written scenario does not load: %v", err)
	}
	// The violating replay's trace is kept beside it, and shows the broken agent's pod.
	if data, err := os.ReadFile(s.Trace); err != nil || !strings.Contains(string(data), `"kind":"Pod"`) {
		t.Errorf("the violation's trace %q: %v (%d bytes)", s.Trace, err, len(data))
	}
	if partial, _ := filepath.Glob(filepath.Join(filepath.Dir(s.File), "*.partial")); len(partial) > 0 {
		t.Errorf("replays' partial traces were left behind: %v", partial)
	}
	if s.Reproduced != s.Confirmed || s.Confirmed != 1 {
		data, _ := os.ReadFile(s.File)
		t.Errorf("the written scenario reproduced the violation %d of %d times:\n%s", s.Reproduced, s.Confirmed, data)
	}
}

// throttleSeen notes, per cluster, whether its apiserver's API Priority and Fairness rejected a
// request of a throttle's flow schema while the cluster ran.
type throttleSeen struct {
	mu       sync.Mutex
	rejected map[string]bool // cluster directory → the throttle's rejections appeared in its metrics
}

// watch polls the cluster's apiserver metrics until ctx ends and notes whether the flow schema
// rejected a request.
func (s *throttleSeen) watch(ctx context.Context, c *envtest.Cluster, flowSchema string) {
	series := `apiserver_flowcontrol_rejected_requests_total{flow_schema="` + flowSchema + `"`
	for ctx.Err() == nil {
		data, err := c.Clientset.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err == nil && strings.Contains(string(data), series) {
			s.mu.Lock()
			s.rejected[c.Dir()] = true
			s.mu.Unlock()
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}
