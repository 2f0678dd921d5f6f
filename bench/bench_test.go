package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

func TestCheckOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string // "" for valid
	}{
		{"defaults", Options{Pods: 100}, ""},
		{"no pods", Options{}, "--pods must be at least 1, got 0"},
		{"negative pods per job", Options{Pods: 8, PodsPerJob: -1}, "--pods-per-job must be at least 1, got -1"},
		{"not a multiple", Options{Pods: 10, PodsPerJob: 4}, "--pods 10 is not a multiple of --pods-per-job 4"},
		{"one pod per job", Options{Pods: 3, PodsPerJob: 1}, ""},
		{"unknown strategy", Options{Pods: 4, Strategies: []Strategy{"blocking"}}, `unknown strategy "blocking"`},
		{"kubelet processes", Options{Pods: 4, KubeletProcesses: 2, KubeletCommand: []string{"restartbed"}}, ""},
		{"kubelet processes without their command", Options{Pods: 4, KubeletProcesses: 2}, "Options.KubeletCommand"},
		{"negative kubelet processes", Options{Pods: 4, KubeletProcesses: -1}, "--kubelets must not be negative"},
		{"kubelet processes and an agent binary", Options{Pods: 4, KubeletProcesses: 2, KubeletCommand: []string{"restartbed"}, AgentBinary: "/bin/true"},
			"not with --kubelets"},
		{"kubelet processes without jitter", Options{Pods: 4, KubeletProcesses: 2, KubeletCommand: []string{"restartbed"}, AgentJitter: new(false)},
			"--agent-jitter=false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckOptions(tc.opts)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckOptions: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CheckOptions = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// The defaults Run fills in are the ones the docs promise.
func TestOptionsDefaults(t *testing.T) {
	opts := Options{Pods: 8}
	if err := opts.complete(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Strategy{InPlace, Recreate}, opts.Strategies); diff != "" {
		t.Errorf("strategies (-want +got):\n%s", diff)
	}
	if opts.PodsPerJob != DefaultPodsPerJob || !*opts.AgentJitter || opts.Timing.Name != "realistic" || opts.Timeout != 10*time.Minute ||
		*opts.HeartbeatBudget != DefaultHeartbeatBudget {
		t.Errorf("defaults: podsPerJob %d, jitter %v, timing %s, timeout %s", opts.PodsPerJob, *opts.AgentJitter, opts.Timing.Name, opts.Timeout)
	}
}

// The default timeout leaves a 5000-pod recreation, which took ten minutes, room to finish.
func TestDefaultTimeout(t *testing.T) {
	for pods, want := range map[int]time.Duration{1: 10 * time.Minute, 2400: 10 * time.Minute, 5000: 1250 * time.Second} {
		if got := DefaultTimeout(pods); got != want {
			t.Errorf("DefaultTimeout(%d) = %s, want %s", pods, got, want)
		}
	}
}

// An exposition as kube-apiserver writes it: requests by verb, resource, subresource and code,
// APF's rejections and queue waits.
const metricsBefore = `
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 10
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 20
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PATCH",version="v1"} 100
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 5
# TYPE apiserver_flowcontrol_rejected_requests_total counter
apiserver_flowcontrol_rejected_requests_total{flow_schema="service-accounts",priority_level="workload-low",reason="queue-full"} 1
# TYPE apiserver_flowcontrol_request_wait_duration_seconds histogram
apiserver_flowcontrol_request_wait_duration_seconds_bucket{execute="true",flow_schema="service-accounts",priority_level="workload-low",le="+Inf"} 4
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="service-accounts",priority_level="workload-low"} 0.4
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="service-accounts",priority_level="workload-low"} 4
# TYPE apiserver_watch_events_total counter
apiserver_watch_events_total{group="jobset.x-k8s.io",resource="jobsets",version="v1alpha2"} 1000
# TYPE apiserver_watch_events_sizes histogram
apiserver_watch_events_sizes_bucket{group="jobset.x-k8s.io",resource="jobsets",version="v1alpha2",le="+Inf"} 1000
apiserver_watch_events_sizes_sum{group="jobset.x-k8s.io",resource="jobsets",version="v1alpha2"} 3.5e+06
apiserver_watch_events_sizes_count{group="jobset.x-k8s.io",resource="jobsets",version="v1alpha2"} 1000
`

const metricsAfter = `
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 110
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 320
apiserver_request_total{code="429",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="APPLY",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="APPLY",version="v1"} 100
apiserver_request_total{code="200",component="apiserver",dry_run="",group="jobset.x-k8s.io",resource="jobsets",scope="resource",subresource="status",verb="PUT",version="v1alpha2"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PATCH",version="v1"} 200
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="status",verb="PATCH",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 9
# TYPE apiserver_flowcontrol_rejected_requests_total counter
apiserver_flowcontrol_rejected_requests_total{flow_schema="service-accounts",priority_level="workload-low",reason="queue-full"} 8
# TYPE apiserver_flowcontrol_request_wait_duration_seconds histogram
apiserver_flowcontrol_request_wait_duration_seconds_bucket{execute="true",flow_schema="service-accounts",priority_level="workload-low",le="+Inf"} 14
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="service-accounts",priority_level="workload-low"} 2.4
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="service-accounts",priority_level="workload-low"} 14
# TYPE apiserver_watch_events_total counter
apiserver_watch_events_total{group="jobset.x-k8s.io",resource="jobsets",version="v1alpha2"} 201000
apiserver_watch_events_total{group="",resource="pods",version="v1"} 500
# TYPE apiserver_watch_events_sizes histogram
apiserver_watch_events_sizes_bucket{group="jobset.x-k8s.io",resource="jobsets",version="v1alpha2",le="+Inf"} 201000
apiserver_watch_events_sizes_sum{group="jobset.x-k8s.io",resource="jobsets",version="v1alpha2"} 7.035e+08
apiserver_watch_events_sizes_count{group="jobset.x-k8s.io",resource="jobsets",version="v1alpha2"} 201000
`

func TestAccountFromMetrics(t *testing.T) {
	before, err := parseCounts(strings.NewReader(metricsBefore))
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseCounts(strings.NewReader(metricsAfter))
	if err != nil {
		t.Fatal(err)
	}
	r := &Restart{Restart: Duration(3 * time.Second)}
	// The bound's 100 creates and 100 patches cost the apiserver 2 s: 10 ms a write.
	r.account(after.since(before), 100, Bound{Pods: 100, CreatesPerSecond: 100, PatchesPerSecond: 200, CPU: CPU{APIServer: Duration(2 * time.Second)}})

	want := &Restart{
		Restart: Duration(3 * time.Second),
		// Reads (LIST) and heartbeats (leases, nodes/status) are not the restart's writes; a
		// 429 is a request the apiserver counted, so it is one.
		Writes:       map[string]int64{"CREATE pods": 100, "PATCH pods/status": 300, "APPLY pods": 107, "UPDATE jobsets/status": 2},
		WritesTotal:  509,
		WritesPerPod: 5.09,
		Heartbeats:   103,
		// 100 creates at 100/s, 409 other writes at 200/s.
		AtBound:   Duration(time.Second + 2045*time.Millisecond),
		OverBound: 3 / 3.045,
		WritesCPU: Duration(5090 * time.Millisecond),
		// Events sent to every watcher: 200 000 JobSet events of 3.5 KB, and the pods'.
		WatchEvents: map[string]int64{"jobsets": 200000, "pods": 500},
		WatchBytes:  map[string]int64{"jobsets": 700000000},
		Throttled:   map[string]int64{"APPLY pods": 7},
		FlowControl: FlowControl{
			Rejected:  map[string]int64{"workload-low (queue-full)": 7},
			QueueWait: map[string]Duration{"workload-low": Duration(200 * time.Millisecond)},
		},
	}
	if diff := cmp.Diff(want, r, cmp.Comparer(func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }),
		cmp.Comparer(func(a, b Duration) bool {
			d := a - b
			return d < Duration(time.Microsecond) && -d < Duration(time.Microsecond)
		})); diff != "" {
		t.Errorf("account (-want +got):\n%s", diff)
	}
}

func TestParseCountsRefusesGarbage(t *testing.T) {
	if _, err := parseCounts(strings.NewReader("apiserver_request_total{code=\"200\" 1\n")); err == nil {
		t.Fatal("parseCounts accepted a malformed exposition")
	}
}

func TestReportJSONRoundTrip(t *testing.T) {
	rep := &Report{Pods: 8, Nodes: 8, PodsPerJob: 4, CPUs: 2, Timing: "realistic", Go: "go1.26",
		StartedAt: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC), ClusterStart: Duration(5 * time.Second),
		Bound: Bound{Concurrency: 16, Pods: 1000, CreatesPerSecond: 600, PatchesPerSecond: 400},
		Restarts: []*Restart{{Strategy: InPlace, Restart: Duration(1500 * time.Millisecond), WritesPerPod: 11.5,
			Milestones: []Milestone{{Stage: stageRunning, First: ptr.To(Duration(time.Second)), All: ptr.To(Duration(1500 * time.Millisecond))}},
			Agents:     &AgentStats{Jitter: true, Processes: 8, ToWatch: Quantiles{P50: Duration(time.Millisecond)}},
			Shards:     []Shard{{Name: "kubelet-0", Nodes: 8, CPU: Duration(time.Second), PeakRSS: 1 << 20, PodWatchEvents: 40}}}},
		Memory:           Memory{Restartbed: 1 << 30, KubeletProcesses: 1 << 20},
		KubeletProcesses: 1,
	}
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"restartSeconds":1.5`) {
		t.Errorf("durations are not written as seconds: %s", data)
	}
	path := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rep, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestReadReportRefusesOtherFiles(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"missing.json":  "",
		"garbage.json":  "restartbed bench: 100 pods",
		"scenario.json": `{"apiVersion": "restartbed.dev/v1alpha1", "kind": "Scenario"}`,
		"bad-type.json": `{"pods": "many"}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if name != "missing.json" {
				if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := ReadReport(path)
			if err == nil || !strings.Contains(err.Error(), path) && name != "missing.json" {
				t.Fatalf("ReadReport = %v, want an error naming %s", err, path)
			}
		})
	}
}

