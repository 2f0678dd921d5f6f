package controller

import (
	"fmt"
	"slices"

	"k8s.io/utils/ptr"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// isInPlaceRestart reports whether the JobSet restarts in place.
func isInPlaceRestart(js *jobsetv1alpha2.JobSet) bool {
	return js.Spec.FailurePolicy != nil && js.Spec.FailurePolicy.RestartStrategy == jobsetv1alpha2.InPlaceRestart
}

// exceededMaxRestarts reports whether the highest attempt, less the JobSet restarts that did not
// count towards the maximum, is above maxRestarts.
func exceededMaxRestarts(js *jobsetv1alpha2.JobSet, attempts []int32) bool {
	highest := int32(0)
	if len(attempts) > 0 {
		highest = slices.Max(attempts)
	}
	uncounted := js.Status.Restarts - js.Status.RestartsCountTowardsMax
	return highest-uncounted > js.Spec.FailurePolicy.MaxRestarts
}

// totalPods is the number of pods the JobSet runs at once: replicas × parallelism summed over its
// replicated Jobs, each of which must have completions equal to parallelism.
func totalPods(js *jobsetv1alpha2.JobSet) (int32, error) {
	var total int32
	for _, rj := range js.Spec.ReplicatedJobs {
		spec := rj.Template.Spec
		if spec.Completions == nil || spec.Parallelism == nil || *spec.Completions != *spec.Parallelism {
			return 0, fmt.Errorf("%s: in-place restart requires jobTemplate.spec.completions == jobTemplate.spec.parallelism != nil", rj.Name)
		}
		total += rj.Replicas * *spec.Parallelism
	}
	return total, nil
}

// allEqual reports whether there is at least one value and all are the same.
func allEqual(values []int32) bool {
	if len(values) == 0 {
		return false
	}
	for _, v := range values[1:] {
		if v != values[0] {
			return false
		}
	}
	return true
}

// updateCurrent sets currentInPlaceRestartAttempt to the common attempt.
func updateCurrent(status *jobsetv1alpha2.JobSetStatus, attempts []int32) {
	status.CurrentInPlaceRestartAttempt = ptr.To(attempts[0])
}

// updatePrevious sets previousInPlaceRestartAttempt to the highest attempt less one, never
// lowering it.
func updatePrevious(status *jobsetv1alpha2.JobSetStatus, attempts []int32) {
	if len(attempts) == 0 {
		return
	}
	next := slices.Max(attempts) - 1
	if prev := status.PreviousInPlaceRestartAttempt; prev != nil && next <= *prev {
		return
	}
	status.PreviousInPlaceRestartAttempt = &next
}

// reconcileInPlaceRestart is the in-place restart step of a reconcile (upstream's
// reconcileInPlaceRestart; docs/jobset.md, "Controller"): fail a JobSet over its maximum, set the
// current attempt when every pod agrees, else move the previous attempt up so that the agents
// behind it restart their pods. pods is what it reads of the JobSet's pods. failed: the JobSet is
// over its maximum and is to fail with ReachedMaxRestarts; the status is then left as it was.
// (Whether the status changed is the caller's comparison, made once for the whole reconcile.)
//
// Upstream reads the pods' attempts as one list; every step here depends only on which attempts
// occur and how many pods have one, so pods carries the distinct attempts and the count.
func reconcileInPlaceRestart(js *jobsetv1alpha2.JobSet, pods inPlaceView) (failed bool, err error) {
	if pods.restartCount > js.Spec.FailurePolicy.MaxRestarts {
		return true, nil
	}
	if pods.err != nil {
		return false, pods.err
	}
	attempts := pods.attempts
	if exceededMaxRestarts(js, attempts) {
		return true, nil
	}
	total, err := totalPods(js)
	if err != nil {
		return false, err
	}
	if pods.annotated == total && allEqual(attempts) {
		updateCurrent(&js.Status, attempts)
		return false, nil
	}
	if len(attempts) > 0 && slices.Max(attempts) > 0 {
		updatePrevious(&js.Status, attempts)
	}
	return false, nil
}
