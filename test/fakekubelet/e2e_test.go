package fakekubelet

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/test/specs"
)

// The pod specs and waits of the upstream node e2e tests of RestartAllContainers
// (k8s.io/kubernetes v1.35.4 test/e2e_node/restart_all_containers_test.go), unmodified: busybox
// scripts that use a marker file on an emptyDir to behave differently on their second run, and
// ten extra containers that make the cleanup long enough to restart the kubelet in the middle.
// "Restarting the kubelet" is stopping a node's kubelet and starting it again, as the e2e
// framework does.
var _ = Describe("Upstream e2e: RestartAllContainers and kubelet restarts", func() {
	const (
		containerCount = 10
		busybox        = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"
		sourceScript   = "if [ -f /mnt/init-complete ]; then sleep 3600; else touch /mnt/init-complete; sleep 10; exit 42; fi"
	)
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	e2ePod := func(name string, initContainers ...corev1.Container) *corev1.Pod {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{
				RestartPolicy:  corev1.RestartPolicyNever,
				InitContainers: initContainers,
				Containers: []corev1.Container{{
					Name:          "source-container",
					Image:         busybox,
					Command:       []string{"/bin/sh", "-c", sourceScript},
					RestartPolicy: ptr.To(corev1.ContainerRestartPolicyNever),
					RestartPolicyRules: []corev1.ContainerRestartRule{{
						Action:    corev1.ContainerRestartRuleActionRestartAllContainers,
						ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
					}},
					VolumeMounts: []corev1.VolumeMount{{Name: "workdir", MountPath: "/mnt"}},
				}},
				Volumes: []corev1.Volume{{Name: "workdir", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			},
		}
		for i := range containerCount {
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
				Name: fmt.Sprintf("container-%d", i), Image: busybox, Command: []string{"/bin/sh", "-c", "sleep 3600; exit 0"}})
		}
		return pod
	}
	condition := func(ctx context.Context, name string, status corev1.ConditionStatus) func() error {
		return func() error {
			var pod corev1.Pod
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
				return err
			}
			if c := specs.Condition(&pod, corev1.AllContainersRestarting); c != nil && c.Status == status {
				return nil
			}
			return fmt.Errorf("AllContainersRestarting is not %s", status)
		}
	}
	restartKubelet := func(ctx context.Context, name string) {
		var pod corev1.Pod
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod)).To(Succeed())
		Expect(cluster.Kubelet.RestartKubelet(pod.Spec.NodeName)).To(Succeed())
	}
	allRestartedAndRunning := func(ctx context.Context, name string) func() error {
		return func() error {
			var pod corev1.Pod
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
				return err
			}
			restarted, running := 0, 0
			for _, c := range pod.Status.ContainerStatuses {
				if c.RestartCount > 0 {
					restarted++
				}
				if c.State.Running != nil {
					running++
				}
			}
			if restarted < containerCount+1 {
				return fmt.Errorf("not all containers have restarted")
			}
			if running < containerCount+1 {
				return fmt.Errorf("not all containers are running")
			}
			return nil
		}
	}

	It("kubelet restart during cleanup", func(ctx context.Context) {
		Expect(k8s.Create(ctx, e2ePod("restart-kubelet-during-cleanup"))).To(Succeed())
		By("waiting for pod to be marked for restart")
		Eventually(condition(ctx, "restart-kubelet-during-cleanup", corev1.ConditionTrue)).WithTimeout(2 * time.Minute).WithPolling(Interval).Should(Succeed())
		By("restarting kubelet")
		restartKubelet(ctx, "restart-kubelet-during-cleanup")
		By("waiting for containers to restart")
		Eventually(allRestartedAndRunning(ctx, "restart-kubelet-during-cleanup")).WithTimeout(3 * time.Minute).WithPolling(Interval).Should(Succeed())
	}, SpecTimeout(4*time.Minute))

	It("kubelet restart during startup", func(ctx context.Context) {
		init := corev1.Container{Name: "init", Image: busybox, Command: []string{"/bin/sh", "-c", "sleep 20; exit 0"}}
		Expect(k8s.Create(ctx, e2ePod("restart-kubelet-during-startup", init))).To(Succeed())
		By("waiting for pod to be marked for restart")
		Eventually(condition(ctx, "restart-kubelet-during-startup", corev1.ConditionTrue)).WithTimeout(2 * time.Minute).WithPolling(Interval).Should(Succeed())
		By("waiting for pod cleanup finish")
		Eventually(condition(ctx, "restart-kubelet-during-startup", corev1.ConditionFalse)).WithTimeout(2 * time.Minute).WithPolling(Interval).Should(Succeed())
		By("restarting kubelet")
		restartKubelet(ctx, "restart-kubelet-during-startup")
		By("waiting for containers to restart")
		Eventually(allRestartedAndRunning(ctx, "restart-kubelet-during-startup")).WithTimeout(3 * time.Minute).WithPolling(Interval).Should(Succeed())
	}, SpecTimeout(5*time.Minute))
})
