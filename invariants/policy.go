package invariants

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// This file is FailsByPolicy: why a JobSet may fail and count a restart, as released JobSet
// v0.12 decides it (docs/explore.md).

// The JobSet's terminal state and failure reasons, as released JobSet writes them.
const (
	terminalFailed           = "Failed"
	reasonFailedJobs         = "FailedJobs"
	reasonFailJobSetAction   = "FailJobSetFailurePolicyAction"
	reasonReachedMaxRestarts = "ReachedMaxRestarts"
)

// job keeps what the failure policy needs of a Job of a JobSet: whether it ended, and how it
// failed.
func (c *JobSetInPlace) job(job *batchv1.Job) {
	key := job.Namespace + "/" + job.Name
	c.jobEnded[key] = jobEnded(job)
	name := job.Labels[jobsetv1alpha2.JobSetNameKey]
	if name == "" {
		return
	}
	for _, cond := range job.Status.Conditions {
		if cond.Type != batchv1.JobFailed || cond.Status != corev1.ConditionTrue {
			continue
		}
		js := c.state(job.Namespace + "/" + name)
		if js.failedJobs == nil {
			js.failedJobs = map[string]failedJob{}
		}
		attempt, _ := strconv.ParseInt(job.Labels[jobsetv1alpha2.RestartsKey], 10, 64)
		js.failedJobs[key] = failedJob{restartAttempt: attempt, replicatedJob: job.Labels[jobsetv1alpha2.ReplicatedJobNameKey],
			reason: cond.Reason, message: cond.Message}
	}
}

// judgePolicy judges, at the end of a run, the JobSet's failure and its counted restarts against
// what was observed of its Jobs and pods: by then every watch has delivered what happened
// before the JobSet's change, whatever order the watches delivered it in.
func (c *JobSetInPlace) judgePolicy(key string, js *jobSetState) {
	object := "JobSet " + key
	if js.failed != nil {
		if why := c.failureCause(js); why != "" {
			c.violate(FailsByPolicy, object, "failed with reason %q, %s", js.failedReason, why)
		}
	}
	if c.jobsGap || len(js.versions) == 0 {
		return // a Job may have failed and gone while the watch was broken
	}
	failedAt := map[int64]bool{}
	for _, j := range js.failedJobs {
		failedAt[j.restartAttempt] = true
	}
	first, last := js.versions[0].restarts, js.versions[len(js.versions)-1].restarts
	for r := first; r < last; r++ {
		if !failedAt[int64(r)] {
			c.violate(FailsByPolicy, object, "status.restarts went past %d though no Job of restart %d failed (an in-place restart never counts as a JobSet restart)", r, r)
			return
		}
	}
}

// failureCause says what is wrong with the JobSet's failure: "" when its reason is one the
// failure policy gives for what was observed.
func (c *JobSetInPlace) failureCause(js *jobSetState) string {
	v, fp := js.failed, js.spec
	anyFailed := len(js.failedJobs) > 0 || c.jobsGap
	switch js.failedReason {
	case reasonFailedJobs:
		if fp != nil {
			return "which only a JobSet without a failure policy fails with"
		}
		if !anyFailed {
			return "though none of its Jobs was seen failing"
		}
	case reasonFailJobSetAction:
		if fp == nil || !slices.ContainsFunc(fp.Rules, func(r jobsetv1alpha2.FailurePolicyRule) bool {
			return r.Action == jobsetv1alpha2.FailJobSet && (c.jobsGap || c.ruleMatchesAny(js, &r))
		}) {
			return "though no FailJobSet rule of its failure policy matches a Job seen failing"
		}
	case reasonReachedMaxRestarts:
		if fp == nil {
			return "though it has no failure policy and so no maxRestarts"
		}
		max := fp.MaxRestarts
		if js.inPlace && (js.maxRestartCount > max || js.maxAttempt-int64(v.restarts-v.counted) > int64(max)) {
			return ""
		}
		if anyFailed && v.counted >= max {
			return ""
		}
		return fmt.Sprintf("though it was within maxRestarts %d: %d restarts counted, the highest container restartCount %d, the highest pod attempt %d with %d restarts uncounted",
			max, v.counted, js.maxRestartCount, js.maxAttempt, v.restarts-v.counted)
	default:
		return "which no failure policy gives"
	}
	return ""
}

// ruleMatchesAny reports whether one of the JobSet's failed Jobs matches the rule: its reason
// listed (or none), a message pattern matching (or none), its replicated Job targeted (or none).
// It is read from the API's documented rule, not shared with restartbed's controller: the
// invariant judges that controller and upstream's alike.
func (c *JobSetInPlace) ruleMatchesAny(js *jobSetState, r *jobsetv1alpha2.FailurePolicyRule) bool {
	for _, j := range js.failedJobs {
		if len(r.OnJobFailureReasons) > 0 && !slices.Contains(r.OnJobFailureReasons, j.reason) {
			continue
		}
		if len(r.OnJobFailureMessagePatterns) > 0 && !slices.ContainsFunc(r.OnJobFailureMessagePatterns, func(p string) bool {
			re, err := regexp.Compile(p)
			return err == nil && re.MatchString(j.message)
		}) {
			continue
		}
		if len(r.TargetReplicatedJobs) == 0 || slices.Contains(r.TargetReplicatedJobs, j.replicatedJob) {
			return true
		}
	}
	return false
}

// overLimit says how an in-place JobSet that has not failed is past its maxRestarts, as its
// live pods show it: "" when it is not.
func (c *JobSetInPlace) overLimit(key string, js *jobSetState) string {
	if !js.inPlace || js.spec == nil || len(js.versions) == 0 {
		return ""
	}
	v := js.versions[len(js.versions)-1]
	var rc int32
	attempt := int64(-1)
	for _, p := range c.pods {
		if p.jobSet == key && !p.deleting {
			rc, attempt = max(rc, p.restartCount), max(attempt, p.attempt)
		}
	}
	max := js.spec.MaxRestarts
	switch {
	case rc > max:
		return fmt.Sprintf("JobSet %s has a container restarted %d times, past maxRestarts %d, and has not failed", key, rc, max)
	case attempt-int64(v.restarts-v.counted) > int64(max):
		return fmt.Sprintf("JobSet %s has a pod at attempt %d, past maxRestarts %d, and has not failed", key, attempt, max)
	}
	return ""
}
