package controller

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/restartbed/restartbed/agent"
	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// maxPerJobRestartReplicas bounds the replicas a per-Job restart action can count: the CRD's
// jobRestarts lists hold at most this many entries.
const maxPerJobRestartReplicas = 1024

// Webhook paths, as upstream's controller-runtime markers generate them.
const (
	MutatingPath   = "/mutate-jobset-x-k8s-io-v1alpha2-jobset"
	ValidatingPath = "/validate-jobset-x-k8s-io-v1alpha2-jobset"
)

// Webhook defaults and validates JobSets as upstream JobSet's admission webhook does (its Default
// and ValidateCreate in pkg/webhooks/jobset_webhook.go), and adds the check KEP-467 asked for and
// upstream never built: an InPlaceRestart JobSet must carry the in-place-restart agent.
type Webhook struct {
	// Gates are JobSet's feature gates.
	Gates FeatureGates
}

var (
	_ admission.Defaulter[*jobsetv1alpha2.JobSet] = (*Webhook)(nil)
	_ admission.Validator[*jobsetv1alpha2.JobSet] = (*Webhook)(nil)
)

// Register serves the webhook on the server, at MutatingPath and ValidatingPath.
func (w *Webhook) Register(server webhook.Server, scheme *runtime.Scheme) {
	server.Register(MutatingPath, admission.WithDefaulter(scheme, admission.Defaulter[*jobsetv1alpha2.JobSet](w)))
	server.Register(ValidatingPath, admission.WithValidator(scheme, admission.Validator[*jobsetv1alpha2.JobSet](w)))
}

// Configurations are the webhook configurations that send JobSet creates and updates to the
// webhook; the caller fills in how the apiserver reaches it (envtest does).
func Configurations() (*admissionv1.MutatingWebhookConfiguration, *admissionv1.ValidatingWebhookConfiguration) {
	rules := []admissionv1.RuleWithOperations{{
		Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
		Rule: admissionv1.Rule{APIGroups: []string{jobsetv1alpha2.GroupVersion.Group}, APIVersions: []string{jobsetv1alpha2.GroupVersion.Version},
			Resources: []string{"jobsets"}},
	}}
	none := admissionv1.SideEffectClassNone
	fail := admissionv1.Fail
	mutating := &admissionv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: "jobset-mutating-webhook-configuration"},
		Webhooks: []admissionv1.MutatingWebhook{{Name: "mjobset.kb.io", Rules: rules, SideEffects: &none, FailurePolicy: &fail,
			AdmissionReviewVersions: []string{"v1"}, ClientConfig: admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{
				Name: "jobset-webhook-service", Namespace: "jobset-system", Path: ptr.To(MutatingPath)}}}},
	}
	validating := &admissionv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: "jobset-validating-webhook-configuration"},
		Webhooks: []admissionv1.ValidatingWebhook{{Name: "vjobset.kb.io", Rules: rules, SideEffects: &none, FailurePolicy: &fail,
			AdmissionReviewVersions: []string{"v1"}, ClientConfig: admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{
				Name: "jobset-webhook-service", Namespace: "jobset-system", Path: ptr.To(ValidatingPath)}}}},
	}
	return mutating, validating
}

