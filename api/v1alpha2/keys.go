package v1alpha2

// Labels and annotations of the JobSet API. Unless noted, the JobSet controller writes each of
// them on a child Job and on its pod template, as a label and as an annotation, and readers are
// users, schedulers and the other controllers that select a JobSet's Jobs and pods.
const (
	// JobSetNameKey is the owning JobSet's name; the headless Service selects pods by it.
	JobSetNameKey = "jobset.sigs.k8s.io/jobset-name"
	// JobSetUIDKey is the owning JobSet's UID.
	JobSetUIDKey = "jobset.sigs.k8s.io/jobset-uid"
	// ReplicatedJobNameKey is the replicatedJob a Job was made from; failure-policy rules with
	// targetReplicatedJobs match on it.
	ReplicatedJobNameKey = "jobset.sigs.k8s.io/replicatedjob-name"
	// ReplicatedJobReplicas is the replicas count of that replicatedJob.
	ReplicatedJobReplicas = "jobset.sigs.k8s.io/replicatedjob-replicas"
	// GlobalReplicasKey is the sum of replicas over all replicatedJobs.
	GlobalReplicasKey = "jobset.sigs.k8s.io/global-replicas"
	// JobIndexKey is the Job's index within its replicatedJob, 0 to replicas-1.
	JobIndexKey = "jobset.sigs.k8s.io/job-index"
	// JobGlobalIndexKey is the Job's index across the whole JobSet.
	JobGlobalIndexKey = "jobset.sigs.k8s.io/job-global-index"
	// JobKey is the SHA-1 of "<namespace>/<job name>" in hex (upstream's comment says SHA-256;
	// its code uses SHA-1, and so does restartbed).
	JobKey = "jobset.sigs.k8s.io/job-key"
	// RestartsKey is status.restarts when the Job was made; Jobs below the current value belong
	// to an earlier attempt and are deleted.
	RestartsKey = "jobset.sigs.k8s.io/restart-attempt"
	// JobRestartsKey is the Job's own restart attempt under the per-Job actions (RestartJob and
	// RestartJobAndIgnoreMaxRestarts): its index's entry of replicatedJobsStatus[].jobRestarts.
	// Stamped only while the RestartJob gate is on.
	JobRestartsKey = "jobset.sigs.k8s.io/job-restart-attempt"
	// GroupNameKey, GroupReplicasKey and JobGroupIndexKey place a Job within its replicatedJob's
	// group.
	GroupNameKey     = "jobset.sigs.k8s.io/group-name"
	GroupReplicasKey = "jobset.sigs.k8s.io/group-replicas"
	JobGroupIndexKey = "jobset.sigs.k8s.io/job-group-index"
	// CoordinatorKey is the coordinator pod's stable endpoint, set when spec.coordinator is.
	CoordinatorKey = "jobset.sigs.k8s.io/coordinator"

	// ExclusiveKey (an annotation, set by users on a JobSet or a replicatedJob template) asks for
	// one Job per topology domain named by its value.
	ExclusiveKey = "alpha.jobset.sigs.k8s.io/exclusive-topology"
	// NodeSelectorStrategyKey (an annotation set by users; presence only) makes exclusive
	// placement use node selectors instead of pod affinities.
	NodeSelectorStrategyKey = "alpha.jobset.sigs.k8s.io/node-selector"
	// NamespacedJobKey is the node label the node-selector strategy selects on.
	NamespacedJobKey = "alpha.jobset.sigs.k8s.io/namespaced-job"
	// NoScheduleTaintKey is the taint that the node-selector strategy tolerates.
	NoScheduleTaintKey = "alpha.jobset.sigs.k8s.io/no-schedule"

	// InPlaceRestartAttemptKey is a pod annotation written only by the in-place-restart agent:
	// the attempt its pod is in, a decimal int32 of at least 0. The controller reads it from every
	// pod to compute the JobSet's previous and current attempts.
	InPlaceRestartAttemptKey = "jobset.sigs.k8s.io/in-place-restart-attempt"
	// DisableInPlaceRestartKey is a JobSet annotation set by users; presence only. The agent then
	// starts its worker at once, with no barrier.
	DisableInPlaceRestartKey = "jobset.sigs.k8s.io/disable-in-place-restart"
)

// JobSetControllerName is the managedBy value of the built-in controller; a JobSet with another
// value is left to whoever it names.
const JobSetControllerName = "jobset.sigs.k8s.io/jobset-controller"
