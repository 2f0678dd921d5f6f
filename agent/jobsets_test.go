package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
