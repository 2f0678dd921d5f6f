package explore

import (
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
	trigger := map[string]any{"name": "t", "when": "pods.size() > 0", "steps": []map[string]any{{"sleep": "1s"}}}
	v, err := src.with(trigger, "small-exit-worker-at-3", out)
	if err != nil {
		t.Fatal(err)
	}
	text := string(v.bytes)
	for _, want := range []string{"name: small-exit-worker-at-3", "file: ../src/manifests/job.yaml", "builtin: jobset-in-place", "when: pods.size() > 0"} {
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
	if len(sc.Spec.Triggers) != 1 || len(sc.Spec.Invariants) != 1 {
		t.Errorf("triggers %d, invariants %d; want 1 and 1", len(sc.Spec.Triggers), len(sc.Spec.Invariants))
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
}