// The table shows each figure, and with --compare the previous run's beside it.
func TestWriteTableCompares(t *testing.T) {
	now := &Report{Pods: 100, Nodes: 100, PodsPerJob: 4, CPUs: 2, Timing: "realistic",
		Bound:            Bound{Concurrency: 16, CreatesPerSecond: 580, PatchesPerSecond: 410},
		KubeletProcesses: 2,
		Restarts: []*Restart{
			{Strategy: InPlace, Restart: Duration(4600 * time.Millisecond), WritesPerPod: 11.54, WritesTotal: 1154,
				Writes: map[string]int64{"PATCH pods/status": 400, "APPLY pods": 100},
				CPU:    CPU{KubeletProcesses: Duration(2 * time.Second)},
				Shards: []Shard{{Name: "kubelet-0", Nodes: 60, CPU: Duration(1200 * time.Millisecond), PeakRSS: 90 << 20, PodWatchEvents: 300},
					{Name: "kubelet-1", Nodes: 40, CPU: Duration(800 * time.Millisecond), PeakRSS: 80 << 20, PodWatchEvents: 200}}},
			{Strategy: Recreate, Restart: Duration(7600 * time.Millisecond), Replaced: 100}},
		RecreateOverInPlace: 7.6 / 4.6,
	}
	previous := &Report{Pods: 100, Timing: "realistic", Bound: Bound{CreatesPerSecond: 500, PatchesPerSecond: 400},
		Restarts: []*Restart{{Strategy: InPlace, Restart: Duration(9 * time.Second), WritesPerPod: 20}}}
	var out bytes.Buffer
	now.WriteTable(&out, previous)
	for _, want := range []string{
		"100 pods on 100 nodes (25 Jobs of 4)",
		"580 (500) creates/s, 410 (400) status patches/s",
		"4.60s (9.00s)", // in place, beside the previous in-place figure
		"11.54 (20.00)", // writes per pod
		"7.60s",         // recreate, which the previous run did not measure
		"recreate / in place: 1.7×",
		"writes: PATCH pods/status 400, APPLY pods 100",
		"in 2 restartbed kubelet processes",
		"20.0ms (-)", // the kubelet processes' CPU per pod; the previous run had none
		"kubelet-0: 60 nodes, CPU 1.2s, peak RSS 90 MiB, 300 pod watch events",
		"kubelet-1: 40 nodes, CPU 0.8s, peak RSS 80 MiB, 200 pod watch events",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "7.60s (") {
		t.Errorf("recreate shows a previous figure the previous run does not have:\n%s", out.String())
	}
}

