package images

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// harness is a Manager on a fake clock whose pulls' ends are awaited.
type harness struct {
	t      *testing.T
	m      *Manager
	clock  *testingclock.FakeClock
	pulled chan types.UID
}

func newHarness(t *testing.T, rules ...Rule) *harness {
	h := &harness{t: t, clock: testingclock.NewFakeClock(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)), pulled: make(chan types.UID, 16)}
	m, err := NewManager(Options{Rules: rules, PullTime: 2 * time.Second, BackOff: 10 * time.Second, BackOffMax: 300 * time.Second,
		SecretPulledImages: true, Clock: h.clock})
	if err != nil {
		t.Fatal(err)
	}
	m.Notify(func(uid types.UID) { h.pulled <- uid })
	t.Cleanup(m.Stop)
	h.m = m
	return h
}

func podOf(uid string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid)}}
}

func ctr(image string, policy corev1.PullPolicy) *corev1.Container {
	return &corev1.Container{Name: "c", Image: image, ImagePullPolicy: policy}
}

// step moves the clock on and waits for the pulls of the pods ends names to report their end,
// in any order.
func (h *harness) step(d time.Duration, ends ...string) {
	h.t.Helper()
	h.clock.Step(d)
	var got []string
	for range ends {
		select {
		case uid := <-h.pulled:
			got = append(got, string(uid))
		case <-time.After(10 * time.Second):
			h.t.Fatalf("pulls ended for %v, want %v", got, ends)
		}
	}
	slices.Sort(got)
	if want := slices.Sorted(slices.Values(ends)); !slices.Equal(got, want) {
		h.t.Fatalf("pulls ended for %v, want %v", got, want)
	}
}

// line renders a Result for the tables: reason, ref or pulling, then each event.
func line(r Result) string {
	var parts []string
	switch {
	case r.Pulling:
		parts = append(parts, "pulling")
	case r.Ref != "":
		parts = append(parts, "ready")
	default:
		parts = append(parts, r.Reason+"("+r.Message+")")
	}
	for _, e := range r.Events {
		parts = append(parts, e.Type+"/"+e.Reason+": "+e.Message)
	}
	return strings.Join(parts, " | ")
}

func expect(t *testing.T, r Result, want ...string) {
	t.Helper()
	got := line(r)
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("got %s\nwant it to contain %q", got, w)
		}
	}
}

// A missing image: the pull fails; the start shows ErrImagePull, the next one ImagePullBackOff
// with the failure, until the backoff (10 s, then 20 s) lets it pull again.
func TestMissingImageBacksOff(t *testing.T) {
	h := newHarness(t, Rule{Image: "not-exist-image:*", Missing: true})
	pod, c := podOf("p"), ctr("not-exist-image:v1", corev1.PullIfNotPresent)
	// A missing image fails at once, the registry answering, within the start.
	notFound := `rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/library/not-exist-image:v1": failed to resolve reference "docker.io/library/not-exist-image:v1": docker.io/library/not-exist-image:v1: not found`
	expect(t, h.m.Ensure("n", pod, c), "ErrImagePull("+notFound+")", `Normal/Pulling: Pulling image "not-exist-image:v1"`,
		`Warning/Failed: Failed to pull image "not-exist-image:v1": `+notFound, "Warning/Failed: Error: ErrImagePull")
	expect(t, h.m.Ensure("n", pod, c), `ImagePullBackOff(Back-off pulling image "not-exist-image:v1": ErrImagePull: `+notFound+")",
		`Normal/BackOff: Back-off pulling image "not-exist-image:v1"`, "Warning/Failed: Error: ImagePullBackOff")
	h.step(9 * time.Second)
	expect(t, h.m.Ensure("n", pod, c), "ImagePullBackOff(")
	h.step(2 * time.Second)
	expect(t, h.m.Ensure("n", pod, c), "ErrImagePull(", "Normal/Pulling")
	h.step(19 * time.Second)
	expect(t, h.m.Ensure("n", pod, c), "ImagePullBackOff(")
	h.step(2 * time.Second)
	expect(t, h.m.Ensure("n", pod, c), "ErrImagePull(")

	// Another pod has a backoff of its own, as the kubelet keys it by pod and image.
	expect(t, h.m.Ensure("n", podOf("q"), c), "ErrImagePull(")
}

