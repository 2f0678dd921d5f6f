package v1alpha2

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// JobSet runs a set of Jobs, made from replicatedJob templates, as one unit: they start, fail,
// restart and succeed together.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="TerminalState",JSONPath=".status.terminalState",type=string,description="Final state of JobSet"
// +kubebuilder:printcolumn:name="Restarts",JSONPath=".status.restarts",type=string,description="Number of restarts"
// +kubebuilder:printcolumn:name="Completed",type="string",priority=0,JSONPath=".status.conditions[?(@.type==\"Completed\")].status"
// +kubebuilder:printcolumn:name="Suspended",type="string",JSONPath=".spec.suspend",description="JobSet suspended"
// +kubebuilder:printcolumn:name="Age",JSONPath=".metadata.creationTimestamp",type=date,description="Time this JobSet was created"
type JobSet struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the JobSet's object metadata.
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// spec is what the user asks for.
	Spec JobSetSpec `json:"spec,omitempty"`
	// status is what the controller observed.
	Status JobSetStatus `json:"status,omitempty"`
}

// JobSetList is a list of JobSets.
//
// +kubebuilder:object:root=true
type JobSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []JobSet `json:"items"`
}

// JobSetSpec is the desired state of a JobSet.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && self.replicatedJobs.exists(x, has(x.dependsOn)))",message="StartupPolicy and DependsOn APIs are mutually exclusive"
type JobSetSpec struct {
	// replicatedJobs are the templates the child Jobs are made from.
	// +patchMergeKey=name
	// +patchStrategy=merge
	// +listType=map
	// +listMapKey=name
	ReplicatedJobs []ReplicatedJob `json:"replicatedJobs,omitempty" patchStrategy:"merge" patchMergeKey:"name"`

	// network controls the headless Service and pod hostnames.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	// +optional
	Network *Network `json:"network,omitempty"`

	// successPolicy says which Jobs must complete for the JobSet to complete.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	SuccessPolicy *SuccessPolicy `json:"successPolicy,omitempty"`

	// failurePolicy says what a failed Job does to the JobSet: fail it, or restart it with a
	// strategy, up to maxRestarts times.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	FailurePolicy *FailurePolicy `json:"failurePolicy,omitempty"`

	// startupPolicy orders the start of the replicatedJobs. Deprecated upstream in favour of
	// dependsOn.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	StartupPolicy *StartupPolicy `json:"startupPolicy,omitempty"`

	// suspend suspends every child Job while true.
	Suspend *bool `json:"suspend,omitempty"`

	// coordinator names one pod whose stable endpoint is published to all Jobs and pods in the
	// jobset.sigs.k8s.io/coordinator label and annotation.
	// +optional
	Coordinator *Coordinator `json:"coordinator,omitempty"`

	// managedBy names the controller that reconciles this JobSet; the built-in one only takes
	// JobSets without it or with JobSetControllerName. Immutable, at most 63 characters.
	// +optional
	ManagedBy *string `json:"managedBy,omitempty"`

	// ttlSecondsAfterFinished makes a finished JobSet eligible for deletion after that many
	// seconds.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// volumeClaimPolicies are PVCs the controller creates once per JobSet and mounts into the
	// pods that reference them by name.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	VolumeClaimPolicies []VolumeClaimPolicy `json:"volumeClaimPolicies,omitempty"`
}

// ReplicatedJob is a Job template and how many Jobs to make from it.
type ReplicatedJob struct {
	// name is the replicatedJob's name; Jobs are named <jobset>-<name>-<index>.
	Name string `json:"name"`

	// groupName groups replicatedJobs for the group labels.
	// +kubebuilder:default=default
	GroupName string `json:"groupName,omitempty"`

	// template is the Job template.
	Template batchv1.JobTemplateSpec `json:"template"`

	// replicas is the number of Jobs made from the template.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas,omitempty"`

	// dependsOn delays this replicatedJob until the named earlier ones reach a status. The first
	// replicatedJob cannot have it.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	// +kubebuilder:validation:MaxItems=5
	// +optional
	// +patchMergeKey=name
	// +patchStrategy=merge
	// +listType=map
	// +listMapKey=name
	DependsOn []DependsOn `json:"dependsOn,omitempty" patchStrategy:"merge" patchMergeKey:"name"`
}

