package bench

import (
	"fmt"
	"math"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/agent"
	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
	agentconfig "github.com/restartbed/restartbed/config/agent"
	"github.com/restartbed/restartbed/fakekubelet"
)

// Names in the benchmark's JobSet.
const (
	jobSetName        = "bench"
	replicatedJobName = "workers"
	workerContainer   = "worker"
	// workerExitCode is the code the benchmark's worker exits with; any nonzero code restarts the
	// group.
	workerExitCode = 1
)

// Strategy is how the benchmark's JobSet restarts its group.
type Strategy string

// The strategies, as --strategy names them.
const (
	InPlace  Strategy = "inplace"
	Recreate Strategy = "recreate"
)

// Strategies is every strategy, in the order a run measures them.
func Strategies() []Strategy { return []Strategy{InPlace, Recreate} }

// benchJobSet is the benchmark's JobSet: replicas Jobs of podsPerJob pods, each pod on a node of
// its own (it takes all four TPU chips of an emulated node), with JobSet's agent as a sidecar
// whose startup probe is the barrier, and a worker that runs until it is stopped and exits on
// SIGTERM, as a training process does.
//
// In place, both containers restart all the pod's containers on a nonzero exit and the Jobs
// never fail their pods (JobSet's sidecar-mode example). With Recreate, the same pods carry no
// restart rules and a Job fails on its first failed pod, so the JobSet recreates every Job.
func benchJobSet(namespace string, pods, podsPerJob int, strategy Strategy) *jobsetv1alpha2.JobSet {
	var rules []corev1.ContainerRestartRule
	backoffLimit := int32(0)
	restartStrategy := jobsetv1alpha2.Recreate
	if strategy == InPlace {
		rules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestartAllContainers,
			ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpNotIn, Values: []int32{0}}}}
		backoffLimit = math.MaxInt32
		restartStrategy = jobsetv1alpha2.InPlaceRestart
	}
	chips := corev1.ResourceList{fakekubelet.TPUResource: resource.MustParse("4")}
	spec := corev1.PodSpec{
		RestartPolicy:      corev1.RestartPolicyNever,
		ServiceAccountName: agentconfig.ServiceAccountName,
		InitContainers:     []corev1.Container{agent.Sidecar(rules)},
		Containers: []corev1.Container{{
			Name: workerContainer, Image: "registry.example/bench/trainer:latest",
			RestartPolicy: ptr.To(corev1.ContainerRestartPolicyNever), RestartPolicyRules: rules,
			Resources: corev1.ResourceRequirements{Requests: chips, Limits: chips},
		}},
	}
	job := batchv1.JobSpec{
		Parallelism: ptr.To(int32(podsPerJob)), Completions: ptr.To(int32(podsPerJob)), BackoffLimit: &backoffLimit,
		CompletionMode: ptr.To(batchv1.IndexedCompletion),
		Template:       corev1.PodTemplateSpec{Spec: spec},
	}
	if strategy == InPlace {
		job.PodReplacementPolicy = ptr.To(batchv1.Failed)
	}
	return &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: jobSetName, Namespace: namespace},
		Spec: jobsetv1alpha2.JobSetSpec{
			FailurePolicy: &jobsetv1alpha2.FailurePolicy{MaxRestarts: 3, RestartStrategy: restartStrategy},
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: replicatedJobName, Replicas: int32(pods / podsPerJob),
				Template: batchv1.JobTemplateSpec{Spec: job}}},
		},
	}
}

// checkShape reports why pods and podsPerJob do not make a benchmark JobSet.
func checkShape(pods, podsPerJob int) error {
	switch {
	case pods < 1:
		return fmt.Errorf("--pods must be at least 1, got %d", pods)
	case podsPerJob < 1:
		return fmt.Errorf("--pods-per-job must be at least 1, got %d", podsPerJob)
	case pods%podsPerJob != 0:
		return fmt.Errorf("--pods %d is not a multiple of --pods-per-job %d: every Job of a replicated Job has the same parallelism", pods, podsPerJob)
	}
	return nil
}
