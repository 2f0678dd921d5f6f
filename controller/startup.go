package controller

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// creatable returns the replicated Jobs whose Jobs may be created now: with startupPolicy
// InOrder, those up to the first one not yet started; otherwise those whose dependencies are met.
// It keeps the startup-policy conditions.
func creatable(js *jobsetv1alpha2.JobSet, now metav1.Time) map[string]bool {
	ok := map[string]bool{}
	inOrder := js.Spec.StartupPolicy != nil && js.Spec.StartupPolicy.StartupPolicyOrder == jobsetv1alpha2.InOrder
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		if !inOrder {
			ok[rj.Name] = dependenciesMet(js, rj)
			continue
		}
		ok[rj.Name] = true
		if !started(rj, findReplicatedJobStatus(js.Status.ReplicatedJobsStatus, rj.Name)) {
			setCondition(js, jobsetv1alpha2.JobSetStartupPolicyInProgress, metav1.ConditionTrue, reasonInOrderInProgress, messageInOrderInProgress, now)
			setCondition(js, jobsetv1alpha2.JobSetStartupPolicyCompleted, metav1.ConditionFalse, reasonInOrderInProgress, messageInOrderInProgress, now)
			return ok // the rest wait for this one
		}
	}
	if inOrder {
		setCondition(js, jobsetv1alpha2.JobSetStartupPolicyCompleted, metav1.ConditionTrue, reasonInOrderCompleted, messageInOrderCompleted, now)
		setCondition(js, jobsetv1alpha2.JobSetStartupPolicyInProgress, metav1.ConditionFalse, reasonInOrderCompleted, messageInOrderCompleted, now)
	}
	return ok
}