// DependsOn names an earlier replicatedJob and the status it must reach.
type DependsOn struct {
	// name of the earlier replicatedJob.
	Name string `json:"name"`
	// status it must reach.
	// +kubebuilder:validation:Enum=Ready;Complete
	Status DependsOnStatus `json:"status"`
}

// DependsOnStatus is the status a dependency must reach.
type DependsOnStatus string

const (
	// DependencyReady: every Job of the dependency is ready, succeeded or failed.
	DependencyReady DependsOnStatus = "Ready"
	// DependencyComplete: every Job of the dependency succeeded.
	DependencyComplete DependsOnStatus = "Complete"
)

// Network configures pod DNS names.
type Network struct {
	// enableDNSHostnames gives pods the hostname <jobset>-<rjob>-<job index>-<pod index> in the
	// headless Service's subdomain. The webhook defaults it to true.
	// +optional
	EnableDNSHostnames *bool `json:"enableDNSHostnames,omitempty"`

	// subdomain names the headless Service; the JobSet's name when empty.
	// +optional
	Subdomain string `json:"subdomain,omitempty"`

	// publishNotReadyAddresses publishes pods in DNS before they are ready. The webhook defaults
	// it to true.
	// +optional
	PublishNotReadyAddresses *bool `json:"publishNotReadyAddresses,omitempty"`
}

// Operator says whether all or any of the selected Jobs must satisfy a policy.
type Operator string

const (
	// OperatorAll: every selected Job.
	OperatorAll Operator = "All"
	// OperatorAny: at least one selected Job.
	OperatorAny Operator = "Any"
)

// SuccessPolicy says when the JobSet has succeeded.
type SuccessPolicy struct {
	// operator: All or Any of the targeted Jobs must complete.
	// +kubebuilder:validation:Enum=All;Any
	Operator Operator `json:"operator"`

	// targetReplicatedJobs selects the replicatedJobs that count; empty means all.
	// +optional
	// +listType=atomic
	TargetReplicatedJobs []string `json:"targetReplicatedJobs,omitempty"`
}

// FailurePolicy says what happens when a child Job fails.
type FailurePolicy struct {
	// maxRestarts bounds the JobSet restarts that count towards it. With InPlaceRestart it also
	// bounds the in-place restart attempts of the pods.
	MaxRestarts int32 `json:"maxRestarts,omitempty"`

	// restartStrategy is how the JobSet restarts.
	// +optional
	// +kubebuilder:default=Recreate
	RestartStrategy JobSetRestartStrategy `json:"restartStrategy,omitempty"`

	// rules are tried in order against a failed Job; the first that matches decides the action.
	// With no match, the action is RestartJobSet.
	Rules []FailurePolicyRule `json:"rules,omitempty"`
}

// JobSetRestartStrategy is how a JobSet restarts.
// +kubebuilder:validation:Enum=Recreate;BlockingRecreate;InPlaceRestart
type JobSetRestartStrategy string

const (
	// Recreate deletes every Job and recreates each as soon as its old copy is gone.
	Recreate JobSetRestartStrategy = "Recreate"
	// BlockingRecreate deletes every Job and recreates none until all old copies are gone.
	BlockingRecreate JobSetRestartStrategy = "BlockingRecreate"
	// InPlaceRestart restarts the pods' containers where they run (RestartAllContainers, driven
	// by the agents), and replaces only pods that failed; a Job that fails falls back to Recreate.
	InPlaceRestart JobSetRestartStrategy = "InPlaceRestart"
)

// FailurePolicyAction is what a matching rule does.
type FailurePolicyAction string

const (
	// FailJobSet fails the JobSet at once.
	FailJobSet FailurePolicyAction = "FailJobSet"
	// RestartJobSet restarts every Job, counting towards maxRestarts; past it, fails the JobSet.
	RestartJobSet FailurePolicyAction = "RestartJobSet"
	// RestartJobSetAndIgnoreMaxRestarts restarts every Job without counting.
	RestartJobSetAndIgnoreMaxRestarts FailurePolicyAction = "RestartJobSetAndIgnoreMaxRestarts"
	// RestartJob recreates only the failed Job, counting towards maxRestarts (upstream gate
	// RestartJob; every replicatedJob must have at most 1024 replicas).
	RestartJob FailurePolicyAction = "RestartJob"
	// RestartJobAndIgnoreMaxRestarts recreates only the failed Job without counting.
	RestartJobAndIgnoreMaxRestarts FailurePolicyAction = "RestartJobAndIgnoreMaxRestarts"
)

