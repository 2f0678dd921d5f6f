package controller

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// event is an event to record once the status it belongs to is written.
type event struct {
	eventType, reason, message string
}

// decision is what the failure or success policy decided for a reconcile.
type decision struct {
	// fail ends the JobSet; restart starts a new generation of Jobs.
	fail, restart bool
	// restartJob, when set, is the one failed Job to recreate (the per-Job actions) instead of a
	// new generation of every Job.
	restartJob *batchv1.Job
	// countsTowardsMax: the restart counts towards maxRestarts.
	countsTowardsMax bool
	reason, message  string
	// restartingReason is the RestartingJobSet condition's reason for a restart.
	restartingReason string
	events           []event
}

// firstFailed returns the Job that failed earliest (by its Failed condition's transition time)
// among jobs that match, or nil.
func firstFailed(jobs []*batchv1.Job, match func(*batchv1.Job, *batchv1.JobCondition) bool) *batchv1.Job {
	var first *batchv1.Job
	var firstCond *batchv1.JobCondition
	for _, job := range jobs {
		cond := jobCondition(job, batchv1.JobFailed)
		if cond == nil || !match(job, cond) {
			continue
		}
		if first == nil || cond.LastTransitionTime.Before(&firstCond.LastTransitionTime) {
			first, firstCond = job, cond
		}
	}
	return first
}

// ruleMatches reports whether a failed Job matches a rule: its Failed condition's reason is
// listed (or none are), a message pattern matches (or none is given), and its replicated Job is
// targeted (or none is).
func ruleMatches(rule *jobsetv1alpha2.FailurePolicyRule, job *batchv1.Job, cond *batchv1.JobCondition) bool {
	if len(rule.OnJobFailureReasons) > 0 && !slices.Contains(rule.OnJobFailureReasons, cond.Reason) {
		return false
	}
	if len(rule.OnJobFailureMessagePatterns) > 0 && !slices.ContainsFunc(rule.OnJobFailureMessagePatterns, func(p string) bool {
		re, err := regexp.Compile(p)
		return err == nil && re.MatchString(cond.Message)
	}) {
		return false
	}
	return len(rule.TargetReplicatedJobs) == 0 || slices.Contains(rule.TargetReplicatedJobs, job.Labels[jobsetv1alpha2.ReplicatedJobNameKey])
}

// failurePolicy decides what the failed Jobs mean (upstream's failure_policy.go): without a failure policy the
// JobSet fails; else the first rule with a matching failed Job picks the action, and without one
// the action is RestartJobSet. restartJob is the RestartJob gate: without it the per-Job actions
// act as RestartJobSet.
func failurePolicy(js *jobsetv1alpha2.JobSet, failed []*batchv1.Job, restartJob bool) decision {
	anyJob := func(*batchv1.Job, *batchv1.JobCondition) bool { return true }
	if js.Spec.FailurePolicy == nil {
		first := firstFailed(failed, anyJob)
		msg := fmt.Sprintf("%s (first failed job: %s)", messageFailedJobs, first.Name)
		return decision{fail: true, reason: reasonFailedJobs, message: msg,
			events: []event{{corev1.EventTypeWarning, reasonFailedJobs, msg}}}
	}
	action, ruleName, first := jobsetv1alpha2.RestartJobSet, "", firstFailed(failed, anyJob)
	for i := range js.Spec.FailurePolicy.Rules {
		rule := &js.Spec.FailurePolicy.Rules[i]
		if job := firstFailed(failed, func(j *batchv1.Job, c *batchv1.JobCondition) bool { return ruleMatches(rule, j, c) }); job != nil {
			action, ruleName, first = rule.Action, rule.Name, job
			break
		}
	}
	restartingReason := reasonRestartingDefaultFailurePolicy
	if ruleName != "" {
		restartingReason = fmt.Sprintf(reasonRestartingFailurePolicyFormat, ruleName)
	}
	suffix := fmt.Sprintf(" (first failed job: %s)", first.Name)
	if !restartJob && (action == jobsetv1alpha2.RestartJob || action == jobsetv1alpha2.RestartJobAndIgnoreMaxRestarts) {
		action = jobsetv1alpha2.RestartJobSet
	}
	reachedMax := func() decision {
		msg := messageReachedMaxRestarts + suffix
		return decision{fail: true, reason: reasonReachedMaxRestarts, message: msg,
			events: []event{{corev1.EventTypeWarning, reasonReachedMaxRestarts, msg}}}
	}
	switch action {
	case jobsetv1alpha2.FailJobSet:
		return decision{fail: true, reason: reasonFailJobSetAction, message: messageFailJobSetAction + suffix,
			events: []event{{corev1.EventTypeWarning, reasonFailJobSetAction, messageFailJobSetAction + suffix}}}
	case jobsetv1alpha2.RestartJobSetAndIgnoreMaxRestarts:
		return decision{restart: true, restartingReason: restartingReason, message: messageRestartIgnoreAction + suffix,
			events: []event{{corev1.EventTypeWarning, reasonRestartIgnoreAction, messageRestartIgnoreAction + suffix}}}
	case jobsetv1alpha2.RestartJob:
		if restartsTowardsMax(js, restartJob) >= js.Spec.FailurePolicy.MaxRestarts {
			return reachedMax()
		}
		return decision{restartJob: first, countsTowardsMax: true, message: messageRestartJobAction + suffix,
			events: []event{{corev1.EventTypeWarning, reasonRestartJobAction, messageRestartJobAction + suffix}}}
	case jobsetv1alpha2.RestartJobAndIgnoreMaxRestarts:
		return decision{restartJob: first, message: messageRestartJobIgnoreAction + suffix,
			events: []event{{corev1.EventTypeWarning, reasonRestartJobIgnoreAction, messageRestartJobIgnoreAction + suffix}}}
	}
	if restartsTowardsMax(js, restartJob) >= js.Spec.FailurePolicy.MaxRestarts {
		return reachedMax()
	}
	return decision{restart: true, countsTowardsMax: true, restartingReason: restartingReason, message: messageRestartJobSetAction + suffix,
		events: []event{{corev1.EventTypeWarning, reasonRestartJobSetAction, messageRestartJobSetAction + suffix}}}
}

