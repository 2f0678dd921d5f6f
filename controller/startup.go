package controller

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// Startup policy condition reasons and messages, as upstream.
const (
	reasonInOrderInProgress  = "InOrderStartupPolicyInProgress"
	messageInOrderInProgress = "in order startup policy is in progress"
	reasonInOrderCompleted   = "InOrderStartupPolicyCompleted"
	messageInOrderCompleted  = "in order startup policy has completed"
)

// started reports whether every Job of the replicated Job has started: ready, failed or succeeded
// (upstream's "Ready" dependency status and InOrder's condition for the next one).
func started(rj *jobsetv1alpha2.ReplicatedJob, st *jobsetv1alpha2.ReplicatedJobStatus) bool {
	return st != nil && st.Ready+st.Failed+st.Succeeded >= rj.Replicas
}

// dependenciesMet reports whether each dependency of the replicated Job has reached its status:
// Ready (every Job ready, failed or succeeded) or Complete (every Job succeeded).
func dependenciesMet(js *jobsetv1alpha2.JobSet, rj *jobsetv1alpha2.ReplicatedJob) bool {
	for _, dep := range rj.DependsOn {
		i := slices.IndexFunc(js.Spec.ReplicatedJobs, func(r jobsetv1alpha2.ReplicatedJob) bool { return r.Name == dep.Name })
		if i < 0 {
			return false
		}
		depJob := &js.Spec.ReplicatedJobs[i]
		st := findReplicatedJobStatus(js.Status.ReplicatedJobsStatus, dep.Name)
		switch dep.Status {
		case jobsetv1alpha2.DependencyComplete:
			if st == nil || st.Succeeded < depJob.Replicas {
				return false
			}
		default:
			if !started(depJob, st) {
				return false
			}
		}
	}
	return true
}

// inOrder reports whether the JobSet starts its replicated Jobs one after another.
func inOrder(js *jobsetv1alpha2.JobSet) bool {
	return js.Spec.StartupPolicy != nil && js.Spec.StartupPolicy.StartupPolicyOrder == jobsetv1alpha2.InOrder
}

func setInOrderInProgress(js *jobsetv1alpha2.JobSet, now metav1.Time) {
	setCondition(js, jobsetv1alpha2.JobSetStartupPolicyInProgress, metav1.ConditionTrue, reasonInOrderInProgress, messageInOrderInProgress, now)
	setCondition(js, jobsetv1alpha2.JobSetStartupPolicyCompleted, metav1.ConditionFalse, reasonInOrderInProgress, messageInOrderInProgress, now)
}

// creatable returns the replicated Jobs whose Jobs may be created now: those whose dependencies
// are met and, with startupPolicy InOrder on a running JobSet, only up to the first one not yet
// started. A suspended JobSet creates every Job (suspended); resuming then goes in order. It
// keeps the startup-policy conditions.
func creatable(js *jobsetv1alpha2.JobSet, now metav1.Time) map[string]bool {
	ok := map[string]bool{}
	ordered := inOrder(js) && !ptr.Deref(js.Spec.Suspend, false)
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		ok[rj.Name] = dependenciesMet(js, rj)
		if ordered && !started(rj, findReplicatedJobStatus(js.Status.ReplicatedJobsStatus, rj.Name)) {
			setInOrderInProgress(js, now)
			return ok // the rest wait for this one
		}
	}
	if ordered {
		setCondition(js, jobsetv1alpha2.JobSetStartupPolicyCompleted, metav1.ConditionTrue, reasonInOrderCompleted, messageInOrderCompleted, now)
		setCondition(js, jobsetv1alpha2.JobSetStartupPolicyInProgress, metav1.ConditionFalse, reasonInOrderCompleted, messageInOrderCompleted, now)
	}
	return ok
}