// Default applies upstream's defaults on create and update.
func (w *Webhook) Default(_ context.Context, js *jobsetv1alpha2.JobSet) error {
	if js.Spec.SuccessPolicy == nil {
		js.Spec.SuccessPolicy = &jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAll}
	}
	if js.Spec.StartupPolicy == nil {
		js.Spec.StartupPolicy = &jobsetv1alpha2.StartupPolicy{StartupPolicyOrder: jobsetv1alpha2.AnyOrder}
	}
	for i := range js.Spec.ReplicatedJobs {
		spec := &js.Spec.ReplicatedJobs[i].Template.Spec
		if spec.CompletionMode == nil {
			spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		}
		if spec.Template.Spec.RestartPolicy == "" {
			spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		}
	}
	if js.Spec.Network == nil {
		js.Spec.Network = &jobsetv1alpha2.Network{}
	}
	if js.Spec.Network.EnableDNSHostnames == nil {
		js.Spec.Network.EnableDNSHostnames = ptr.To(true)
	}
	if js.Spec.Network.PublishNotReadyAddresses == nil {
		js.Spec.Network.PublishNotReadyAddresses = ptr.To(true)
	}
	if fp := js.Spec.FailurePolicy; fp != nil {
		for i := range fp.Rules {
			if fp.Rules[i].Name == "" {
				fp.Rules[i].Name = fmt.Sprintf("failurePolicyRule%d", i)
			}
		}
	}
	for i := range js.Spec.VolumeClaimPolicies {
		p := &js.Spec.VolumeClaimPolicies[i]
		if p.RetentionPolicy == nil {
			p.RetentionPolicy = &jobsetv1alpha2.VolumeRetentionPolicy{}
		}
		if p.RetentionPolicy.WhenDeleted == nil {
			p.RetentionPolicy.WhenDeleted = ptr.To(jobsetv1alpha2.RetentionPolicyDelete)
		}
	}
	return nil
}

// Failure reasons a failure-policy rule may name: the Job controller's Failed reasons.
var validFailureReasons = []string{batchv1.JobReasonBackoffLimitExceeded, batchv1.JobReasonDeadlineExceeded,
	batchv1.JobReasonFailedIndexes, batchv1.JobReasonMaxFailedIndexesExceeded, batchv1.JobReasonPodFailurePolicy}

var ruleNamePattern = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

// invalid turns field errors into the apiserver's 422 Invalid for the JobSet, as upstream v0.12.
func invalid(js *jobsetv1alpha2.JobSet, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: jobsetv1alpha2.GroupVersion.Group, Kind: "JobSet"}, js.Name, errs)
}

