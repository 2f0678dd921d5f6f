package controlplane

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/envtest/controlplane"
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

// The apiserver of every supported release validates restart rules; 1.35 names only "Restart"
// as supported even where RestartAllContainers is allowed, later releases name both
// (pkg/apis/core/validation, validateContainerRestartPolicyRules).
var _ = Describe("pod validation by kube-apiserver", Label("validation"), func() {
	for _, r := range controlplane.Releases() {
		supported := `"Restart", "RestartAllContainers"`
		if r.Minor() == "1.35" {
			supported = `"Restart"`
		}
		Context(r.Kubernetes, Ordered, func() {
			var c client.Client
			BeforeAll(func(ctx context.Context) {
				c = specs.StartCluster(ctx, envtest.Options{KubernetesVersion: r.Kubernetes, DisableControllerManager: true}).Client
			}, NodeTimeout(specs.StartTimeout))

			It("accepts RestartAllContainers rules on a sidecar and on a regular container", func(ctx context.Context) {
				pod := workerPod("default")
				pod.GenerateName, pod.Name = "p-", ""
				Expect(c.Create(ctx, pod)).To(Succeed())
				Expect(pod.Spec.InitContainers[0].RestartPolicyRules).To(HaveLen(1), "the rules were dropped, not stored")
			})

			DescribeTable("rejects the draft names with the apiserver's own message",
				func(ctx context.Context, mutate func(*corev1.Container), message string) {
					pod := workerPod("default")
					mutate(&pod.Spec.Containers[0])
					err := c.Create(ctx, pod)
					Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
					Expect(err.Error()).To(Equal(message))
				},
				Entry("action RestartPod",
					func(c *corev1.Container) { c.RestartPolicyRules[0].Action = "RestartPod" },
					`Pod "p" is invalid: spec.containers[0].restartPolicyRules[0].action: Unsupported value: "RestartPod": supported values: `+supported),
				Entry("action Terminate",
					func(c *corev1.Container) { c.RestartPolicyRules[0].Action = "Terminate" },
					`Pod "p" is invalid: spec.containers[0].restartPolicyRules[0].action: Unsupported value: "Terminate": supported values: `+supported),
				Entry("operator NoIn",
					func(c *corev1.Container) { c.RestartPolicyRules[0].ExitCodes.Operator = "NoIn" },
					`Pod "p" is invalid: spec.containers[0].restartPolicyRules[0].exitCodes.operator: Unsupported value: "NoIn": supported values: "In", "NotIn"`),
				Entry("rules without a container restartPolicy",
					func(c *corev1.Container) { c.RestartPolicy = nil },
					`Pod "p" is invalid: spec.containers[0].restartPolicy: Required value: must specify restartPolicy when restart rules are used`),
			)
		})
	}

	When("the RestartAllContainersOnContainerExits gate is off", Ordered, func() {
		var gateOff *envtest.Cluster
		BeforeAll(func(ctx context.Context) {
			gateOff = specs.StartCluster(ctx, envtest.Options{
				KubernetesVersion:        "1.36",
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
