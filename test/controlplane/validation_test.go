package controlplane

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
)

const (
	restartAll = corev1.ContainerRestartRuleActionRestartAllContainers
	always     = corev1.ContainerRestartPolicyAlways
	never      = corev1.ContainerRestartPolicyNever
	in         = corev1.ContainerRestartRuleOnExitCodesOpIn
)

// workerPod is the shape of a JobSet in-place-restart pod: an agent sidecar and a worker, each
// with a RestartAllContainers rule.
func workerPod(ns string) *corev1.Pod {
	return builders.MakePod("p", ns).
		InitContainer(builders.MakeContainer("agent").RestartPolicy(always).OnExitCodes(restartAll, in, 1).Obj()).
		Container(builders.MakeContainer("worker").RestartPolicy(never).OnExitCodes(restartAll, in, 42).Obj()).
		Obj()
}

var _ = Describe("pod validation by kube-apiserver 1.35.4", Label("validation"), func() {
	It("accepts RestartAllContainers rules on a sidecar and on a regular container", func(ctx context.Context) {
		ns := newNamespace(ctx)
		pod := workerPod(ns)
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		Expect(pod.Spec.InitContainers[0].RestartPolicyRules).To(HaveLen(1), "the rules were dropped, not stored")
	})

	DescribeTable("rejects the draft names with the apiserver's own message",
		func(ctx context.Context, mutate func(*corev1.Container), message string) {
			ns := newNamespace(ctx)
			pod := workerPod(ns)
			mutate(&pod.Spec.Containers[0])
			err := k8s.Create(ctx, pod)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			Expect(err.Error()).To(Equal(message))
		},
		Entry("action RestartPod",
			func(c *corev1.Container) { c.RestartPolicyRules[0].Action = "RestartPod" },
			`Pod "p" is invalid: spec.containers[0].restartPolicyRules[0].action: Unsupported value: "RestartPod": supported values: "Restart"`),
		Entry("action Terminate",
			func(c *corev1.Container) { c.RestartPolicyRules[0].Action = "Terminate" },
			`Pod "p" is invalid: spec.containers[0].restartPolicyRules[0].action: Unsupported value: "Terminate": supported values: "Restart"`),
		Entry("operator NoIn",
			func(c *corev1.Container) { c.RestartPolicyRules[0].ExitCodes.Operator = "NoIn" },
			`Pod "p" is invalid: spec.containers[0].restartPolicyRules[0].exitCodes.operator: Unsupported value: "NoIn": supported values: "In", "NotIn"`),
		Entry("rules without a container restartPolicy",
			func(c *corev1.Container) { c.RestartPolicy = nil },
			`Pod "p" is invalid: spec.containers[0].restartPolicy: Required value: must specify restartPolicy when restart rules are used`),
	)

	When("the RestartAllContainersOnContainerExits gate is off", Ordered, func() {
		var gateOff *envtest.Cluster
		BeforeAll(func(ctx context.Context) {
			gateOff = specs.StartCluster(ctx, envtest.Options{
				FeatureGates:             map[string]bool{envtest.GateRestartAllContainers: false},
				DisableControllerManager: true,
			})
		}, NodeTimeout(specs.StartTimeout))

		It("rejects the RestartAllContainers action", func(ctx context.Context) {
			err := gateOff.Client.Create(ctx, workerPod("default"))
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			Expect(err.Error()).To(ContainSubstring(
				`spec.containers[0].restartPolicyRules[0].action: Unsupported value: "RestartAllContainers": supported values: "Restart"`))
		})
	})
})