// FailurePolicyRule matches a failed Job by its Failed condition and its replicatedJob.
type FailurePolicyRule struct {
	// name identifies the rule in conditions and events; the webhook defaults it to
	// failurePolicyRule<index>. It must match ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$.
	Name string `json:"name"`
	// action taken when the rule matches.
	// +kubebuilder:validation:Enum:=FailJobSet;RestartJobSet;RestartJobSetAndIgnoreMaxRestarts;RestartJob;RestartJobAndIgnoreMaxRestarts
	Action FailurePolicyAction `json:"action"`
	// onJobFailureReasons: the Job's Failed reason must be one of them; empty matches any.
	// +kubebuilder:validation:UniqueItems:true
	OnJobFailureReasons []string `json:"onJobFailureReasons,omitempty"`
	// onJobFailureMessagePatterns: one RE2 pattern must match the Job's Failed message; empty
	// matches any.
	// +kubebuilder:validation:UniqueItems:true
	OnJobFailureMessagePatterns []string `json:"onJobFailureMessagePatterns,omitempty"`
	// targetReplicatedJobs: the Job must come from one of them; empty matches any.
	// +optional
	// +listType=atomic
	TargetReplicatedJobs []string `json:"targetReplicatedJobs,omitempty"`
}

// StartupPolicyOptions orders the start of replicatedJobs.
type StartupPolicyOptions string

const (
	// AnyOrder starts all replicatedJobs together (the default).
	AnyOrder StartupPolicyOptions = "AnyOrder"
	// InOrder starts each replicatedJob once the previous one's Jobs are all ready.
	InOrder StartupPolicyOptions = "InOrder"
)

// StartupPolicy orders the start of replicatedJobs.
type StartupPolicy struct {
	// startupPolicyOrder is AnyOrder or InOrder.
	// +kubebuilder:validation:Enum=AnyOrder;InOrder
	StartupPolicyOrder StartupPolicyOptions `json:"startupPolicyOrder"`
}

// Coordinator names the coordinator pod by replicatedJob, Job index and completion index.
type Coordinator struct {
	// replicatedJob holding the coordinator.
	ReplicatedJob string `json:"replicatedJob"`
	// jobIndex of the Job holding it.
	JobIndex int `json:"jobIndex,omitempty"`
	// podIndex is its completion index in that Job.
	PodIndex int `json:"podIndex,omitempty"`
}

// VolumeClaimPolicy declares PVCs shared by the JobSet's pods.
//
// +kubebuilder:validation:XValidation:rule="self.templates.all(t, !has(t.metadata.namespace) || size(t.metadata.namespace) == 0)",message="namespace cannot be set for VolumeClaimPolicies templates"
type VolumeClaimPolicy struct {
	// templates of the claims, named <claim>-<jobset> once created; no namespace.
	// +kubebuilder:validation:MaxItems=50
	// +optional
	// +listType=atomic
	Templates []corev1.PersistentVolumeClaim `json:"templates,omitempty"`

	// retentionPolicy says whether the claims outlive the JobSet.
	// +optional
	RetentionPolicy *VolumeRetentionPolicy `json:"retentionPolicy,omitempty"`
}

// VolumeRetentionPolicy says what happens to the claims when the JobSet is deleted.
type VolumeRetentionPolicy struct {
	// whenDeleted is Delete (the default) or Retain.
	// +optional
	// +kubebuilder:default=Delete
	WhenDeleted *RetentionPolicyType `json:"whenDeleted,omitempty"`
}

// RetentionPolicyType is Delete or Retain.
// +kubebuilder:validation:Enum=Delete;Retain
type RetentionPolicyType string

const (
	// RetentionPolicyDelete deletes the claims with the JobSet.
	RetentionPolicyDelete RetentionPolicyType = "Delete"
	// RetentionPolicyRetain keeps them.
	RetentionPolicyRetain RetentionPolicyType = "Retain"
)