// Pull policies against the node's store.
func TestPullPolicies(t *testing.T) {
	h := newHarness(t)
	if err := h.m.Preload("n", "busybox:1.36"); err != nil {
		t.Fatal(err)
	}
	pod := podOf("p")
	expect(t, h.m.Ensure("n", pod, ctr("busybox:1.36", corev1.PullIfNotPresent)), "ready",
		`Normal/Pulled: Container image "busybox:1.36" already present on machine and can be accessed by the pod`)
	expect(t, h.m.Ensure("n", pod, ctr("docker.io/library/busybox:1.36", corev1.PullNever)), "ready")
	expect(t, h.m.Ensure("n", pod, ctr("busybox:1.37", corev1.PullNever)),
		`ErrImageNeverPull(Container image "busybox:1.37" is not present with pull policy of Never)`,
		`Warning/ErrImageNeverPull: Container image "busybox:1.37" is not present with pull policy of Never`, "Warning/Failed: Error: ErrImageNeverPull")
	// Always pulls even what the node has; the registry's answer takes no time then, and the
	// pull ends within the start.
	expect(t, h.m.Ensure("n", pod, ctr("busybox:1.36", corev1.PullAlways)), "ready", `Normal/Pulling: Pulling image "busybox:1.36"`,
		`Normal/Pulled: Successfully pulled image "busybox:1.36" in 0s (0s including waiting). Image size: `)
	// No policy: :latest (or no tag) pulls always, any other tag if not present.
	if got := defaultPolicy(mustNormalize(t, "busybox")); got != corev1.PullAlways {
		t.Errorf("busybox: %s", got)
	}
	if got := defaultPolicy(mustNormalize(t, "busybox:1.36")); got != corev1.PullIfNotPresent {
		t.Errorf("busybox:1.36: %s", got)
	}
}

