package explore

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restartbed/restartbed/scenarios"
)

const scenario = `apiVersion: restartbed.dev/v1alpha1
kind: Scenario
metadata:
  name: small
spec:
  objects:
  - file: manifests/job.yaml
  steps:
  - apply:
    - file: manifests/job.yaml
  - sleep: 1s
`

const job = `apiVersion: batch/v1
kind: Job
metadata:
  name: j
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox
`

// A schedule's scenario is the source with the built-in invariants on (once), its trigger, its
// own name, and its files' paths made relative to where it is written; it loads there.
func TestScheduleScenario(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "src", "manifests"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "src", "small.yaml")
	for path, data := range map[string]string{file: scenario, filepath.Join(dir, "src", "manifests", "job.yaml"): job} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, err := readSource(file)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out", "small-exit-worker-at-3.yaml")
	// One trigger per kind of fault, so that every fault's steps are checked to load.
	target := &PodTarget{Selector: "app=x", Worker: "worker", Agent: "agent"}
	var triggers []map[string]any
	for i, f := range Faults {
		triggers = append(triggers, map[string]any{"name": f.Name, "when": fmt.Sprintf("pods.size() > %d", i), "steps": f.steps(target)})
	}
	v, err := src.with(triggers, "small-exit-worker-at-3", out)
	if err != nil {
		t.Fatal(err)
	}
	text := string(v.bytes)
	for _, want := range []string{"name: small-exit-worker-at-3", "file: ../src/manifests/job.yaml", "builtin: jobset-in-place", "when: pods.size() > 0", "kind: FlowSchema"} {
		if !strings.Contains(text, want) {
			t.Errorf("the schedule's scenario lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text, "../src/manifests/job.yaml") != 2 {
		t.Errorf("both file references must be rebased:\n%s", text)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, v.bytes, 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := scenarios.Load(out)
	if err != nil {
		t.Fatalf("the written scenario does not load: %v\n%s", err, text)
	}
	if len(sc.Spec.Triggers) != len(Faults) || len(sc.Spec.Invariants) != 1 {
		t.Errorf("triggers %d, invariants %d; want %d and 1", len(sc.Spec.Triggers), len(sc.Spec.Invariants), len(Faults))
	}
	// A source that already has the built-in set does not get it twice.
	again, err := readSource(out)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := again.with(nil, "", out)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(v2.bytes), "builtin: jobset-in-place"); n != 1 {
		t.Errorf("the built-in set is there %d times", n)
	}
}

// Points are the states a run passed, each once, in order, named by the pod's stable labels.
func TestPointsOfATrace(t *testing.T) {
	pod := func(restarts int, state, attempt string) string {
		return `{"time":1,"type":"MODIFIED","kind":"Pod","name":"js-w-0-0-abcde","object":{"apiVersion":"v1","kind":"Pod",` +
			`"metadata":{"name":"js-w-0-0-abcde","uid":"u1","labels":{"jobset.sigs.k8s.io/jobset-name":"js","batch.kubernetes.io/job-name":"js-w-0",` +
			`"batch.kubernetes.io/job-completion-index":"0"},"annotations":{"jobset.sigs.k8s.io/in-place-restart-attempt":"` + attempt + `"}},` +
			`"spec":{"containers":[{"name":"worker"}]},"status":{"containerStatuses":[{"name":"worker","restartCount":` +
			string(rune('0'+restarts)) + `,"state":{"` + state + `":{}}}]}}}`
	}
	trace := strings.Join([]string{pod(0, "waiting", "0"), pod(0, "running", "0"), pod(0, "running", "0"), pod(1, "running", "1")}, "\n")
	points, err := pointsOf(strings.NewReader(trace))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range points {
		got = append(got, p.Description)
	}
	want := []string{
		"pod js-w-0-0 reports attempt 0",
		"container worker of pod js-w-0-0 is waiting (restart 0)",
		"container worker of pod js-w-0-0 is running (restart 0)",
		"pod js-w-0-0 reports attempt 1",
		"container worker of pod js-w-0-0 is running (restart 1)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("points:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if p := points[0]; p.Pod == nil || p.Pod.Selector != "jobset.sigs.k8s.io/jobset-name=js,batch.kubernetes.io/job-name=js-w-0,batch.kubernetes.io/job-completion-index=0" || p.Pod.Worker != "worker" {
		t.Errorf("the point's pod: %+v", p.Pod)
	}
	// The worker cannot be made to exit where it waits; where it runs it can.
	exit := Faults[0]
	if exit.Name != "exit-worker" {
		t.Fatalf("Faults[0] is %s", exit.Name)
	}
	for i, can := range map[int]bool{1: false, 2: true} {
		if got := exit.steps(points[i].target(nil)) != nil; got != can {
			t.Errorf("exit-worker at %q: can act %t, want %t", points[i].Description, got, can)
		}
	}
}

// The order of the schedules: every single fault first, then the pairs, the second fault of each
// at a later point than the first; numbered in that order.
func TestSchedulesWithPairs(t *testing.T) {
	var base []Schedule
	for p := range 3 {
		for _, f := range []string{"a", "b"} {
			base = append(base, Schedule{Point: Point{Index: p}, Fault: f})
		}
	}
	seq := &schedules{base: base, singles: []int32{5, 4, 3, 2, 1, 0}, pairs: [][2]int32{{0, 2}, {1, 5}}}
	if seq.len() != 8 {
		t.Fatalf("len %d, want 8", seq.len())
	}
	for i := range seq.len() {
		s := seq.at(i)
		if s.Index != i {
			t.Errorf("schedule %d has index %d", i, s.Index)
		}
		if (i < 6) != (s.Then == nil) {
			t.Errorf("schedule %d: %s", i, s.String())
		}
		if s.Then != nil && s.Then.Point.Index <= s.Point.Index {
			t.Errorf("schedule %d's second fault is not later: %s", i, s.String())
		}
	}
	if got := seq.at(7); got.String() != "b when , then b when " || got.Point.Index != 0 || got.Then.Point.Index != 2 {
		t.Errorf("schedule 7: %+v then %+v", got, got.Then)
	}
}