// restartsTowardsMax is what maxRestarts bounds: the JobSet's counted restarts plus, with the
// RestartJob gate, every Job's counted restarts.
func restartsTowardsMax(js *jobsetv1alpha2.JobSet, restartJob bool) int32 {
	n := js.Status.RestartsCountTowardsMax
	if restartJob {
		for _, st := range js.Status.ReplicatedJobsStatus {
			for _, c := range st.JobRestartsCountTowardsMax {
				n += c
			}
		}
	}
	return n
}

// bumpJobRestarts counts one more restart of the Job's index in its replicated Job's status,
// growing the per-index lists to the replicated Job's replicas.
func bumpJobRestarts(js *jobsetv1alpha2.JobSet, job *batchv1.Job, countsTowardsMax bool) {
	index, err := strconv.Atoi(job.Labels[jobsetv1alpha2.JobIndexKey])
	rjName := job.Labels[jobsetv1alpha2.ReplicatedJobNameKey]
	st := findReplicatedJobStatus(js.Status.ReplicatedJobsStatus, rjName)
	i := slices.IndexFunc(js.Spec.ReplicatedJobs, func(rj jobsetv1alpha2.ReplicatedJob) bool { return rj.Name == rjName })
	if err != nil || st == nil || i < 0 || index < 0 || index >= int(js.Spec.ReplicatedJobs[i].Replicas) {
		return // not a Job of this JobSet's current spec: nothing to count
	}
	grow := func(list []int32) []int32 {
		if n := int(js.Spec.ReplicatedJobs[i].Replicas); len(list) < n {
			list = append(list, make([]int32, n-len(list))...)
		}
		return list
	}
	st.JobRestarts = grow(st.JobRestarts)
	st.JobRestarts[index]++
	if countsTowardsMax {
		st.JobRestartsCountTowardsMax = grow(st.JobRestartsCountTowardsMax)
		st.JobRestartsCountTowardsMax[index]++
	}
}

// successPolicy reports whether the successful Jobs complete the JobSet: All needs every Job of
// the targeted replicated Jobs (all, when none is named) to have succeeded, Any needs one.
func successPolicy(js *jobsetv1alpha2.JobSet, successful []*batchv1.Job) bool {
	operator, targets := jobsetv1alpha2.OperatorAll, []string(nil)
	if sp := js.Spec.SuccessPolicy; sp != nil {
		operator, targets = sp.Operator, sp.TargetReplicatedJobs
	}
	targeted := func(name string) bool { return len(targets) == 0 || slices.Contains(targets, name) }
	var want, got int32
	for _, rj := range js.Spec.ReplicatedJobs {
		if targeted(rj.Name) {
			want += rj.Replicas
		}
	}
	for _, job := range successful {
		if targeted(job.Labels[jobsetv1alpha2.ReplicatedJobNameKey]) {
			got++
		}
	}
	if operator == jobsetv1alpha2.OperatorAny {
		return got > 0
	}
	return got >= want
}
