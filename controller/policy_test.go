package controller

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func failedJob(name, replicatedJob, reason, message string, failedAfter time.Duration) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{jobsetv1alpha2.ReplicatedJobNameKey: replicatedJob}},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
			Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(epoch.Add(failedAfter))}}}}
}

func TestFailurePolicy(t *testing.T) {
	jobs := []*batchv1.Job{
		failedJob("js-b-0", "b", batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit", 2*time.Second),
		failedJob("js-a-0", "a", batchv1.JobReasonPodFailurePolicy, "Container worker for pod ns/p failed with exit code 7", time.Second),
	}
	policy := func(maxRestarts, counted int32, rules ...jobsetv1alpha2.FailurePolicyRule) *jobsetv1alpha2.JobSet {
		js := &jobsetv1alpha2.JobSet{Spec: jobsetv1alpha2.JobSetSpec{FailurePolicy: &jobsetv1alpha2.FailurePolicy{MaxRestarts: maxRestarts, Rules: rules}}}
		js.Status.RestartsCountTowardsMax = counted
		return js
	}
	for _, tc := range []struct {
		name string
		js   *jobsetv1alpha2.JobSet
		want decision
	}{
		{name: "no failure policy: Failed, the earliest failed Job named", js: &jobsetv1alpha2.JobSet{},
			want: decision{fail: true, reason: "FailedJobs", message: "jobset failed due to one or more job failures (first failed job: js-a-0)"}},
		{name: "no rule matches: RestartJobSet", js: policy(3, 0),
			want: decision{restart: true, countsTowardsMax: true, restartingReason: "DefaultFailurePolicy",
				message: "applying RestartJobSet failure policy action (first failed job: js-a-0)"}},
		{name: "RestartJobSet at maxRestarts: ReachedMaxRestarts", js: policy(1, 1),
			want: decision{fail: true, reason: "ReachedMaxRestarts", message: "jobset failed due to reaching max number of restarts (first failed job: js-a-0)"}},
		{name: "FailJobSet by reason", js: policy(3, 0, jobsetv1alpha2.FailurePolicyRule{Name: "fatal", Action: jobsetv1alpha2.FailJobSet,
			OnJobFailureReasons: []string{batchv1.JobReasonPodFailurePolicy}}),
			want: decision{fail: true, reason: "FailJobSetFailurePolicyAction", message: "applying FailJobSet failure policy action (first failed job: js-a-0)"}},
		{name: "a rule's target picks its own earliest Job", js: policy(3, 0, jobsetv1alpha2.FailurePolicyRule{Name: "onB", Action: jobsetv1alpha2.FailJobSet,
			TargetReplicatedJobs: []string{"b"}}),
			want: decision{fail: true, reason: "FailJobSetFailurePolicyAction", message: "applying FailJobSet failure policy action (first failed job: js-b-0)"}},
		{name: "message pattern", js: policy(3, 0, jobsetv1alpha2.FailurePolicyRule{Name: "limit", Action: jobsetv1alpha2.RestartJobSetAndIgnoreMaxRestarts,
			OnJobFailureMessagePatterns: []string{"backoff limit"}}),
			want: decision{restart: true, restartingReason: "FailurePolicy_limit",
				message: "applying RestartJobSetAndIgnoreMaxRestarts failure policy action (first failed job: js-b-0)"}},
		{name: "the first matching rule wins", js: policy(3, 0,
			jobsetv1alpha2.FailurePolicyRule{Name: "nothing", Action: jobsetv1alpha2.FailJobSet, OnJobFailureReasons: []string{batchv1.JobReasonDeadlineExceeded}},
			jobsetv1alpha2.FailurePolicyRule{Name: "second", Action: jobsetv1alpha2.RestartJobSet},
			jobsetv1alpha2.FailurePolicyRule{Name: "third", Action: jobsetv1alpha2.FailJobSet}),
			want: decision{restart: true, countsTowardsMax: true, restartingReason: "FailurePolicy_second",
				message: "applying RestartJobSet failure policy action (first failed job: js-a-0)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := failurePolicy(tc.js, jobs)
			got.events = nil
			if got.fail != tc.want.fail || got.restart != tc.want.restart || got.countsTowardsMax != tc.want.countsTowardsMax ||
				got.reason != tc.want.reason || got.message != tc.want.message || got.restartingReason != tc.want.restartingReason {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestSuccessPolicy(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "a", Replicas: 2}, {Name: "b", Replicas: 1}}}}
	done := func(rj string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{jobsetv1alpha2.ReplicatedJobNameKey: rj}}}
	}
	for _, tc := range []struct {
		name       string
		policy     *jobsetv1alpha2.SuccessPolicy
		successful []*batchv1.Job
		want       bool
	}{
		{"All: every Job", nil, []*batchv1.Job{done("a"), done("a"), done("b")}, true},
		{"All: one missing", nil, []*batchv1.Job{done("a"), done("b")}, false},
		{"All of a target", &jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAll, TargetReplicatedJobs: []string{"a"}}, []*batchv1.Job{done("a"), done("a")}, true},
		{"Any of a target", &jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAny, TargetReplicatedJobs: []string{"b"}}, []*batchv1.Job{done("b")}, true},
		{"Any of another target", &jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAny, TargetReplicatedJobs: []string{"b"}}, []*batchv1.Job{done("a")}, false},
	} {
		js.Spec.SuccessPolicy = tc.policy
		if got := successPolicy(js, tc.successful); got != tc.want {
			t.Errorf("%s: %t, want %t", tc.name, got, tc.want)
		}
	}
}
