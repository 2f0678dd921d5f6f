package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

func TestCreatable(t *testing.T) {
	twoStep := func(status jobsetv1alpha2.DependsOnStatus) *jobsetv1alpha2.JobSet {
		return &jobsetv1alpha2.JobSet{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
			{Name: "driver", Replicas: 2},
			{Name: "workers", Replicas: 4, DependsOn: []jobsetv1alpha2.DependsOn{{Name: "driver", Status: status}}},
		}}}
	}
	now := metav1.Now()
	for _, tc := range []struct {
		name   string
		js     *jobsetv1alpha2.JobSet
		driver jobsetv1alpha2.ReplicatedJobStatus
		want   map[string]bool
	}{
		{"Ready: the driver is not ready yet", twoStep(jobsetv1alpha2.DependencyReady), jobsetv1alpha2.ReplicatedJobStatus{Ready: 1},
			map[string]bool{"driver": true, "workers": false}},
		{"Ready: ready, failed and succeeded Jobs all count", twoStep(jobsetv1alpha2.DependencyReady), jobsetv1alpha2.ReplicatedJobStatus{Ready: 1, Failed: 1},
			map[string]bool{"driver": true, "workers": true}},
		{"Complete: ready is not enough", twoStep(jobsetv1alpha2.DependencyComplete), jobsetv1alpha2.ReplicatedJobStatus{Ready: 2},
			map[string]bool{"driver": true, "workers": false}},
		{"Complete: every Job succeeded", twoStep(jobsetv1alpha2.DependencyComplete), jobsetv1alpha2.ReplicatedJobStatus{Succeeded: 2},
			map[string]bool{"driver": true, "workers": true}},
	} {
		tc.driver.Name = "driver"
		tc.js.Status.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{tc.driver}
		if diff := cmp.Diff(tc.want, creatable(tc.js, now)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}

	inOrder := &jobsetv1alpha2.JobSet{Spec: jobsetv1alpha2.JobSetSpec{
		StartupPolicy:  &jobsetv1alpha2.StartupPolicy{StartupPolicyOrder: jobsetv1alpha2.InOrder},
		ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "a", Replicas: 1}, {Name: "b", Replicas: 1}, {Name: "c", Replicas: 1}},
	}}
	inOrder.Status.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: "a", Ready: 1}}
	if diff := cmp.Diff(map[string]bool{"a": true, "b": true}, creatable(inOrder, now)); diff != "" {
		t.Errorf("InOrder (-want +got):\n%s", diff)
	}
	if c := meta.FindStatusCondition(inOrder.Status.Conditions, string(jobsetv1alpha2.JobSetStartupPolicyInProgress)); c == nil ||
		c.Reason != "InOrderStartupPolicyInProgress" || c.Message != "in order startup policy is in progress" {
		t.Errorf("in progress: %+v", c)
	}
	inOrder.Status.ReplicatedJobsStatus = append(inOrder.Status.ReplicatedJobsStatus, jobsetv1alpha2.ReplicatedJobStatus{Name: "b", Succeeded: 1},
		jobsetv1alpha2.ReplicatedJobStatus{Name: "c", Ready: 1})
	creatable(inOrder, now)
	if !meta.IsStatusConditionTrue(inOrder.Status.Conditions, string(jobsetv1alpha2.JobSetStartupPolicyCompleted)) ||
		meta.IsStatusConditionTrue(inOrder.Status.Conditions, string(jobsetv1alpha2.JobSetStartupPolicyInProgress)) {
		t.Errorf("completed: %+v", inOrder.Status.Conditions)
	}
}
