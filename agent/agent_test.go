package agent

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// recorder stands in for the agent's effects.
type recorder struct {
	written       []int32
	served        bool
	workerStarted chan struct{}
	writeErr      error
}

func (r *recorder) effects() Effects {
	return Effects{
		WriteAttempt: func(_ context.Context, n int32) error {
			if r.writeErr != nil {
				return r.writeErr
			}
			r.written = append(r.written, n)
			return nil
		},
		Serve: func(int32, http.Handler) error { r.served = true; return nil },
		RunWorker: func(context.Context, string) int {
			close(r.workerStarted)
			return 0
		},
	}
}

func jobSet(strategy jobsetv1alpha2.JobSetRestartStrategy, current, previous *int32) *jobsetv1alpha2.JobSet {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "test-jobset", Namespace: "default"}}
	js.Spec.FailurePolicy = &jobsetv1alpha2.FailurePolicy{RestartStrategy: strategy}
	js.Status.CurrentInPlaceRestartAttempt, js.Status.PreviousInPlaceRestartAttempt = current, previous
	return js
}

// TestReconcile mirrors upstream's agent table (TestReconcile in
// cmd/in-place-restart-agent/main_test.go): exit code 123, probe /barrier-is-down on 8081, one
// Reconcile per case.
func TestReconcile(t *testing.T) {
	const worker, sidecar = "W", "S"
	for _, tc := range []struct {
		name        string
		mode        string
		js          *jobsetv1alpha2.JobSet
		podAttempt  *int32
		barrierOn   bool
		wantWritten []int32
		wantExit    *int
		wantWorker  bool
		wantServed  bool
	}{
		{name: "first start ever", mode: worker, js: jobSet(jobsetv1alpha2.InPlaceRestart, nil, nil), barrierOn: true, wantWritten: []int32{0}},
		{name: "second start (source of failure, first restart)", mode: worker, js: jobSet(jobsetv1alpha2.InPlaceRestart, ptr.To[int32](0), nil), barrierOn: true, wantWritten: []int32{1}},
		{name: "third start (second restart)", mode: worker, js: jobSet(jobsetv1alpha2.InPlaceRestart, ptr.To[int32](1), ptr.To[int32](0)), barrierOn: true, wantWritten: []int32{2}},
		{name: "second start, forced restart", mode: worker, js: jobSet(jobsetv1alpha2.InPlaceRestart, ptr.To[int32](0), ptr.To[int32](0)), barrierOn: true, wantWritten: []int32{1}},
		{name: "exits to restart in place", mode: worker, js: jobSet(jobsetv1alpha2.InPlaceRestart, ptr.To[int32](0), ptr.To[int32](0)), podAttempt: ptr.To[int32](0), barrierOn: true, wantExit: ptr.To(123)},
		{name: "lifts barrier, first time", mode: worker, js: jobSet(jobsetv1alpha2.InPlaceRestart, ptr.To[int32](0), nil), podAttempt: ptr.To[int32](0), barrierOn: true, wantWorker: true},
		{name: "lifts barrier, second time", mode: worker, js: jobSet(jobsetv1alpha2.InPlaceRestart, ptr.To[int32](1), ptr.To[int32](0)), podAttempt: ptr.To[int32](1), barrierOn: true, wantWorker: true},
		{name: "does nothing (0 restarts)", mode: worker, js: jobSet(jobsetv1alpha2.InPlaceRestart, ptr.To[int32](0), nil), podAttempt: ptr.To[int32](0)},
		{name: "does nothing (1 restart)", mode: worker, js: jobSet(jobsetv1alpha2.InPlaceRestart, ptr.To[int32](1), ptr.To[int32](0)), podAttempt: ptr.To[int32](1)},
		{name: "bypass: disable annotation present", mode: worker, js: func() *jobsetv1alpha2.JobSet {
			js := jobSet(jobsetv1alpha2.InPlaceRestart, nil, nil)
			js.Annotations = map[string]string{jobsetv1alpha2.DisableInPlaceRestartKey: ""}
			return js
		}(), barrierOn: true, wantWorker: true},
		{name: "bypass: RestartStrategy=Recreate", mode: worker, js: jobSet(jobsetv1alpha2.Recreate, nil, nil), barrierOn: true, wantWorker: true},
		{name: "bypass: RestartStrategy empty", mode: worker, js: jobSet("", nil, nil), barrierOn: true, wantWorker: true},
		{name: "bypass: no failure policy", mode: worker, js: func() *jobsetv1alpha2.JobSet {
			js := jobSet(jobsetv1alpha2.InPlaceRestart, nil, nil)
			js.Spec.FailurePolicy = nil
			return js
		}(), barrierOn: true, wantWorker: true},
		{name: "sidecar mode lifts barrier", mode: sidecar, js: jobSet(jobsetv1alpha2.InPlaceRestart, ptr.To[int32](0), nil), podAttempt: ptr.To[int32](0), barrierOn: true, wantServed: true},
		{name: "sidecar bypass, Recreate", mode: sidecar, js: jobSet(jobsetv1alpha2.Recreate, nil, nil), barrierOn: true, wantServed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{PodName: "test-pod", JobSetName: "test-jobset", Namespace: "default", ExitCode: 123,
				ProbePath: DefaultStartupProbePath, ProbePort: DefaultStartupProbePort}
			if tc.mode == worker {
				cfg.WorkerCommand = "train"
			}
			rec := &recorder{workerStarted: make(chan struct{})}
			a := New(cfg, rec.effects())
			a.attempt, a.barrierActive = tc.podAttempt, tc.barrierOn
			if err := a.Reconcile(context.Background(), tc.js); err != nil {
				t.Fatal(err)
			}
			a.Wait()
			if len(rec.written) != len(tc.wantWritten) || (len(rec.written) > 0 && rec.written[0] != tc.wantWritten[0]) {
				t.Errorf("annotation written %v, want %v", rec.written, tc.wantWritten)
			}
			workerRan := false
			select {
			case <-rec.workerStarted:
				workerRan = true
			default:
			}
			if workerRan != tc.wantWorker {
				t.Errorf("worker started: %t, want %t", workerRan, tc.wantWorker)
			}
			if rec.served != tc.wantServed {
				t.Errorf("probe server started: %t, want %t", rec.served, tc.wantServed)
			}
			exited := false
			select {
			case <-a.Exited():
				exited = true
			default:
			}
			switch {
			case tc.wantExit != nil && (!exited || a.ExitCode() != *tc.wantExit):
				t.Errorf("exit: %t, want exit %d", exited, *tc.wantExit)
			case tc.wantExit == nil && exited && !tc.wantWorker:
				t.Errorf("exited with %d, want no exit", a.ExitCode())
			}
		})
	}
}

