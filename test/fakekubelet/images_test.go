package fakekubelet

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
)

var _ = Describe("Images", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	It("shows ErrImagePull, then ImagePullBackOff, for an image the registry does not have, and starts nothing after it", func(ctx context.Context) {
		pod := builders.MakePod("missing", ns).
			InitContainer(builders.MakeContainer("init").Obj()).
			Container(builders.MakeContainer("main").Shell("sleep 3600").Obj()).Obj()
		pod.Spec.InitContainers[0].Image = "not-exist-image:v1"
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		h := specs.RecordPod(ctx, cluster.Clientset, ns, "missing")
		Eventually(func(g Gomega) {
			cs := specs.ContainerStatus(h.Latest(), "init")
			g.Expect(cs).NotTo(BeNil())
			g.Expect(state(cs)).To(Equal("Waiting(ImagePullBackOff)"))
			g.Expect(cs.State.Waiting.Message).To(HavePrefix(`Back-off pulling image "not-exist-image:v1": ErrImagePull: rpc error: code = NotFound`))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(h.Index(0, func(p *corev1.Pod) bool {
			cs := specs.ContainerStatus(p, "init")
			return cs != nil && state(cs) == "Waiting(ErrImagePull)"
		})).To(BeNumerically(">=", 0), "ErrImagePull was shown before ImagePullBackOff")
		p := h.Latest()
		Expect(p.Status.Phase).To(Equal(corev1.PodPending))
		Expect(state(specs.ContainerStatus(p, "main"))).To(Equal("Waiting(PodInitializing)"))
		// The kubelet writes its events apart from the status, through its node's rate-limited
		// recorder: they may trail the status the checks above saw.
		Eventually(func(g Gomega) {
			events := strings.Join(specs.EventMessages(ctx, cluster.Clientset, ns, "missing"), "\n")
			g.Expect(events).To(ContainSubstring(`Pulling: Pulling image "not-exist-image:v1"`))
			g.Expect(events).To(ContainSubstring(`Failed: Failed to pull image "not-exist-image:v1": rpc error: code = NotFound`))
			g.Expect(events).To(ContainSubstring("Failed: Error: ErrImagePull"))
			g.Expect(events).To(ContainSubstring(`BackOff: Back-off pulling image "not-exist-image:v1"`))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("refuses an image that is not present under pull policy Never, and one that is not an image name", func(ctx context.Context) {
		pod := builders.MakePod("never", ns).
			Container(builders.MakeContainer("main").Obj()).
			Container(builders.MakeContainer("bad").Obj()).Obj()
		pod.Spec.Containers[0].Image, pod.Spec.Containers[0].ImagePullPolicy = "busybox:never-pulled", corev1.PullNever
		pod.Spec.Containers[1].Image = "busybox:1.36@sha256:short"
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		h := specs.RecordPod(ctx, cluster.Clientset, ns, "never")
		Eventually(func(g Gomega) {
			p := h.Latest()
			g.Expect(p).NotTo(BeNil())
			main, bad := specs.ContainerStatus(p, "main"), specs.ContainerStatus(p, "bad")
			g.Expect(state(main)).To(Equal("Waiting(ErrImageNeverPull)"))
			g.Expect(main.State.Waiting.Message).To(Equal(`Container image "busybox:never-pulled" is not present with pull policy of Never`))
			g.Expect(state(bad)).To(Equal("Waiting(InvalidImageName)"))
			g.Expect(bad.State.Waiting.Message).To(HavePrefix(`Failed to apply default image tag "busybox:1.36@sha256:short": couldn't parse image name`))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})

	It("starts a container once a flaky registry lets its image be pulled", func(ctx context.Context) {
		pod := builders.MakePod("flaky", ns).Container(builders.MakeContainer("main").Shell("sleep 3600").Obj()).Obj()
		pod.Spec.Containers[0].Image = "flaky.example/team/trainer:v3"
		// The pod worker tries a failed start again after its error back-off, 10 s in every
		// timing profile, as the kubelet's.
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		h := specs.RecordPod(ctx, cluster.Clientset, ns, "flaky")
		Eventually(func(g Gomega) {
			g.Expect(state(specs.ContainerStatus(h.Latest(), "main"))).To(Equal("Running"))
		}).WithTimeout(2 * Timeout).WithPolling(Interval).Should(Succeed())
		Expect(h.Index(0, func(p *corev1.Pod) bool {
			cs := specs.ContainerStatus(p, "main")
			return cs != nil && state(cs) == "Waiting(ErrImagePull)" && strings.Contains(cs.State.Waiting.Message, "503 Service Unavailable")
		})).To(BeNumerically(">=", 0), "the first pull failed")
		imageID := specs.ContainerStatus(h.Latest(), "main").ImageID
		Expect(imageID).To(HavePrefix("flaky.example/team/trainer@sha256:"))
		// The node's status lists the image it pulled, by digest and by name, at its next
		// status check.
		Eventually(func(g Gomega) {
			node, err := cluster.Clientset.CoreV1().Nodes().Get(ctx, h.Latest().Spec.NodeName, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(node.Status.Images).To(ContainElement(HaveField("Names", ConsistOf(imageID, "flaky.example/team/trainer:v3"))))
		}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
	})
})