// ValidateCreate validates a new JobSet.
func (w *Webhook) ValidateCreate(_ context.Context, js *jobsetv1alpha2.JobSet) (admission.Warnings, error) {
	var errs field.ErrorList
	var warnings admission.Warnings
	spec := field.NewPath("spec")
	names := map[string]bool{}
	for i, rj := range js.Spec.ReplicatedJobs {
		names[rj.Name] = true
		path := spec.Child("replicatedJobs").Index(i)
		for _, msg := range validation.IsDNS1035Label(jobName(js, &rj, max(rj.Replicas-1, 0))) {
			errs = append(errs, field.Invalid(path.Child("name"), rj.Name, fmt.Sprintf("the Job name %q: %s", jobName(js, &rj, max(rj.Replicas-1, 0)), msg)))
		}
	}
	if fp := js.Spec.FailurePolicy; fp != nil {
		seen := map[string]bool{}
		for i, rule := range fp.Rules {
			path := spec.Child("failurePolicy", "rules").Index(i)
			switch {
			case len(rule.Name) == 0 || len(rule.Name) > 128:
				errs = append(errs, field.Invalid(path.Child("name"), rule.Name, "must be 1 to 128 characters long"))
			case !ruleNamePattern.MatchString(rule.Name):
				errs = append(errs, field.Invalid(path.Child("name"), rule.Name, "must match "+ruleNamePattern.String()))
			case seen[rule.Name]:
				errs = append(errs, field.Duplicate(path.Child("name"), rule.Name))
			}
			seen[rule.Name] = true
			for j, reason := range rule.OnJobFailureReasons {
				if !slices.Contains(validFailureReasons, reason) {
					errs = append(errs, field.NotSupported(path.Child("onJobFailureReasons").Index(j), reason, validFailureReasons))
				}
			}
			for j, pattern := range rule.OnJobFailureMessagePatterns {
				if _, err := regexp.Compile(pattern); err != nil {
					errs = append(errs, field.Invalid(path.Child("onJobFailureMessagePatterns").Index(j), pattern, err.Error()))
				}
			}
			for j, target := range rule.TargetReplicatedJobs {
				if !names[target] {
					errs = append(errs, field.Invalid(path.Child("targetReplicatedJobs").Index(j), target, "no replicatedJob has this name"))
				}
			}
			if w.Gates.RestartJob && (rule.Action == jobsetv1alpha2.RestartJob || rule.Action == jobsetv1alpha2.RestartJobAndIgnoreMaxRestarts) {
				for k, rj := range js.Spec.ReplicatedJobs {
					if rj.Replicas > maxPerJobRestartReplicas && (len(rule.TargetReplicatedJobs) == 0 || slices.Contains(rule.TargetReplicatedJobs, rj.Name)) {
						errs = append(errs, field.Invalid(spec.Child("replicatedJobs").Index(k).Child("replicas"), rj.Replicas,
							fmt.Sprintf("at most %d with the %s action of failure policy rule %s: the status counts restarts per Job in a list of at most %d",
								maxPerJobRestartReplicas, rule.Action, rule.Name, maxPerJobRestartReplicas)))
					}
				}
			}
		}
	}
	for i, rj := range js.Spec.ReplicatedJobs {
		for j, dep := range rj.DependsOn {
			path := spec.Child("replicatedJobs").Index(i).Child("dependsOn").Index(j).Child("name")
			earlier := slices.ContainsFunc(js.Spec.ReplicatedJobs[:i], func(r jobsetv1alpha2.ReplicatedJob) bool { return r.Name == dep.Name })
			if !earlier {
				errs = append(errs, field.Invalid(path, dep.Name, "must name a replicatedJob listed before this one"))
			}
		}
	}
	if sp := js.Spec.SuccessPolicy; sp != nil {
		for j, target := range sp.TargetReplicatedJobs {
			if !names[target] {
				errs = append(errs, field.Invalid(spec.Child("successPolicy", "targetReplicatedJobs").Index(j), target, "no replicatedJob has this name"))
			}
		}
	}
	if isInPlaceRestart(js) {
		if !w.Gates.InPlaceRestart {
			errs = append(errs, field.InternalError(nil, errors.New("InPlaceRestart restart strategy cannot be set when InPlaceRestart feature gate is disabled")))
		} else {
			inPlaceErrs, inPlaceWarnings := validateInPlaceRestart(js)
			errs, warnings = append(errs, inPlaceErrs...), append(warnings, inPlaceWarnings...)
		}
	}
	return warnings, invalid(js, errs)
}

// validateInPlaceRestart checks what in-place restart needs of every replicated Job: upstream's
// Job settings (upstream's ValidateCreate), and restartbed's agent check.
func validateInPlaceRestart(js *jobsetv1alpha2.JobSet) (field.ErrorList, admission.Warnings) {
	var errs field.ErrorList
	var warnings admission.Warnings
	_, agentOptional := js.Annotations[jobsetv1alpha2.DisableInPlaceRestartKey]
	for i, rj := range js.Spec.ReplicatedJobs {
		path := field.NewPath("spec", "replicatedJobs").Index(i)
		spec := rj.Template.Spec
		if spec.BackoffLimit == nil || *spec.BackoffLimit != math.MaxInt32 {
			errs = append(errs, field.Invalid(path.Child("template", "spec", "backoffLimit"), spec.BackoffLimit,
				fmt.Sprintf("replicatedJob %s: must be set to 2147483647 (MaxInt32) when in-place restart is enabled", rj.Name)))
		}
		if spec.PodReplacementPolicy == nil || *spec.PodReplacementPolicy != batchv1.Failed {
			errs = append(errs, field.Invalid(path.Child("template", "spec", "podReplacementPolicy"), spec.PodReplacementPolicy,
				fmt.Sprintf("replicatedJob %s: must be set to Failed when in-place restart is enabled", rj.Name)))
		}
		if spec.Completions == nil || spec.Parallelism == nil || *spec.Completions != *spec.Parallelism {
			errs = append(errs, field.Invalid(path.Child("template", "spec", "completions"), spec.Completions,
				fmt.Sprintf("replicatedJob %s: completions and parallelism must be set and equal to each other when in-place restart is enabled", rj.Name)))
		}
		if agentOptional {
			continue
		}
		podPath := path.Child("template", "spec", "template", "spec")
		agent, mainMode := findAgent(&spec.Template.Spec)
		switch {
		case agent == nil:
			errs = append(errs, field.Required(podPath.Child("initContainers"), fmt.Sprintf(
				"replicatedJob %s: an InPlaceRestart JobSet needs the in-place-restart agent in every pod: an init container with restartPolicy Always "+
					"and a RestartAllContainers rule (or a main container running WORKER_COMMAND with a Restart rule), unless the JobSet has the %s annotation",
				rj.Name, jobsetv1alpha2.DisableInPlaceRestartKey)))
			continue
		case !mainMode && agent.StartupProbe == nil:
			warnings = append(warnings, fmt.Sprintf("replicatedJob %s: the agent sidecar %q has no startup probe, so the workers start before every pod has joined the attempt",
				rj.Name, agent.Name))
		}
		if mainMode {
			continue
		}
		for _, c := range spec.Template.Spec.Containers {
			if !hasAction(&c, corev1.ContainerRestartRuleActionRestartAllContainers) {
				warnings = append(warnings, fmt.Sprintf("replicatedJob %s: container %q has no RestartAllContainers rule, so its failure does not restart its pod in place",
					rj.Name, c.Name))
			}
		}
	}
	return errs, warnings
}

