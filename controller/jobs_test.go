package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

func TestDesiredJobs(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "u-1"},
		Spec: jobsetv1alpha2.JobSetSpec{Suspend: ptr.To(true), ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
			{Name: "driver", Replicas: 1, GroupName: "control"},
			{Name: "workers", Replicas: 2},
		}}}
	js.Status.Restarts = 3
	jobs := desiredJobs(js)
	var names []string
	for _, j := range jobs {
		names = append(names, j.Name)
	}
	if diff := cmp.Diff([]string{"train-driver-0", "train-workers-0", "train-workers-1"}, names); diff != "" {
		t.Fatalf("names (-want +got):\n%s", diff)
	}
	w1 := jobs[2]
	want := map[string]string{
		jobsetv1alpha2.JobSetNameKey: "train", jobsetv1alpha2.JobSetUIDKey: "u-1", jobsetv1alpha2.ReplicatedJobNameKey: "workers",
		jobsetv1alpha2.RestartsKey: "3", jobsetv1alpha2.ReplicatedJobReplicas: "2", jobsetv1alpha2.GlobalReplicasKey: "3",
		jobsetv1alpha2.JobIndexKey: "1", jobsetv1alpha2.JobGlobalIndexKey: "2", jobsetv1alpha2.GroupNameKey: "default",
		jobsetv1alpha2.GroupReplicasKey: "2", jobsetv1alpha2.JobGroupIndexKey: "1",
		// SHA-1 of "ml/train-workers-1" (printf ml/train-workers-1 | sha1sum), as upstream computes the job-key.
		jobsetv1alpha2.JobKey: "9758140d1b2c3c8dbaebb0783352de84ca2874b5",
	}
	for _, labels := range []map[string]string{w1.Labels, w1.Annotations, w1.Spec.Template.Labels, w1.Spec.Template.Annotations} {
		if diff := cmp.Diff(want, labels); diff != "" {
			t.Errorf("stamp (-want +got):\n%s", diff)
		}
	}
	if !ptr.Deref(w1.Spec.Suspend, false) || w1.Spec.Template.Spec.Subdomain != "train" {
		t.Errorf("suspend %v subdomain %q", w1.Spec.Suspend, w1.Spec.Template.Spec.Subdomain)
	}
	js.Spec.Coordinator = &jobsetv1alpha2.Coordinator{ReplicatedJob: "driver"}
	if got := desiredJobs(js)[1].Spec.Template.Labels[jobsetv1alpha2.CoordinatorKey]; got != "train-driver-0-0.train" {
		t.Errorf("coordinator label %q", got)
	}
	if owner := metav1.GetControllerOf(w1); owner == nil || owner.Kind != "JobSet" || owner.Name != "train" {
		t.Errorf("controller reference %+v", owner)
	}
}
