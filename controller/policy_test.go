package controller

import (
	"fmt"
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
	withJobRestarts := func(js *jobsetv1alpha2.JobSet, counted ...int32) *jobsetv1alpha2.JobSet {
		js.Status.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: "a", JobRestartsCountTowardsMax: counted}}
		return js
	}
	restartJob := jobsetv1alpha2.FailurePolicyRule{Name: "one", Action: jobsetv1alpha2.RestartJob}
	restartJobIgnore := jobsetv1alpha2.FailurePolicyRule{Name: "benign", Action: jobsetv1alpha2.RestartJobAndIgnoreMaxRestarts}
	for _, tc := range []struct {
		name       string
		js         *jobsetv1alpha2.JobSet
		restartJob bool // the RestartJob gate
		want       decision
		wantJob    string // the Job a per-Job action restarts
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
		{name: "RestartJob restarts the earliest failed Job alone", js: policy(3, 0, restartJob), restartJob: true,
			want: decision{countsTowardsMax: true, message: "applying RestartJob failure policy action (first failed job: js-a-0)"}, wantJob: "js-a-0"},
		{name: "RestartJob counts per-Job restarts towards max", js: withJobRestarts(policy(3, 1, restartJob), 1, 1), restartJob: true,
			want: decision{fail: true, reason: "ReachedMaxRestarts", message: "jobset failed due to reaching max number of restarts (first failed job: js-a-0)"}},
		{name: "RestartJobSet counts per-Job restarts towards max", js: withJobRestarts(policy(2, 1, jobsetv1alpha2.FailurePolicyRule{Name: "all", Action: jobsetv1alpha2.RestartJobSet}), 1), restartJob: true,
			want: decision{fail: true, reason: "ReachedMaxRestarts", message: "jobset failed due to reaching max number of restarts (first failed job: js-a-0)"}},
		{name: "RestartJobAndIgnoreMaxRestarts ignores max", js: withJobRestarts(policy(1, 1, restartJobIgnore), 5), restartJob: true,
			want: decision{message: "applying RestartJobAndIgnoreMaxRestarts failure policy action (first failed job: js-a-0)"}, wantJob: "js-a-0"},
		{name: "gate off: RestartJob acts as RestartJobSet", js: withJobRestarts(policy(3, 1, restartJob), 5),
			want: decision{restart: true, countsTowardsMax: true, restartingReason: "FailurePolicy_one",
				message: "applying RestartJobSet failure policy action (first failed job: js-a-0)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := failurePolicy(tc.js, jobs, tc.restartJob)
			gotJob := ""
			if got.restartJob != nil {
				gotJob = got.restartJob.Name
			}
			if got.fail != tc.want.fail || got.restart != tc.want.restart || got.countsTowardsMax != tc.want.countsTowardsMax ||
				got.reason != tc.want.reason || got.message != tc.want.message || got.restartingReason != tc.want.restartingReason || gotJob != tc.wantJob {
				t.Errorf("got %+v (restart Job %q)\nwant %+v (restart Job %q)", got, gotJob, tc.want, tc.wantJob)
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

func TestPerJobRestarts(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "w", Replicas: 3}}}}
	js.Status.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: "w"}}
	job := func(index, own string) *batchv1.Job {
		labels := map[string]string{jobsetv1alpha2.ReplicatedJobNameKey: "w", jobsetv1alpha2.JobIndexKey: index, jobsetv1alpha2.RestartsKey: "0"}
		if own != "" {
			labels[jobsetv1alpha2.JobRestartsKey] = own
		}
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "js-w-" + index, Labels: labels}}
	}
	bumpJobRestarts(js, job("1", "0"), true)
	bumpJobRestarts(js, job("1", "1"), false)
	bumpJobRestarts(js, job("7", "0"), true) // no such index: ignored
	st := js.Status.ReplicatedJobsStatus[0]
	if fmt.Sprint(st.JobRestarts, st.JobRestartsCountTowardsMax) != "[0 2 0] [0 1 0]" {
		t.Fatalf("jobRestarts %v, jobRestartsCountTowardsMax %v; want [0 2 0] [0 1 0]", st.JobRestarts, st.JobRestartsCountTowardsMax)
	}
	for _, tc := range []struct {
		job        *batchv1.Job
		restartJob bool
		want       bool
	}{
		{job("1", "1"), true, true},   // behind its index's 2 restarts
		{job("1", "2"), true, false},  // current
		{job("0", ""), true, false},   // no label counts as attempt 0, and index 0 never restarted
		{job("1", ""), true, true},    // no label, index 1 restarted
		{job("1", "x"), true, true},   // unreadable
		{job("-1", "0"), true, true},  // an index that cannot be one
		{job("1", "1"), false, false}, // gate off: only the JobSet's attempt counts
	} {
		if got := outdated(js, newChildJob(tc.job), tc.restartJob); got != tc.want {
			t.Errorf("outdated(%v, gate %t) = %t, want %t", tc.job.Labels, tc.restartJob, got, tc.want)
		}
	}
	if got := desiredJobs(js, true)[1].Spec.Template.Labels[jobsetv1alpha2.JobRestartsKey]; got != "2" {
		t.Errorf("Job 1's pods carry job-restart-attempt %q, want 2", got)
	}
	if _, ok := desiredJobs(js, false)[1].Labels[jobsetv1alpha2.JobRestartsKey]; ok {
		t.Error("job-restart-attempt stamped with the gate off")
	}
}