// findAgent returns the pod's in-place-restart agent: a sidecar with a RestartAllContainers rule,
// or (main-container mode) a regular container with WORKER_COMMAND and a Restart rule.
func findAgent(pod *corev1.PodSpec) (*corev1.Container, bool) {
	for i := range pod.InitContainers {
		c := &pod.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways && hasAction(c, corev1.ContainerRestartRuleActionRestartAllContainers) {
			return c, false
		}
	}
	for i := range pod.Containers {
		c := &pod.Containers[i]
		if hasAction(c, corev1.ContainerRestartRuleActionRestart) && slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == agent.EnvWorkerCommand }) {
			return c, true
		}
	}
	return nil, false
}

func hasAction(c *corev1.Container, action corev1.ContainerRestartRuleAction) bool {
	return slices.ContainsFunc(c.RestartPolicyRules, func(r corev1.ContainerRestartRule) bool { return r.Action == action })
}

// ValidateUpdate keeps replicatedJobs immutable, except the pod template's scheduling fields
// (labels, annotations, nodeSelector, tolerations, schedulingGates) of a JobSet that is or was
// suspended, so that a queue can change them and resume in one update, as upstream.
func (w *Webhook) ValidateUpdate(_ context.Context, old, js *jobsetv1alpha2.JobSet) (admission.Warnings, error) {
	munged := slices.Clone(js.Spec.ReplicatedJobs)
	suspended := ptr.Deref(js.Spec.Suspend, false) || ptr.Deref(old.Spec.Suspend, false)
	if suspended && len(munged) == len(old.Spec.ReplicatedJobs) {
		for i := range munged {
			munged[i] = *munged[i].DeepCopy()
			pod, oldPod := &munged[i].Template.Spec.Template, &old.Spec.ReplicatedJobs[i].Template.Spec.Template
			pod.Labels, pod.Annotations = oldPod.Labels, oldPod.Annotations
			pod.Spec.NodeSelector, pod.Spec.Tolerations, pod.Spec.SchedulingGates = oldPod.Spec.NodeSelector, oldPod.Spec.Tolerations, oldPod.Spec.SchedulingGates
		}
	}
	errs := apivalidation.ValidateImmutableField(munged, old.Spec.ReplicatedJobs, field.NewPath("spec", "replicatedJobs"))
	errs = append(errs, apivalidation.ValidateImmutableField(js.Spec.ManagedBy, old.Spec.ManagedBy, field.NewPath("spec", "managedBy"))...)
	return nil, invalid(js, errs)
}

// ValidateDelete allows every deletion.
func (w *Webhook) ValidateDelete(context.Context, *jobsetv1alpha2.JobSet) (admission.Warnings, error) {
	return nil, nil
}
