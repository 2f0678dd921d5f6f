package runtime

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/restartbed/restartbed/fakekubelet/container"
	"github.com/restartbed/restartbed/fakekubelet/network"
	"github.com/restartbed/restartbed/fakekubelet/network/networktest"
)

// newNetworkHarness is a runtime on a pod network whose pod p has its sandbox at 10.64.0.2.
func newNetworkHarness(t *testing.T, imageCommands bool) (*harness, *corev1.Pod) {
	t.Helper()
	n := networktest.New(t, network.Options{DNS: netip.MustParseAddr("10.0.0.10")})
	h := &harness{clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), events: make(chan types.UID, 100)}
	var err error
	h.rt, err = New(Options{Clock: h.clock, Network: n, ImageCommands: imageCommands, Notify: func(uid types.UID) { h.events <- uid }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.rt.KillAll(); h.rt.Wait() })
	pod := testPod()
	mustRunSandbox(t, h.rt, pod, "10.64.0.2")
	return h, pod
}

// start starts c and returns its instance's ID.
func (h *harness) start(t *testing.T, pod *corev1.Pod, c corev1.Container) string {
	t.Helper()
	inst, err := h.rt.Start(pod, &c, nil)
	if err != nil {
		t.Fatalf("starting %s: %v", c.Name, err)
	}
	return inst.ID
}

// latest is the newest instance of the named container.
func (h *harness) latest(t *testing.T, pod *corev1.Pod, name string) container.Status {
	t.Helper()
	ps, _ := h.rt.Status(pod.UID)
	return *ps.Latest(name)
}

// eventually waits for cond, which reads the runtime.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 5s: %s", what)
		}
	}
}

