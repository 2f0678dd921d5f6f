package controller

import (
	"context"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
	"github.com/restartbed/restartbed/test/specs"
)

// warnings records the apiserver's warning headers.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// createWithWarnings creates the JobSet and returns the warnings the apiserver sent back.
func createWithWarnings(ctx context.Context, js *jobsetv1alpha2.JobSet) ([]string, error) {
	w := &warnings{}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.WarningHandler = w
	dyn, err := dynamic.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	js.APIVersion, js.Kind = jobsetv1alpha2.GroupVersion.String(), "JobSet"
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(js)
	Expect(err).NotTo(HaveOccurred())
	_, err = dyn.Resource(jobsetv1alpha2.GroupVersion.WithResource("jobsets")).Namespace(js.Namespace).
		Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	return w.list, err
}

var _ = Describe("The JobSet admission webhook", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = specs.NewNamespace(ctx, cluster) })

	// Upstream's TestValidateCreate, group inPlaceRestartTests (pkg/webhooks/jobset_webhook_test.go), against the real
	// apiserver: 422 Invalid with upstream's messages.
	DescribeTable("rejects an InPlaceRestart JobSet whose Jobs cannot restart in place",
		func(ctx context.Context, mutate func(*batchv1.JobSpec), want string) {
			js := sidecarModeJobSet(ns, "invalid", 1, 3)
			mutate(&js.Spec.ReplicatedJobs[0].Template.Spec)
			err := cluster.Client.Create(ctx, js)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			Expect(err.Error()).To(ContainSubstring(want))
		},
		Entry("backoffLimit is not MaxInt32", func(s *batchv1.JobSpec) { s.BackoffLimit = ptr.To[int32](0) },
			"spec.replicatedJobs[0].template.spec.backoffLimit: Invalid value: 0: replicatedJob workers: must be set to 2147483647 (MaxInt32) when in-place restart is enabled"),
		Entry("podReplacementPolicy is not Failed", func(s *batchv1.JobSpec) { s.PodReplacementPolicy = ptr.To(batchv1.TerminatingOrFailed) },
			"replicatedJob workers: must be set to Failed when in-place restart is enabled"),
		Entry("completions != parallelism", func(s *batchv1.JobSpec) { s.Completions = ptr.To[int32](2) },
			"replicatedJob workers: completions and parallelism must be set and equal to each other when in-place restart is enabled"),
		Entry("completions is nil", func(s *batchv1.JobSpec) { s.Completions = nil },
			"replicatedJob workers: completions and parallelism must be set and equal to each other when in-place restart is enabled"),
		Entry("parallelism is nil", func(s *batchv1.JobSpec) { s.Parallelism = nil },
			"replicatedJob workers: completions and parallelism must be set and equal to each other when in-place restart is enabled"),
	)

	It("requires the agent in an InPlaceRestart JobSet unless the disable annotation says otherwise", func(ctx context.Context) {
		js := sidecarModeJobSet(ns, "no-agent", 1, 3)
		js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.InitContainers = nil
		err := cluster.Client.Create(ctx, js)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec.replicatedJobs[0].template.spec.template.spec.initContainers: Required value: replicatedJob workers: an InPlaceRestart JobSet needs the in-place-restart agent"))

		js = sidecarModeJobSet(ns, "opted-out", 1, 3)
		js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.InitContainers = nil
		js.Annotations = map[string]string{jobsetv1alpha2.DisableInPlaceRestartKey: ""}
		Expect(cluster.Client.Create(ctx, js)).To(Succeed())
	})

	It("warns about an agent without a startup probe and a worker without a RestartAllContainers rule", func(ctx context.Context) {
		js := sidecarModeJobSet(ns, "warned", 1, 3)
		pod := &js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
		pod.InitContainers[0].StartupProbe = nil
		pod.Containers[0].RestartPolicyRules = nil
		pod.Containers[0].RestartPolicy = nil
		got, err := createWithWarnings(ctx, js)
		Expect(err).NotTo(HaveOccurred())
		Expect(got).To(ConsistOf(
			`replicatedJob workers: the agent sidecar "in-place-restart-agent" has no startup probe, so the workers start before every pod has joined the attempt`,
			`replicatedJob workers: container "worker" has no RestartAllContainers rule, so its failure does not restart its pod in place`))
	})

	It("defaults what upstream's webhook defaults", func(ctx context.Context) {
		js := plainJobSet(ns, "defaults", 1, "sleep 3600")
		js.Spec.ReplicatedJobs[0].Template.Spec.CompletionMode = nil
		js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.RestartPolicy = ""
		js.Spec.Suspend = ptr.To(true)
		js.Spec.FailurePolicy = &jobsetv1alpha2.FailurePolicy{Rules: []jobsetv1alpha2.FailurePolicyRule{{Action: jobsetv1alpha2.FailJobSet}}}
		Expect(cluster.Client.Create(ctx, js)).To(Succeed())
		Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), js)).To(Succeed())
		Expect(js.Spec.SuccessPolicy).To(Equal(&jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAll}))
		Expect(js.Spec.StartupPolicy).To(Equal(&jobsetv1alpha2.StartupPolicy{StartupPolicyOrder: jobsetv1alpha2.AnyOrder}))
		Expect(js.Spec.Network).To(Equal(&jobsetv1alpha2.Network{EnableDNSHostnames: ptr.To(true), PublishNotReadyAddresses: ptr.To(true)}))
		Expect(js.Spec.ReplicatedJobs[0].Template.Spec.CompletionMode).To(Equal(ptr.To(batchv1.IndexedCompletion)))
		Expect(string(js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.RestartPolicy)).To(Equal("OnFailure"))
		Expect(js.Spec.FailurePolicy.Rules[0].Name).To(Equal("failurePolicyRule0"))
		Expect(js.Spec.FailurePolicy.RestartStrategy).To(Equal(jobsetv1alpha2.Recreate), "the CRD's default")
	})

	It("keeps replicatedJobs immutable", func(ctx context.Context) {
		js := plainJobSet(ns, "fixed", 1, "sleep 3600")
		Expect(cluster.Client.Create(ctx, js)).To(Succeed())
		// A merge patch carries no resourceVersion: the controller's own status writes cannot
		// turn the refusal into a conflict.
		before := js.DeepCopy()
		js.Spec.ReplicatedJobs[0].Replicas = 2
		err := cluster.Client.Patch(ctx, js, client.MergeFrom(before))
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec.replicatedJobs: Invalid value"))
		Expect(err.Error()).To(ContainSubstring("field is immutable"))
	})
})
