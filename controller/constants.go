package controller

// eventAction is the action of every event the controller records through the events.k8s.io
// API (events.k8s.io/v1 Event.action), as upstream JobSet's controller writes it.
const eventAction = "Reconciling"

// Condition reasons and messages, and event reasons, as upstream JobSet writes them.
const (
	reasonReachedMaxRestarts  = "ReachedMaxRestarts"
	messageReachedMaxRestarts = "jobset failed due to reaching max number of restarts"

	reasonFailedJobs  = "FailedJobs"
	messageFailedJobs = "jobset failed due to one or more job failures"

	reasonAllJobsCompleted  = "AllJobsCompleted"
	messageAllJobsCompleted = "jobset completed successfully"

	reasonJobCreationFailed             = "JobCreationFailed"
	reasonHeadlessServiceCreationFailed = "HeadlessServiceCreationFailed"

	reasonRestartingDefaultFailurePolicy = "DefaultFailurePolicy"
	reasonRestartingFailurePolicyFormat  = "FailurePolicy_%s"
	reasonRestartingJobsReady            = "JobsReady"
	reasonRestartingJobSetFailed         = "JobSetFailed"
	reasonRestartingJobSetCompleted      = "JobSetCompleted"
	messageRestartingJobsReady           = "all jobs are ready"
	messageRestartingJobSetFailed        = "jobset failed"

	reasonSuspended  = "SuspendedJobs"
	messageSuspended = "jobset is suspended"
	reasonResumed    = "ResumeJobs"
	messageResumed   = "jobset is resumed"

	reasonFailJobSetAction        = "FailJobSetFailurePolicyAction"
	messageFailJobSetAction       = "applying FailJobSet failure policy action"
	reasonRestartJobSetAction     = "RestartJobSetFailurePolicyAction"
	messageRestartJobSetAction    = "applying RestartJobSet failure policy action"
	reasonRestartIgnoreAction     = "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction"
	messageRestartIgnoreAction    = "applying RestartJobSetAndIgnoreMaxRestarts failure policy action"
	reasonRestartJobAction        = "RestartJobFailurePolicyAction"
	messageRestartJobAction       = "applying RestartJob failure policy action"
	reasonRestartJobIgnoreAction  = "RestartJobAndIgnoreMaxRestartsFailurePolicyAction"
	messageRestartJobIgnoreAction = "applying RestartJobAndIgnoreMaxRestarts failure policy action"

	reasonPVCCreationFailed = "PVCCreationFailed"

	// terminal states of status.terminalState.
	terminalCompleted = "Completed"
	terminalFailed    = "Failed"
)

// maxParallelism bounds concurrent Job creations and deletions, as upstream's MaxParallelism.
const maxParallelism = 50
