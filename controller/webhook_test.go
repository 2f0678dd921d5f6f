package controller

import (
	"context"
	"math"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// validInPlace is upstream's valid case: p = c = 1, backoffLimit MaxInt32, podReplacementPolicy
// Failed; here with an agent sidecar too.
func validInPlace() *jobsetv1alpha2.JobSet {
	agent := corev1.Container{Name: "agent", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		RestartPolicyRules: []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestartAllContainers,
			ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpNotIn, Values: []int32{0}}}},
		StartupProbe: &corev1.Probe{}}
	worker := corev1.Container{Name: "worker", RestartPolicyRules: agent.RestartPolicyRules}
	return &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: "default"}, Spec: jobsetv1alpha2.JobSetSpec{
		FailurePolicy: &jobsetv1alpha2.FailurePolicy{RestartStrategy: jobsetv1alpha2.InPlaceRestart},
		ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "job-1", Replicas: 1, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](math.MaxInt32),
			PodReplacementPolicy: ptr.To(batchv1.Failed),
			Template:             corev1.PodTemplateSpec{Spec: corev1.PodSpec{InitContainers: []corev1.Container{agent}, Containers: []corev1.Container{worker}}},
		}}}},
	}}
}

// TestValidateCreateInPlaceRestart mirrors upstream's inPlaceRestartTests
// (pkg/webhooks/jobset_webhook_test.go).
func TestValidateCreateInPlaceRestart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gate    bool
		mutate  func(*batchv1.JobSpec)
		wantErr string
	}{
		{name: "InPlaceRestart restart strategy cannot be set when InPlaceRestart feature gate is disabled",
			wantErr: "InPlaceRestart restart strategy cannot be set when InPlaceRestart feature gate is disabled"},
		{name: "InPlaceRestart restart strategy can be set when InPlaceRestart feature gate is enabled", gate: true},
		{name: "InPlaceRestart enabled: backoffLimit is not MaxInt32", gate: true, mutate: func(s *batchv1.JobSpec) { s.BackoffLimit = ptr.To[int32](0) },
			wantErr: "spec.replicatedJobs[0].template.spec.backoffLimit: Invalid value: 0: replicatedJob job-1: must be set to 2147483647 (MaxInt32) when in-place restart is enabled"},
		{name: "InPlaceRestart enabled: podReplacementPolicy is not Failed", gate: true,
			mutate:  func(s *batchv1.JobSpec) { s.PodReplacementPolicy = ptr.To(batchv1.TerminatingOrFailed) },
			wantErr: "replicatedJob job-1: must be set to Failed when in-place restart is enabled"},
		{name: "InPlaceRestart enabled: completions != parallelism", gate: true, mutate: func(s *batchv1.JobSpec) { s.Completions = ptr.To[int32](2) },
			wantErr: "replicatedJob job-1: completions and parallelism must be set and equal to each other when in-place restart is enabled"},
		{name: "InPlaceRestart enabled: completions is nil", gate: true, mutate: func(s *batchv1.JobSpec) { s.Completions = nil },
			wantErr: "completions and parallelism must be set and equal to each other"},
		{name: "InPlaceRestart enabled: parallelism is nil", gate: true, mutate: func(s *batchv1.JobSpec) { s.Parallelism = nil },
			wantErr: "completions and parallelism must be set and equal to each other"},
		{name: "InPlaceRestart enabled: nil backoffLimit renders as null", gate: true, mutate: func(s *batchv1.JobSpec) { s.BackoffLimit = nil },
			wantErr: "spec.replicatedJobs[0].template.spec.backoffLimit: Invalid value: null: replicatedJob job-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := validInPlace()
			if tc.mutate != nil {
				tc.mutate(&js.Spec.ReplicatedJobs[0].Template.Spec)
			}
			_, err := (&Webhook{Gates: FeatureGates{InPlaceRestart: tc.gate}}).ValidateCreate(context.Background(), js)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
			}
			if !apierrors.IsInvalid(err) {
				t.Errorf("error is not 422 Invalid: %v", err)
			}
		})
	}
}

func TestValidateCreateFailurePolicyRules(t *testing.T) {
	js := validInPlace()
	js.Spec.FailurePolicy = &jobsetv1alpha2.FailurePolicy{Rules: []jobsetv1alpha2.FailurePolicyRule{
		{Name: "ok", Action: jobsetv1alpha2.FailJobSet, OnJobFailureReasons: []string{"PodFailurePolicy"}},
		{Name: "ok", Action: jobsetv1alpha2.FailJobSet},
		{Name: "1bad", Action: jobsetv1alpha2.FailJobSet, OnJobFailureReasons: []string{"Evicted"}, TargetReplicatedJobs: []string{"nope"}},
	}}
	_, err := (&Webhook{}).ValidateCreate(context.Background(), js)
	for _, want := range []string{`spec.failurePolicy.rules[1].name: Duplicate value: "ok"`, `spec.failurePolicy.rules[2].name: Invalid value: "1bad"`,
		`spec.failurePolicy.rules[2].onJobFailureReasons[0]: Unsupported value: "Evicted"`,
		`spec.failurePolicy.rules[2].targetReplicatedJobs[0]: Invalid value: "nope": no replicatedJob has this name`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}