func TestReconcileRetriesAFailedWrite(t *testing.T) {
	rec := &recorder{workerStarted: make(chan struct{}), writeErr: errors.New("429 Too Many Requests")}
	a := New(Config{PodName: "p", JobSetName: "js", Namespace: "ns", ExitCode: 1}, rec.effects())
	if err := a.Reconcile(context.Background(), jobSet(jobsetv1alpha2.InPlaceRestart, nil, nil)); err == nil {
		t.Fatal("a failed write was not reported for a retry")
	}
	if a.attempt != nil {
		t.Error("the attempt is recorded although the write failed")
	}
	rec.writeErr = nil
	if err := a.Reconcile(context.Background(), jobSet(jobsetv1alpha2.InPlaceRestart, nil, nil)); err != nil {
		t.Fatal(err)
	}
	if a.attempt == nil || *a.attempt != 0 {
		t.Errorf("attempt %v after the retry, want 0", a.attempt)
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := func(vars map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}
	noFile := func(string) ([]byte, error) { return nil, errors.New("no such file") }
	nsFile := func(string) ([]byte, error) { return []byte("team-a\n"), nil }

	cfg, err := ConfigFromEnv(env(map[string]string{EnvPodName: "p", EnvJobSetName: "js"}), nsFile)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{PodName: "p", JobSetName: "js", Namespace: "team-a", ExitCode: 1, ProbePath: "/barrier-is-down", ProbePort: 8081}
	if cfg != want {
		t.Errorf("defaults: %+v, want %+v", cfg, want)
	}
	cfg, err = ConfigFromEnv(env(map[string]string{EnvPodName: "p", EnvJobSetName: "js", EnvNamespace: "ns", EnvExitCodeDraft: "42"}), noFile)
	if err != nil || cfg.Namespace != "ns" || cfg.ExitCode != 42 {
		t.Errorf("NAMESPACE and the draft exit-code name: %+v, %v", cfg, err)
	}
	_, err = ConfigFromEnv(env(map[string]string{EnvWorkerCommand: "train", EnvStartupProbePort: "99999", EnvExitCode: "x"}), noFile)
	for _, msg := range []string{"POD_NAME is required", "JOBSET_NAME is required", "the namespace is unknown",
		`IN_PLACE_RESTART_EXIT_CODE="x"`, "WORKER_COMMAND selects main-container mode", `STARTUP_PROBE_PORT="99999"`} {
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("error %v lacks %q", err, msg)
		}
	}
}