// Containers without a command run their image's entrypoint and default command, for the images
// restartbed knows; off, they run until stopped.
func TestImageCommands(t *testing.T) {
	h, pod := newNetworkHarness(t, true)

	// busybox's default command is sh, which exits at once without input.
	h.start(t, pod, corev1.Container{Name: "busybox", Image: "busybox:1.36"})
	h.waitExit(t, "busybox")
	if s := h.latest(t, pod, "busybox"); s.ExitCode != 0 || s.Reason != container.ReasonCompleted {
		t.Errorf("busybox without a command: %+v, want Completed 0", s)
	}

	// pause sleeps until SIGTERM and exits 0.
	id := h.start(t, pod, corev1.Container{Name: "pause", Image: "registry.k8s.io/pause:3.10"})
	if s := h.latest(t, pod, "pause"); s.State != container.Running {
		t.Fatalf("pause: %+v, want it running", s)
	}
	h.rt.Stop(pod.UID, id, 30*time.Second)
	h.waitExit(t, "pause")
	if s := h.latest(t, pod, "pause"); s.ExitCode != 0 {
		t.Errorf("pause after SIGTERM: %+v, want 0", s)
	}
	if logs := h.rt.Logs(pod.UID, id); logs != "Shutting down, got signal: Terminated\n" {
		t.Errorf("pause said %q", logs)
	}

	// agnhost's default subcommand pauses; SIGTERM ends it with 2 and a termination message.
	id = h.start(t, pod, corev1.Container{Name: "agnhost", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
		TerminationMessagePath: "/dev/termination-log"})
	eventually(t, "agnhost pause says it paused", func() bool { return strings.Contains(h.rt.Logs(pod.UID, id), "Signals registered") })
	h.rt.Stop(pod.UID, id, 30*time.Second)
	h.waitExit(t, "agnhost")
	if s := h.latest(t, pod, "agnhost"); s.ExitCode != 2 || s.Message != "exiting because of signal \"terminated\"\n" {
		t.Errorf("agnhost pause after SIGTERM: exit %d, message %q; want 2 and the signal", s.ExitCode, s.Message)
	}

	// Args alone follow the image's entrypoint.
	h.start(t, pod, corev1.Container{Name: "tester", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53", Args: []string{"entrypoint-tester", "a", "b"}})
	h.waitExit(t, "tester")
	if logs := h.rt.Logs(pod.UID, h.latest(t, pod, "tester").ID); logs != "[/agnhost entrypoint-tester a b]\n" {
		t.Errorf("entrypoint-tester printed %q", logs)
	}
	h.start(t, pod, corev1.Container{Name: "typo", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53", Args: []string{"netexek"}})
	h.waitExit(t, "typo")
	if s := h.latest(t, pod, "typo"); s.ExitCode != 1 {
		t.Errorf("an unknown subcommand: %+v, want exit 1", s)
	}
}

// Off, a container without a command runs until stopped whatever its image (the scenario
// contract); a command can still name a known image's executable.
func TestImageCommandsOff(t *testing.T) {
	h, pod := newNetworkHarness(t, false)
	id := h.start(t, pod, corev1.Container{Name: "busybox", Image: "busybox:1.36"})
	h.rt.Stop(pod.UID, id, time.Second)
	h.waitExit(t, "busybox")
	if s := h.latest(t, pod, "busybox"); s.ExitCode != 143 {
		t.Errorf("busybox without a command, image commands off: %+v, want it to have run until SIGTERM (143)", s)
	}
	id = h.start(t, pod, corev1.Container{Name: "agnhost", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53", Command: []string{"/agnhost", "pause"}})
	eventually(t, "agnhost pause says it paused", func() bool { return strings.Contains(h.rt.Logs(pod.UID, id), "Paused") })
	_, _ = h.rt.Start(pod, &corev1.Container{Name: "elsewhere", Image: "busybox:1.36", Command: []string{"/agnhost", "pause"}}, nil) // a start error, checked below
	if s := h.latest(t, pod, "elsewhere"); s.Reason != container.ReasonStartError || !strings.Contains(s.Message, `"/agnhost": executable file not found`) {
		t.Errorf("agnhost in an image without it: %+v, want a start error", s)
	}
}

// agnhost's servers answer over the pod network: the kubelet's probes and other containers
// reach them.
func TestAgnhostServers(t *testing.T) {
	h, pod := newNetworkHarness(t, true)
	agnhost := "registry.k8s.io/e2e-test-images/agnhost:2.53"
	ctx := context.Background()
	get := func(port int32, path string) int {
		t.Helper()
		code, err := h.rt.HTTPGet(ctx, pod.UID, port, path, nil)
		if err != nil {
			return -1
		}
		return code
	}

	id := h.start(t, pod, corev1.Container{Name: "netexec", Image: agnhost, Args: []string{"netexec", "--http-port=8080"}})
	eventually(t, "netexec serves", func() bool { return get(8080, "/healthz") == 200 })
	if code := get(8080, "/echo?msg=hi&code=418"); code != 418 {
		t.Errorf("/echo?code=418 answered %d", code)
	}
	h.start(t, pod, corev1.Container{Name: "client", Image: "busybox:1.36", Command: []string{"sh", "-c",
		"wget -qO- http://10.64.0.2:8080/hostname; echo; wget -qO- 'http://10.64.0.2:8080/shell?cmd=echo+from+netexec'"}})
	h.waitExit(t, "client")
	if got := h.rt.Logs(pod.UID, h.latest(t, pod, "client").ID); got != "p\n{\"output\":\"from netexec\\n\"}" {
		t.Errorf("a client of netexec read %q", got)
	}
	// SIGTERM: /readyz turns 503, the process exits 0 after --delay-shutdown (0).
	h.rt.Stop(pod.UID, id, 30*time.Second)
	h.waitExit(t, "netexec")
	if s := h.latest(t, pod, "netexec"); s.ExitCode != 0 {
		t.Errorf("netexec after SIGTERM: %+v, want 0", s)
	}

	// liveness: healthy for 10 seconds, then 500.
	h.start(t, pod, corev1.Container{Name: "liveness", Image: agnhost, Args: []string{"liveness"}})
	eventually(t, "liveness serves", func() bool { return get(8080, "/healthz") == 200 })
	h.clock.Step(11 * time.Second)
	if code := get(8080, "/healthz"); code != 500 {
		t.Errorf("liveness /healthz after 11s: %d, want 500", code)
	}

	// nginx serves on 80 behind its entrypoint and exits 0 on SIGTERM.
	id = h.start(t, pod, corev1.Container{Name: "nginx", Image: "nginx:1.27"})
	eventually(t, "nginx serves", func() bool { return get(80, "/") == 200 })
	if code := get(80, "/missing"); code != 404 {
		t.Errorf("nginx /missing: %d, want 404", code)
	}
	h.rt.Stop(pod.UID, id, 30*time.Second)
	h.waitExit(t, "nginx")
	if s := h.latest(t, pod, "nginx"); s.ExitCode != 0 || !strings.Contains(h.rt.Logs(pod.UID, id), "Configuration complete; ready for start up") {
		t.Errorf("nginx after SIGTERM: %+v, log %q", s, h.rt.Logs(pod.UID, id))
	}
}
