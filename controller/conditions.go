package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// setCondition changes a JobSet condition as upstream's updateCondition does: a condition type
// the JobSet does not have yet is added only when True; a change of status moves the transition
// time; a change of reason or message alone keeps it. It reports whether anything changed.
func setCondition(js *jobsetv1alpha2.JobSet, t jobsetv1alpha2.JobSetConditionType, status metav1.ConditionStatus,
	reason, message string, now metav1.Time) bool {
	existing := meta.FindStatusCondition(js.Status.Conditions, string(t))
	if existing == nil {
		if status != metav1.ConditionTrue {
			return false
		}
		js.Status.Conditions = append(js.Status.Conditions, metav1.Condition{Type: string(t), Status: status,
			Reason: reason, Message: message, LastTransitionTime: now})
		return true
	}
	if existing.Status == status && existing.Reason == reason && existing.Message == message {
		return false
	}
	if existing.Status != status {
		existing.LastTransitionTime = now
	}
	existing.Status, existing.Reason, existing.Message = status, reason, message
	return true
}

// finished reports whether the JobSet has Completed or Failed.
func finished(js *jobsetv1alpha2.JobSet) bool {
	return meta.IsStatusConditionTrue(js.Status.Conditions, string(jobsetv1alpha2.JobSetCompleted)) ||
		meta.IsStatusConditionTrue(js.Status.Conditions, string(jobsetv1alpha2.JobSetFailed))
}