// JobSetStatus is the observed state of a JobSet.
type JobSetStatus struct {
	// conditions: Completed, Failed, Suspended, RestartingJobSet, StartupPolicyInProgress,
	// StartupPolicyCompleted.
	// +optional
	// +patchMergeKey=type
	// +patchStrategy=merge
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// restarts counts JobSet restarts by RestartJobSet or RestartJobSetAndIgnoreMaxRestarts.
	// Always serialised, zero included, as upstream does.
	// +optional
	Restarts int32 `json:"restarts"`

	// restartsCountTowardsMax counts the restarts that count towards maxRestarts.
	// +optional
	RestartsCountTowardsMax int32 `json:"restartsCountTowardsMax,omitempty"`

	// terminalState is Completed or Failed once the JobSet has finished, empty before.
	// +optional
	TerminalState string `json:"terminalState,omitempty"`

	// replicatedJobsStatus counts the Jobs of each replicatedJob by state.
	// +optional
	// +patchMergeKey=name
	// +patchStrategy=merge
	// +listType=map
	// +listMapKey=name
	ReplicatedJobsStatus []ReplicatedJobStatus `json:"replicatedJobsStatus,omitempty" patchStrategy:"merge" patchMergeKey:"name"`

	// previousInPlaceRestartAttempt is the attempt the JobSet has left behind: an agent whose pod
	// is at or below it restarts its pod in place. Written by the controller, read by agents; nil
	// until first set, and never decreases.
	// +optional
	// +kubebuilder:validation:Minimum=0
	PreviousInPlaceRestartAttempt *int32 `json:"previousInPlaceRestartAttempt,omitempty"`

	// currentInPlaceRestartAttempt is the attempt every pod has reached: an agent whose pod is at
	// it lifts its barrier and lets the worker run. Written by the controller, read by agents;
	// nil until first set.
	// +optional
	// +kubebuilder:validation:Minimum=0
	CurrentInPlaceRestartAttempt *int32 `json:"currentInPlaceRestartAttempt,omitempty"`
}

// ReplicatedJobStatus counts one replicatedJob's Jobs by state.
type ReplicatedJobStatus struct {
	// name of the replicatedJob.
	Name string `json:"name"`
	// ready counts Jobs whose ready plus succeeded pods reach min(parallelism, completions).
	Ready int32 `json:"ready"`
	// succeeded counts completed Jobs.
	Succeeded int32 `json:"succeeded"`
	// failed counts failed Jobs.
	Failed int32 `json:"failed"`
	// active counts Jobs with a pending or running pod and not being deleted.
	Active int32 `json:"active"`
	// suspended counts suspended Jobs.
	Suspended int32 `json:"suspended"`
	// jobRestarts counts, per Job index, restarts by RestartJob or RestartJobAndIgnoreMaxRestarts.
	// +kubebuilder:validation:MaxItems=1024
	// +listType=atomic
	// +optional
	JobRestarts []int32 `json:"jobRestarts,omitempty"`
	// jobRestartsCountTowardsMax counts, per Job index, the RestartJob restarts.
	// +kubebuilder:validation:MaxItems=1024
	// +listType=atomic
	// +optional
	JobRestartsCountTowardsMax []int32 `json:"jobRestartsCountTowardsMax,omitempty"`
}

// JobSetConditionType is a JobSet condition's type.
type JobSetConditionType string

// Condition types of a JobSet, written by the controller.
const (
	// JobSetCompleted: the success policy was met.
	JobSetCompleted JobSetConditionType = "Completed"
	// JobSetFailed: the JobSet failed and will not restart.
	JobSetFailed JobSetConditionType = "Failed"
	// JobSetSuspended: spec.suspend is true and the Jobs are suspended.
	JobSetSuspended JobSetConditionType = "Suspended"
	// JobSetRestarting: a restart is under way until every Job is ready again.
	JobSetRestarting JobSetConditionType = "RestartingJobSet"
	// JobSetStartupPolicyInProgress: an InOrder start is under way.
	JobSetStartupPolicyInProgress JobSetConditionType = "StartupPolicyInProgress"
	// JobSetStartupPolicyCompleted: the InOrder start finished.
	JobSetStartupPolicyCompleted JobSetConditionType = "StartupPolicyCompleted"
)

func init() {
	SchemeBuilder.Register(&JobSet{}, &JobSetList{})
}
