package agent

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"k8s.io/klog/v2"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// Effects are what the agent does to the world, so that the same decisions run in a process, as
// a fake-kubelet program and in tests.
type Effects struct {
	// WriteAttempt records the pod's attempt in its annotation.
	WriteAttempt func(ctx context.Context, attempt int32) error
	// Serve makes h answer on port (sidecar mode); an error ends the agent with exit 1.
	Serve func(port int32, h http.Handler) error
	// RunWorker runs the worker command to its end and returns its exit code (main-container mode).
	RunWorker func(ctx context.Context, command string) int
}

// Agent holds the state of one agent process: its attempt (unknown until written) and its
// barrier. A restart of the process, which is what an in-place restart is, starts both afresh.
type Agent struct {
	cfg     Config
	effects Effects

	attempt       *int32
	barrierActive bool

	exitOnce sync.Once
	exitCode int
	exited   chan struct{}
	// workers holds the worker goroutine.
	workers sync.WaitGroup
}

// New returns an agent with its barrier up and no attempt.
func New(cfg Config, effects Effects) *Agent {
	return &Agent{cfg: cfg, effects: effects, barrierActive: true, exited: make(chan struct{})}
}

// Exited is closed once the agent has decided to exit; ExitCode then says with what: the restart
// code, the worker's code, or 1 when its barrier server failed.
func (a *Agent) Exited() <-chan struct{} { return a.exited }

// ExitCode is the code the agent decided to exit with; valid once Exited is closed.
func (a *Agent) ExitCode() int {
	<-a.exited
	return a.exitCode
}

func (a *Agent) finish(code int) {
	a.exitOnce.Do(func() {
		a.exitCode = code
		close(a.exited)
	})
}

// bypassed reports whether the JobSet does not restart in place, so the agent has nothing to
// coordinate: the disable annotation (presence only), no failure policy, or another strategy.
func bypassed(js *jobsetv1alpha2.JobSet) bool {
	if _, disabled := js.Annotations[jobsetv1alpha2.DisableInPlaceRestartKey]; disabled {
		return true
	}
	return js.Spec.FailurePolicy == nil || js.Spec.FailurePolicy.RestartStrategy != jobsetv1alpha2.InPlaceRestart
}

// Reconcile acts on one observed state of the agent's JobSet (docs/jobset.md, "Agent"): nil means it does
// not exist, and the agent waits. An error asks for a retry.
func (a *Agent) Reconcile(ctx context.Context, js *jobsetv1alpha2.JobSet) error {
	if js == nil {
		return nil
	}
	// The logger is looked up only to log: most of the JobSet's changes, hundreds in a group
	// restart, need nothing of the agent, and the lookup goes up the context's chain.
	if bypassed(js) {
		if a.barrierActive {
			klog.FromContext(ctx).Info("In-place restart is not in use for this JobSet; lifting the barrier")
			a.lift(ctx)
		}
		return nil
	}
	current, previous := js.Status.CurrentInPlaceRestartAttempt, js.Status.PreviousInPlaceRestartAttempt
	if a.attempt == nil {
		next := int32(0)
		if current != nil {
			next = *current + 1
		}
		if err := a.effects.WriteAttempt(ctx, next); err != nil {
			return fmt.Errorf("writing in-place restart attempt %d to pod %s/%s: %w", next, a.cfg.Namespace, a.cfg.PodName, err)
		}
		klog.FromContext(ctx).Info("Recorded the pod's in-place restart attempt", "attempt", next)
		a.attempt = &next
	}
	if previous != nil && *a.attempt <= *previous {
		klog.FromContext(ctx).Info("The group restarts in place; exiting", "attempt", *a.attempt, "previous", *previous, "exitCode", a.cfg.ExitCode)
		a.finish(a.cfg.ExitCode)
		return nil
	}
	if a.barrierActive && current != nil && *a.attempt == *current {
		klog.FromContext(ctx).Info("Every pod is at this attempt; lifting the barrier", "attempt", *a.attempt)
		a.lift(ctx)
	}
	return nil
}

// lift lets the worker go: the startup probe starts answering (sidecar), or the worker runs.
func (a *Agent) lift(ctx context.Context) {
	a.barrierActive = false
	if a.cfg.Sidecar() {
		mux := http.NewServeMux()
		mux.HandleFunc(a.cfg.ProbePath, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != a.cfg.ProbePath {
				http.NotFound(w, r)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		if err := a.effects.Serve(a.cfg.ProbePort, mux); err != nil {
			klog.FromContext(ctx).Error(err, "Serving the startup probe failed", "port", a.cfg.ProbePort)
			a.finish(1)
		}
		return
	}
	a.workers.Go(func() { a.finish(a.effects.RunWorker(ctx, a.cfg.WorkerCommand)) })
}

// Wait waits for the worker goroutine, if any.
func (a *Agent) Wait() { a.workers.Wait() }

// attemptValue is the annotation value for an attempt.
func attemptValue(n int32) string { return strconv.Itoa(int(n)) }