func TestQuantiles(t *testing.T) {
	var ds []time.Duration
	for i := 10; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Second)
	}
	want := Quantiles{P50: Duration(5 * time.Second), P90: Duration(9 * time.Second), Max: Duration(10 * time.Second)}
	if diff := cmp.Diff(want, quantiles(ds)); diff != "" {
		t.Errorf("quantiles (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Quantiles{}, quantiles(nil)); diff != "" {
		t.Errorf("quantiles of nothing (-want +got):\n%s", diff)
	}
}

// The observer times each stage once per pod, counts replacements, and says done when every
// worker runs again — not before.
func TestObserverStages(t *testing.T) {
	podAt := func(uid, attempt string, workerRestarts int32, running bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid),
			Annotations: map[string]string{jobsetv1alpha2.InPlaceRestartAttemptKey: attempt}}, Spec: corev1.PodSpec{NodeName: "n"}}
		cs := corev1.ContainerStatus{Name: workerContainer, RestartCount: workerRestarts}
		if running {
			cs.State.Running = &corev1.ContainerStateRunning{}
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
		return p
	}
	o := newObserver(2)
	o.pod(podAt("a", "0", 0, true))
	select {
	case <-o.started:
		t.Fatal("started with one of two workers running")
	default:
	}
	o.pod(podAt("b", "0", 0, true))
	<-o.started

	js := &jobsetv1alpha2.JobSet{Status: jobsetv1alpha2.JobSetStatus{CurrentInPlaceRestartAttempt: ptr.To[int32](0)}}
	o.arm([]*corev1.Pod{podAt("a", "0", 0, true), podAt("b", "0", 0, true)}, js, time.Now())
	o.pod(podAt("a", "1", 0, false))
	o.pod(podAt("a", "1", 1, true))
	o.pod(podAt("a", "1", 1, true)) // seen again: counted once
	o.jobSet(mustUnstructured(t, &jobsetv1alpha2.JobSet{Status: jobsetv1alpha2.JobSetStatus{
		CurrentInPlaceRestartAttempt: ptr.To[int32](1), PreviousInPlaceRestartAttempt: ptr.To[int32](0)}}))
	select {
	case <-o.done:
		t.Fatal("done with one of two workers running again")
	default:
	}
	o.pod(podAt("c", "1", 0, true)) // a replacement of b
	<-o.done

	var stages []string
	for _, m := range o.milestones() {
		stages = append(stages, m.Stage)
	}
	want := []string{stageDecided, stageCreated, stageBound, stageAttempt, stageBarrierLifted, stageRunning}
	if diff := cmp.Diff(want, stages); diff != "" {
		t.Errorf("stages (-want +got):\n%s", diff)
	}
	if o.replaced != 1 || o.counts[stageRunning] != 2 || o.counts[stageAttempt] != 1 {
		t.Errorf("replaced %d, running %d, at the attempt %d; want 1, 2, 1", o.replaced, o.counts[stageRunning], o.counts[stageAttempt])
	}
}

// mustUnstructured is obj as the dynamic informer delivers it.
func mustUnstructured(t *testing.T, obj any) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}
