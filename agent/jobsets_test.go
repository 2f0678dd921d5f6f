package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// A JobSet as the apiserver writes it, with everything the agent does not read: a pod template,
// managed fields, other status.
func fullJobSet(rv string, current, previous *int32) jobsetv1alpha2.JobSet {
	return jobsetv1alpha2.JobSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", ResourceVersion: rv, UID: "u1",
			Annotations:   map[string]string{"team": "ml"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "jobset", Operation: metav1.ManagedFieldsOperationUpdate}}},
		Spec: jobsetv1alpha2.JobSetSpec{
			FailurePolicy:  &jobsetv1alpha2.FailurePolicy{MaxRestarts: 3, RestartStrategy: jobsetv1alpha2.InPlaceRestart},
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "workers", Replicas: 2}},
		},
		Status: jobsetv1alpha2.JobSetStatus{Restarts: 1, CurrentInPlaceRestartAttempt: current, PreviousInPlaceRestartAttempt: previous,
			ReplicatedJobsStatus: []jobsetv1alpha2.ReplicatedJobStatus{{Name: "workers", Ready: 2}}},
	}
}

// What the agent reads of fullJobSet.
func observed(rv string, current, previous *int32) *jobsetv1alpha2.JobSet {
	return &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", ResourceVersion: rv, Annotations: map[string]string{"team": "ml"}},
		Spec:       jobsetv1alpha2.JobSetSpec{FailurePolicy: &jobsetv1alpha2.FailurePolicy{RestartStrategy: jobsetv1alpha2.InPlaceRestart}},
		Status:     jobsetv1alpha2.JobSetStatus{CurrentInPlaceRestartAttempt: current, PreviousInPlaceRestartAttempt: previous},
	}
}

