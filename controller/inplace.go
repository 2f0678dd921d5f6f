package controller

import (
	"fmt"
	"iter"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// isInPlaceRestart reports whether the JobSet restarts in place.
func isInPlaceRestart(js *jobsetv1alpha2.JobSet) bool {
	return js.Spec.FailurePolicy != nil && js.Spec.FailurePolicy.RestartStrategy == jobsetv1alpha2.InPlaceRestart
}

// maxContainerRestartCount is the highest restartCount of any init or regular container of any
// of the pods, failed ones and agents included.
func maxContainerRestartCount(pods []corev1.Pod) int32 {
	var highest int32
	for i := range pods {
		for n := range restartCounts(&pods[i].Status) {
			highest = max(highest, n)
		}
	}
	return highest
}

// restartCounts yields the restart counts of a pod's init and regular containers, in status order.
func restartCounts(status *corev1.PodStatus) iter.Seq[int32] {
	return func(yield func(int32) bool) {
		for _, list := range [][]corev1.ContainerStatus{status.InitContainerStatuses, status.ContainerStatuses} {
			for _, cs := range list {
				if !yield(cs.RestartCount) {
					return
				}
			}
		}
	}
}

// inPlaceRestartAttempts reads the agents' attempt annotations; Failed pods and pods without the
// annotation do not count, and a value that is not a non-negative integer is an error.
func inPlaceRestartAttempts(pods []corev1.Pod) ([]int32, error) {
	attempts := []int32{}
	for i := range pods {
		if pods[i].Status.Phase == corev1.PodFailed {
			continue
		}
		value, ok := pods[i].Annotations[jobsetv1alpha2.InPlaceRestartAttemptKey]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(value, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("invalid value for annotation %s, must be non-negative integer", jobsetv1alpha2.InPlaceRestartAttemptKey)
		}
		attempts = append(attempts, int32(n))
	}
	return attempts, nil
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
// behind it restart their pods. failed: the JobSet is over its maximum and is to fail with
// ReachedMaxRestarts; the status is then left as it was. (Whether the status changed is the
// caller's comparison, made once for the whole reconcile.)
func reconcileInPlaceRestart(js *jobsetv1alpha2.JobSet, pods []corev1.Pod) (failed bool, err error) {
	if maxContainerRestartCount(pods) > js.Spec.FailurePolicy.MaxRestarts {
		return true, nil
	}
	attempts, err := inPlaceRestartAttempts(pods)
	if err != nil {
		return false, err
	}
	if exceededMaxRestarts(js, attempts) {
		return true, nil
	}
	total, err := totalPods(js)
	if err != nil {
		return false, err
	}
	if int32(len(attempts)) == total && allEqual(attempts) {
		updateCurrent(&js.Status, attempts)
		return false, nil
	}
	if len(attempts) > 0 && slices.Max(attempts) > 0 {
		updatePrevious(&js.Status, attempts)
	}
	return false, nil
}