func mustNormalize(t *testing.T, name string) reference.Named {
	t.Helper()
	n, err := normalize(name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestInvalidImageName(t *testing.T) {
	h := newHarness(t)
	expect(t, h.m.Ensure("n", podOf("p"), ctr("Busybox:1.36", "")),
		`InvalidImageName(Failed to apply default image tag "Busybox:1.36": couldn't parse image name "Busybox:1.36": invalid reference format: repository name`,
		`Warning/InspectFailed: Failed to apply default image tag "Busybox:1.36"`, "Warning/Failed: Error: InvalidImageName")
}

// A node pulls one image at a time: the second pull waits for the first, and says so.
func TestPullsAreSerializedPerNode(t *testing.T) {
	h := newHarness(t, Rule{Image: "big:*", PullTime: ptr.To(5 * time.Second), SizeBytes: 40 << 30})
	a, b, other := podOf("a"), podOf("b"), podOf("c")
	expect(t, h.m.Ensure("n", a, ctr("big:1", "")), "pulling")
	expect(t, h.m.Ensure("n", b, ctr("big:2", "")), "pulling")
	expect(t, h.m.Ensure("m", other, ctr("big:3", "")), "pulling") // another node pulls at once
	expect(t, h.m.Ensure("n", podOf("d"), ctr("small:1", "")), "pulling")
	h.step(5*time.Second, "a", "c")
	expect(t, h.m.Ensure("n", a, ctr("big:1", "")), "ready", `Successfully pulled image "big:1" in 5s (5s including waiting). Image size: 42949672960 bytes.`)
	h.step(5*time.Second, "b")
	h.step(2*time.Second, "d") // started once b's ended, and takes the default 2 s
	expect(t, h.m.Ensure("n", b, ctr("big:2", "")), "ready", `Successfully pulled image "big:2" in 5s (10s including waiting)`)
	expect(t, h.m.Ensure("n", podOf("d"), ctr("small:1", "")), "ready", `Successfully pulled image "small:1" in 2s (12s including waiting)`)
	images := h.m.NodeImages("n")
	if len(images) != 3 || images[0].SizeBytes != 40<<30 || len(images[0].Names) != 2 ||
		!strings.HasPrefix(images[0].Names[0], "docker.io/library/big@sha256:") || images[0].Names[1] != "docker.io/library/big:1" {
		t.Errorf("node images: %+v", images)
	}
}

// A flaky registry: the first pulls fail with 503, then the image comes.
func TestFailPulls(t *testing.T) {
	h := newHarness(t, Rule{Image: "registry.example.com/*", FailPulls: 1, PullTime: ptr.To(time.Second)})
	pod, c := podOf("p"), ctr("registry.example.com/team/trainer:v3", "")
	expect(t, h.m.Ensure("n", pod, c), "pulling")
	h.step(time.Second, "p")
	expect(t, h.m.Ensure("n", pod, c), "ErrImagePull(rpc error: code = Unavailable", "503 Service Unavailable")
	h.step(10 * time.Second)
	expect(t, h.m.Ensure("n", pod, c), "pulling")
	h.step(time.Second, "p")
	expect(t, h.m.Ensure("n", pod, c), "ready")
}

func TestUnreachableRegistry(t *testing.T) {
	h := newHarness(t, Rule{Image: "registry.corp.example/*", Unreachable: true})
	pod := podOf("p")
	expect(t, h.m.Ensure("n", pod, ctr("registry.corp.example/team/trainer:v1", "")), `dial tcp: lookup registry.corp.example: no such host`,
		`Head "https://registry.corp.example/v2/team/trainer/manifests/v1"`)
	// Without a rule: upstream's invalid registry and the .invalid domain never resolve; other
	// registries exist.
	expect(t, h.m.Ensure("n", pod, ctr("invalid.registry.k8s.io/invalid/alpine:3.1", "")), `dial tcp: lookup invalid.registry.k8s.io: no such host`,
		`Head "https://invalid.registry.k8s.io/v2/invalid/alpine/manifests/3.1"`)
	expect(t, h.m.Ensure("n", pod, &corev1.Container{Name: "d", Image: "registry.invalid:5000/x:1"}), `lookup registry.invalid: no such host`)
	expect(t, h.m.Ensure("n", pod, &corev1.Container{Name: "e", Image: "invalid.example/x:1"}), "pulling")
}

func TestBadRules(t *testing.T) {
	for _, r := range []Rule{{Image: "[a"}, {Image: "x", FailPulls: -1}, {Image: "x", PullTime: ptr.To(-time.Second)}} {
		if _, err := NewManager(Options{Rules: []Rule{r}, Clock: testingclock.NewFakeClock(time.Now())}); err == nil {
			t.Errorf("rule %+v accepted", r)
		}
	}
}

// A pod forgotten while its pull waits in the node's queue is not pulled for.
func TestForgetPod(t *testing.T) {
	h := newHarness(t, Rule{Image: "big:*", PullTime: ptr.To(5 * time.Second)})
	h.m.Ensure("n", podOf("a"), ctr("big:1", ""))
	h.m.Ensure("n", podOf("b"), ctr("big:2", ""))
	h.m.ForgetPod("b")
	h.step(5*time.Second, "a")
	h.step(5 * time.Second)
	select {
	case uid := <-h.pulled:
		t.Fatalf("a pull for forgotten pod %s ran", uid)
	case <-time.After(100 * time.Millisecond):
	}
	if n := len(h.m.NodeImages("n")); n != 1 {
		t.Errorf("node has %d images, want 1", n)
	}
}

// Forgetting a pod leaves nothing of it behind, not its backoff nor a pull or a failure that ended
// after it was forgotten, and touches no other pod's pulls.
func TestForgetPodLeavesNothing(t *testing.T) {
	h := newHarness(t, Rule{Image: "gone:*", Missing: true}, Rule{Image: "flaky:*", FailPulls: 1, PullTime: ptr.To(5 * time.Second)},
		Rule{Image: "big:*", PullTime: ptr.To(5 * time.Second)})
	expect(t, h.m.Ensure("n", podOf("failed"), ctr("gone:v1", corev1.PullIfNotPresent)), "ErrImagePull(")
	expect(t, h.m.Ensure("m", podOf("other"), ctr("gone:v1", corev1.PullIfNotPresent)), "ErrImagePull(")
	h.m.Ensure("n", podOf("running"), ctr("big:1", ""))
	h.m.Ensure("m", podOf("running-other"), ctr("big:1", ""))
	h.m.ForgetPod("failed")
	h.m.ForgetPod("running")
	h.step(5*time.Second, "running", "running-other") // the forgotten pod's pull goes on and ends
	h.m.mu.Lock()
	if pods := slices.Sorted(maps.Keys(h.m.pods)); !slices.Equal(pods, []types.UID{"other", "running-other"}) {
		t.Errorf("pods held: %v, want other and running-other", pods)
	}
	if keys := slices.Sorted(maps.Keys(h.m.lastErr)); !slices.Equal(keys, []string{"other_gone:v1"}) {
		t.Errorf("failures held: %v, want other's", keys)
	}
	if n, m := len(h.m.nodes["n"].done), len(h.m.nodes["m"].done); n != 0 || m != 1 {
		t.Errorf("ended pulls held: %d on n, %d on m; want 0 and 1", n, m)
	}
	h.m.mu.Unlock()

	// A pull that fails after its pod was forgotten keeps no backoff.
	h.m.Ensure("n", podOf("late"), ctr("flaky:v1", ""))
	h.m.ForgetPod("late")
	h.step(5*time.Second, "late")
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	if _, ok := h.m.lastErr["late_flaky:v1"]; ok || h.m.pods["late"] != nil {
		t.Error("the failure of a forgotten pod's pull was kept")
	}
}

// A kubelet restart forgets the pull backoff, which the kubelet keeps in memory: the next start
// pulls again at once, and a failure starts the backoff anew at its first step.
func TestKubeletRestartForgetsBackoff(t *testing.T) {
	h := newHarness(t, Rule{Image: "gone:*", Missing: true})
	pod, c := podOf("p"), ctr("gone:v1", corev1.PullIfNotPresent)
	expect(t, h.m.Ensure("n", pod, c), "ErrImagePull(")
	h.step(11 * time.Second)
	expect(t, h.m.Ensure("n", pod, c), "ErrImagePull(") // the backoff is 20 s now
	h.step(time.Second)
	expect(t, h.m.Ensure("n", pod, c), "ImagePullBackOff(")
	h.m.KubeletRestarted(pod.UID)
	expect(t, h.m.Ensure("n", pod, c), "ErrImagePull(", "Normal/Pulling")
	h.step(11 * time.Second)
	expect(t, h.m.Ensure("n", pod, c), "ErrImagePull(") // 10 s again, not 40 s
}

// Resolve is the normalized name and the digest every node agrees on.
func TestResolve(t *testing.T) {
	name, ref, err := Resolve("busybox")
	if err != nil || name != "docker.io/library/busybox:latest" || !strings.HasPrefix(ref, "docker.io/library/busybox@sha256:") {
		t.Errorf("Resolve(busybox) = %q, %q, %v", name, ref, err)
	}
	if _, again, _ := Resolve("docker.io/library/busybox:latest"); again != ref {
		t.Errorf("the normalized name resolves to %q, the short one to %q", again, ref)
	}
	if _, _, err := Resolve("Not An Image"); err == nil {
		t.Error("Resolve(Not An Image): no error")
	}
}