// The reader asks the apiserver what the released agent's cache asks (the JobSet by name, then a
// watch from the list's resourceVersion with bookmarks) and hands on each event's fields.
func TestJobSetReader(t *testing.T) {
	var queries []string
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.Path+"?"+r.URL.RawQuery)
		if r.URL.Path != "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets" {
			http.NotFound(w, r)
			return
		}
		enc := json.NewEncoder(w)
		if r.URL.Query().Get("watch") != "true" {
			_ = enc.Encode(map[string]any{"kind": "JobSetList", "metadata": map[string]any{"resourceVersion": "10"},
				"items": []any{fullJobSet("9", ptr.To[int32](0), nil)}})
			return
		}
		for _, e := range []struct {
			typ watch.EventType
			obj any
		}{
			{watch.Modified, fullJobSet("11", ptr.To[int32](0), ptr.To[int32](0))},
			{watch.Bookmark, map[string]any{"kind": "JobSet", "metadata": map[string]any{"resourceVersion": "12"}}},
			{watch.Deleted, fullJobSet("13", ptr.To[int32](1), ptr.To[int32](0))},
			{watch.Error, metav1.Status{Status: metav1.StatusFailure, Message: "too old resource version: 9 (12)", Code: 410}},
		} {
			_ = enc.Encode(map[string]any{"type": e.typ, "object": e.obj})
		}
	}))
	defer server.Close()

	r, err := newJobSetReader(&rest.Config{Host: server.URL}, "ns", "train")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	js, rv, err := r.list(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(observed("9", ptr.To[int32](0), nil), js); diff != "" || rv != "10" {
		t.Errorf("list: resourceVersion %q, JobSet (-want +got):\n%s", rv, diff)
	}
	var got []watchEvent
	if err := r.watch(ctx, rv, func(e watchEvent) (bool, error) {
		got = append(got, e)
		return false, nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []watchEvent{
		{Type: watch.Modified, JobSet: observed("11", ptr.To[int32](0), ptr.To[int32](0))},
		{Type: watch.Bookmark},
		{Type: watch.Deleted, JobSet: observed("13", ptr.To[int32](1), ptr.To[int32](0))},
		{Type: watch.Error, Message: "too old resource version: 9 (12)"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("watch events (-want +got):\n%s", diff)
	}
	wantQueries := []string{
		"/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets?fieldSelector=metadata.name%3Dtrain",
		"/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets?allowWatchBookmarks=true&fieldSelector=metadata.name%3Dtrain&resourceVersion=10&watch=true",
	}
	if diff := cmp.Diff(wantQueries, queries); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// The apiserver's refusals reach the agent as errors that say what was refused, and a stream that
// is not a watch ends the watch with an error rather than being read as events.
func TestJobSetReaderErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"forbidden list", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
				Reason: metav1.StatusReasonForbidden, Code: http.StatusForbidden,
				Message: `jobsets.jobset.x-k8s.io is forbidden: User "system:serviceaccount:ns:default" cannot list resource "jobsets"`})
		}, `listing JobSet ns/train: jobsets.jobset.x-k8s.io is forbidden`},
		{"not JSON", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("watch") != "true" {
				fmt.Fprint(w, `{"metadata": {"resourceVersion": "1"}, "items": []}`)
				return
			}
			fmt.Fprint(w, "<html>proxy error</html>")
		}, "watch of JobSet ns/train: invalid character '<'"},
		{"unknown event", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("watch") != "true" {
				fmt.Fprint(w, `{"metadata": {"resourceVersion": "1"}, "items": []}`)
				return
			}
			fmt.Fprint(w, `{"type": "RENAMED", "object": {}}`)
		}, `unknown event type "RENAMED"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := httptest.NewServer(tc.handler)
			defer server.Close()
			r, err := newJobSetReader(&rest.Config{Host: server.URL}, "ns", "train")
			if err != nil {
				t.Fatal(err)
			}
			js, rv, err := r.list(context.Background())
			if err == nil {
				if js != nil {
					t.Fatalf("an empty list gave JobSet %v", js)
				}
				err = r.watch(context.Background(), rv, func(watchEvent) (bool, error) { return false, nil })
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// realisticJobSet is fullJobSet as a group of sidecar agents sees it mid-restart: the pod template
// of JobSet's sidecar example, managed fields of the client and the controller, conditions.
func realisticJobSet(rv string) jobsetv1alpha2.JobSet {
	js := fullJobSet(rv, ptr.To[int32](2), ptr.To[int32](1))
	rules := []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpNotIn, Values: []int32{0}}}}
	chips := corev1.ResourceList{"google.com/tpu": resource.MustParse("4")}
	js.Spec.ReplicatedJobs[0].Replicas = 5000
	js.Spec.ReplicatedJobs[0].Template.Spec = batchv1.JobSpec{Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1),
		BackoffLimit: ptr.To[int32](math.MaxInt32), CompletionMode: ptr.To(batchv1.IndexedCompletion),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			InitContainers: []corev1.Container{Sidecar(rules)},
			Containers: []corev1.Container{{Name: "worker", Image: "registry.example/trainer:latest", RestartPolicyRules: rules,
				RestartPolicy: ptr.To(corev1.ContainerRestartPolicyNever), Resources: corev1.ResourceRequirements{Requests: chips, Limits: chips}}}}}}
	fields := func(n int) *metav1.FieldsV1 {
		raw := `{"f:spec":{`
		for i := range n {
			raw += fmt.Sprintf(`"f:field%d":{".":{},"f:nested":{}},`, i)
		}
		return &metav1.FieldsV1{Raw: []byte(raw + `"f:last":{}}}`)}
	}
	now := metav1.Now()
	js.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "jobset.x-k8s.io/v1alpha2", Time: &now, FieldsType: "FieldsV1", FieldsV1: fields(30)},
		{Manager: "restartbed", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "jobset.x-k8s.io/v1alpha2", Time: &now, FieldsType: "FieldsV1", FieldsV1: fields(12), Subresource: "status"},
	}
	js.Status.ReplicatedJobsStatus[0] = jobsetv1alpha2.ReplicatedJobStatus{Name: "workers", Ready: 4711, Active: 5000}
	js.Status.Conditions = []metav1.Condition{
		{Type: "StartupPolicyCompleted", Status: metav1.ConditionTrue, Reason: "AllJobsStarted", Message: "all replicated jobs have started", LastTransitionTime: now},
		{Type: "Restarting", Status: metav1.ConditionTrue, Reason: "InPlaceRestart", Message: "restarting the group in place", LastTransitionTime: now},
	}
	return js
}

// One agent's share of a group restart's JobSet events: every agent receives every status change
// of its JobSet. The first agent of a process to read an event decodes it; the others find it
// decoded (decodedEvents).
func BenchmarkReadWatch(b *testing.B) {
	var stream bytes.Buffer
	enc := json.NewEncoder(&stream)
	const events = 50 // fewer than decodedEvents holds
	for i := range events {
		_ = enc.Encode(map[string]any{"type": watch.Modified, "object": realisticJobSet(strconv.Itoa(100 + i))})
	}
	read := func(b *testing.B) {
		n := 0
		if err := readWatch(context.Background(), bytes.NewReader(stream.Bytes()), "ns/train", func(watchEvent) (bool, error) {
			n++
			return false, nil
		}); err != nil || n != events {
			b.Fatalf("read %d of %d events: %v", n, events, err)
		}
	}
	for _, tc := range []struct {
		name  string
		fresh bool
	}{{"first agent", true}, {"other agents", false}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(stream.Len()))
			b.ReportAllocs()
			saved := decodedEvents
			defer func() { decodedEvents = saved }()
			decodedEvents = newEventMemo(64)
			read(b)
			for b.Loop() {
				if tc.fresh {
					decodedEvents = newEventMemo(64)
				}
				read(b)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
		})
	}
}

// Events are framed by lines however the stream cuts them: a line longer than the reader's
// buffer, events split across reads, blank lines, a last line without its newline.
func TestReadWatchFraming(t *testing.T) {
	long := realisticJobSet("7")
	long.Annotations["big"] = strings.Repeat("x", 40<<10)
	var stream bytes.Buffer
	enc := json.NewEncoder(&stream)
	_ = enc.Encode(map[string]any{"type": watch.Modified, "object": long})
	stream.WriteString("\n")
	_ = enc.Encode(map[string]any{"type": watch.Bookmark, "object": map[string]any{"metadata": map[string]any{"resourceVersion": "8"}}})
	last, _ := json.Marshal(map[string]any{"type": watch.Deleted, "object": fullJobSet("9", nil, nil)})
	stream.Write(last)

	var got []string
	err := readWatch(context.Background(), iotest.OneByteReader(&stream), "ns/train", func(e watchEvent) (bool, error) {
		rv := ""
		if e.JobSet != nil {
			rv = e.JobSet.ResourceVersion
			if e.Type == watch.Modified && len(e.JobSet.Annotations["big"]) != 40<<10 {
				t.Errorf("the long event's annotation has %d bytes, want %d", len(e.JobSet.Annotations["big"]), 40<<10)
			}
		}
		got = append(got, string(e.Type)+" "+rv)
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"MODIFIED 7", "BOOKMARK ", "DELETED 9"}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// The agents of one process decode an event once: the same bytes give the same decoded JobSet,
// other bytes their own, and a line that does not decode is an error each time.
func TestEventMemo(t *testing.T) {
	m := newEventMemo(2)
	line := func(rv string) []byte {
		b, _ := json.Marshal(map[string]any{"type": watch.Modified, "object": fullJobSet(rv, ptr.To[int32](1), nil)})
		return b
	}
	a1, err := m.decode(line("1"))
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := m.decode(line("1"))
	b, _ := m.decode(line("2"))
	if a1.JobSet != a2.JobSet || a1.JobSet.ResourceVersion != "1" {
		t.Errorf("the same event decoded twice: %p and %p", a1.JobSet, a2.JobSet)
	}
	if b.JobSet == a1.JobSet || b.JobSet.ResourceVersion != "2" {
		t.Errorf("another event gave resourceVersion %s", b.JobSet.ResourceVersion)
	}
	_, _ = m.decode(line("3")) // the memo holds two: "1" goes
	if len(m.entries) != 2 {
		t.Errorf("%d entries, want at most 2", len(m.entries))
	}
	if again, _ := m.decode(line("1")); again.JobSet == a1.JobSet {
		t.Error("the oldest event was not forgotten")
	}
	for range 2 {
		if _, err := m.decode([]byte(`{"type": "RENAMED", "object": {}}`)); err == nil || !strings.Contains(err.Error(), `unknown event type "RENAMED"`) {
			t.Errorf("error %v, want the unknown event type", err)
		}
	}
}
