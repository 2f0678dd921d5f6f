package podactions

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/fakekubelet/container"
	"github.com/restartbed/restartbed/fakekubelet/release"
	"github.com/restartbed/restartbed/fakekubelet/restart"
	"github.com/restartbed/restartbed/fakekubelet/status"
	"github.com/restartbed/restartbed/internal/podtext"
)

var now = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

const image = "docker.io/library/busybox:1.36"

func runningInst(name, id string, attempt int) container.Status {
	return container.Status{ID: id, Name: name, Attempt: attempt, State: container.Running, StartedAt: now.Add(-time.Minute), Image: image}
}

// fromImage says which image the instance's spec named.
func fromImage(s container.Status, specImage string) container.Status {
	s.SpecImage = specImage
	return s
}

func exitedInst(name, id string, attempt int, code int32) container.Status {
	reason := container.ReasonError
	if code == 0 {
		reason = container.ReasonCompleted
	}
	return container.Status{ID: id, Name: name, Attempt: attempt, State: container.Exited, StartedAt: now.Add(-time.Minute),
		FinishedAt: now.Add(-time.Second), ExitCode: code, Reason: reason, Image: image}
}

// instances lists a ready sandbox's instances, newest first, as the runtime reports them.
func instances(s ...container.Status) *container.PodStatus {
	return &container.PodStatus{UID: "uid-1", IP: "10.64.0.2", SandboxReady: true, Containers: s}
}

func restartAllOn(codes ...int32) []corev1.ContainerRestartRule {
	return []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: codes}}}
}

// triggered is the status groupPod's kubelet publishes when its worker exits 42: the trigger of
// a RestartAllContainers, AllContainersRestarting=True.
func triggered() corev1.PodStatus {
	pod := groupPod()
	rt := instances(exitedInst("worker", "w1", 0, 42), runningInst("helper", "h1", 0), runningInst("agent", "a1", 0), exitedInst("init", "i1", 0, 0))
	return generated(pod, rt, agentStarted)
}

var agentStarted = probeResults{started: map[string]bool{"a1": true}}

// generated is the status the kubelet generated for the pod on rt with the probe results.
func generated(pod *corev1.Pod, rt *container.PodStatus, probes probeResults) corev1.PodStatus {
	return status.Generate(status.Input{Pod: pod, Runtime: rt, Rules: restart.Rules{RestartAll: true}, Probes: probes, Now: now})
}

// withReadySide adds a container with a readiness probe, "side".
func withReadySide(pod *corev1.Pod) *corev1.Pod {
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "side", Image: image,
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}})
	return pod
}

// probeResults are recorded probe results by instance ID.
type probeResults struct {
	started, ready map[string]bool
	failed         map[string]string
}

func (r probeResults) Started(id string) bool { return r.started[id] }
func (r probeResults) Ready(id string) bool   { return r.ready[id] }

// Every instance has its probes' results, as once a worker has seen it.
func (r probeResults) StartupKnown(string) bool   { return true }
func (r probeResults) ReadinessKnown(string) bool { return true }
func (r probeResults) Failed(id string) string {
	return r.failed[id]
}

// heldBack holds back a start after any exited instance of the listed entries, for their delay.
type heldBack map[string]time.Duration

// at is the backoff as the kubelet reads it for the pod's exited instances.
func (h heldBack) at(pod *corev1.Pod, rt *container.PodStatus) map[string]BackoffState {
	if rt == nil {
		return nil
	}
	out := map[string]BackoffState{}
	for _, inst := range rt.Containers {
		c := container.SpecOf(pod, inst.Name)
		if c == nil || inst.State != container.Exited {
			continue
		}
		if delay, ok := h[BackoffKey(c)]; ok {
			out[inst.ID] = BackoffState{Delay: delay, Held: true}
		}
	}
	return out
}

// pods of the table.
func simplePod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyAlways,
		Containers:    []corev1.Container{{Name: "main", Image: image}},
	}}
}

// groupPod is the shape of a JobSet worker with in-place restart: an init container, a sidecar
// agent with a startup probe, a worker whose exit 42 restarts all containers, and a helper.
func groupPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", UID: "uid-1"}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		InitContainers: []corev1.Container{
			{Name: "init", Image: image},
			{Name: "agent", Image: image, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/"}}}},
		},
		Containers: []corev1.Container{
			{Name: "worker", Image: image, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyNever), RestartPolicyRules: restartAllOn(42)},
			{Name: "helper", Image: image, Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}},
		},
	}}
}

// threeInits is a pod with two init containers and a regular one, as upstream's node-reboot
// specs make it.
func threeInits(policy corev1.RestartPolicy) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: "uid-1"}, Spec: corev1.PodSpec{
		RestartPolicy:  policy,
		InitContainers: []corev1.Container{{Name: "init-1", Image: image}, {Name: "init-2", Image: image}},
		Containers:     []corev1.Container{{Name: "main", Image: image}},
	}}
}

// stopped lists the instances of a sandbox that has stopped, newest first.
func stopped(s ...container.Status) *container.PodStatus {
	rt := instances(s...)
	rt.SandboxID, rt.SandboxReady = "sb-1", false
	return rt
}

// twoSidecars is a pod with two sidecars before its one regular container.
func twoSidecars() *corev1.Pod {
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", UID: "uid-1"}, Spec: corev1.PodSpec{
		RestartPolicy:  corev1.RestartPolicyNever,
		InitContainers: []corev1.Container{{Name: "agent", Image: image, RestartPolicy: always}, {Name: "agent2", Image: image, RestartPolicy: always}},
		Containers:     []corev1.Container{{Name: "worker", Image: image}},
	}}
}

func with(pod *corev1.Pod, change func(*corev1.Pod)) *corev1.Pod {
	change(pod)
	return pod
}

func deleted(grace int64) func(*corev1.Pod) {
	return func(pod *corev1.Pod) {
		pod.DeletionTimestamp = &metav1.Time{Time: now.Add(-10 * time.Second)}
		pod.DeletionGracePeriodSeconds = ptr.To(grace)
	}
}

type computeCase struct {
	name     string
	pod      *corev1.Pod
	old      corev1.PodStatus
	rt       *container.PodStatus
	gateOff  bool
	probes   probeResults
	backoff  heldBack
	stopping []string
	// killing lists instances a sync killed (Input.Killing).
	killing []string
	// restarts lists containers whose kill restarts them.
	restarts []string
	// postStart are instances whose postStart hook runs (true) or failed (false).
	postStart map[string]bool
	// phase is the pod's phase when the sync begins (SyncPod when unset), and terminatingFor
	// how long ago it entered TerminatingPod.
	phase          Phase
	terminatingFor time.Duration
	// want is Actions.String() on every release, unless wantOn says otherwise for a minor.
	want   string
	wantOn map[uint]string
	// status checks the planned status on every release: a line of statusLine's.
	status   string
	statusOn map[uint]string
}

// TestCompute is the planner's table, in the manner of upstream's TestComputePodActions and
// TestComputePodActionsForRestartAllContainers: each case runs on every supported release.
func TestCompute(t *testing.T) {
	for _, tc := range []computeCase{
		// The sandbox.
		{name: "a new pod gets a sandbox first", pod: simplePod(), want: "create-sandbox"},
		{name: "a deleted pod that never ran finishes at once", pod: with(simplePod(), deleted(30)), want: "finish-deletion phase=terminated"},
		{name: "a terminal pod that never ran stays as it is", pod: with(simplePod(), func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), want: "phase=terminated"},

		// A sandbox that stopped under the pod (a node's reboot): computePodActions' sandbox change.
		{name: "a stopped sandbox is replaced, the init containers purged", pod: threeInits(corev1.RestartPolicyAlways),
			rt:   stopped(exitedInst("main", "m1", 0, 137), exitedInst("init-2", "i2", 0, 0), exitedInst("init-1", "i1", 0, 0)),
			want: "create-sandbox sandbox-changed remove=i1 remove=i2"},
		{name: "what still runs in a stopped sandbox is killed first", pod: threeInits(corev1.RestartPolicyAlways),
			rt:   stopped(runningInst("main", "m1", 0), exitedInst("init-2", "i2", 0, 0), exitedInst("init-1", "i1", 0, 0)),
			want: "kill=main/m1(30s)"},
		{name: "a pod that would not restart terminates instead of getting a new sandbox", pod: threeInits(corev1.RestartPolicyNever),
			rt:   stopped(exitedInst("main", "m1", 0, 137), exitedInst("init-2", "i2", 0, 0), exitedInst("init-1", "i1", 0, 0)),
			want: "stop-sandbox publish=async(Failed) phase=terminated"},
		{name: "a sandbox that could not be created (a volume not mounted) is no stopped one: the pod waits in ContainerCreating",
			pod: threeInits(corev1.RestartPolicyAlways), rt: &container.PodStatus{UID: "uid-1"},
			want: "publish=async(Pending) start=init-1", status: "main Waiting(PodInitializing) last=- rc=0"},
		{name: "on the new sandbox the first init container starts again", pod: threeInits(corev1.RestartPolicyAlways),
			rt:   instances(exitedInst("main", "m1", 0, 137)),
			want: "publish=async(Pending) start=init-1"},

		// Init containers whose instances were removed (crictl rm, garbage collection).
		{name: "an init container removed after the next one started is not run again", pod: threeInits(corev1.RestartPolicyAlways),
			rt:   instances(runningInst("init-2", "i2", 0)),
			want: "publish=async(Pending)"},
		{name: "init containers removed after the pod initialized are not run again, their statuses kept", pod: threeInits(corev1.RestartPolicyAlways),
			rt: instances(runningInst("main", "m1", 0)),
			old: corev1.PodStatus{Phase: corev1.PodRunning, InitContainerStatuses: []corev1.ContainerStatus{
				{Name: "init-1", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}},
				{Name: "init-2", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}}},
			want: "publish=async(Running)", status: "init-1 Terminated(0,Completed) last=- rc=0"},

		// Starting.
		{name: "a regular container starts", pod: simplePod(), rt: instances(),
			want: "publish=async(Pending) start=main", status: "main Waiting(ContainerCreating) last=- rc=0"},
		{name: "init containers start one at a time", pod: groupPod(), rt: instances(),
			want: "publish=async(Pending) start=init"},
		{name: "a running init container holds the rest back", pod: groupPod(), rt: instances(runningInst("init", "i1", 0)),
			want: "publish=async(Pending)"},
		{name: "the sidecar starts after the init container", pod: groupPod(), rt: instances(exitedInst("init", "i1", 0, 0)),
			want: "publish=async(Pending) start=agent"},
		{name: "regular containers wait for the sidecar's startup probe", pod: groupPod(),
			rt:   instances(runningInst("agent", "a1", 0), exitedInst("init", "i1", 0, 0)),
			want: "publish=async(Pending)", status: "agent Running last=- rc=0 started=false"},
		{name: "a started sidecar lets the regular containers start", pod: groupPod(),
			rt:     instances(runningInst("agent", "a1", 0), exitedInst("init", "i1", 0, 0)),
			probes: probeResults{started: map[string]bool{"a1": true}},
			want:   "publish=async(Pending) start=worker start=helper"},
		{name: "a failed init container under restartPolicy Never fails the pod", pod: groupPod(),
			rt:   instances(exitedInst("init", "i1", 0, 1)),
			want: "stop-sandbox publish=async(Failed) phase=terminated"},
		{name: "a pod failed by an init container after its sidecar keeps its phase until the sidecar has stopped",
			pod: with(groupPod(), func(p *corev1.Pod) {
				p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "init2", Image: image})
				p.Status.Phase = corev1.PodPending
			}),
			rt: instances(exitedInst("init2", "j1", 0, 1), runningInst("agent", "a1", 0), exitedInst("init", "i1", 0, 0)), probes: agentStarted,
			want: "publish=async(Pending) kill=agent/a1(30s) phase=terminating"},

		// Crash-loop backoff.
		{name: "a crashed container restarts when its backoff allows", pod: simplePod(), rt: instances(exitedInst("main", "m1", 0, 1)),
			want: "publish=async(Running) start=main"},
		{name: "a crashed container waits out its backoff", pod: simplePod(), rt: instances(exitedInst("main", "m1", 0, 1)),
			backoff: heldBack{"main@" + image: 20 * time.Second},
			want:    "publish=async(Running) hold=main(CrashLoopBackOff 19s)"},
		{name: "a held-back container shows the remembered reason", pod: simplePod(), rt: instances(exitedInst("main", "m1", 0, 1)),
			backoff: heldBack{"main@" + image: 20 * time.Second},
			old: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "main",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: status.ReasonCrashLoopBackOff}}}}},
			want: "publish=async(Running) hold=main(CrashLoopBackOff 19s)"},

		// Probes.
		{name: "a failed liveness probe kills the instance with the pod's grace", pod: simplePod(), rt: instances(runningInst("main", "m1", 0)),
			probes: probeResults{failed: map[string]string{"m1": "liveness"}},
			want:   "publish=async(Running) kill=main/m1(30s,restart,holds)"},
		{name: "a failed startup probe's own grace wins", rt: instances(runningInst("main", "m1", 0)),
			pod: with(simplePod(), func(p *corev1.Pod) {
				p.Spec.Containers[0].StartupProbe = &corev1.Probe{TerminationGracePeriodSeconds: ptr.To[int64](3)}
			}),
			probes: probeResults{failed: map[string]string{"m1": "startup"}},
			want:   "publish=async(Running) kill=main/m1(3s,restart,holds)"},
		{name: "a probe kill under restartPolicy Never does not restart", rt: instances(runningInst("main", "m1", 0)),
			pod:    with(simplePod(), func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }),
			probes: probeResults{failed: map[string]string{"m1": "liveness"}},
			want:   "publish=async(Running) kill=main/m1(30s,holds)"},
		{name: "a probe kill's restart waits out the backoff of the instance before", pod: simplePod(),
			rt:      instances(runningInst("main", "m2", 1), exitedInst("main", "m1", 0, 1)),
			probes:  probeResults{failed: map[string]string{"m2": "liveness"}},
			backoff: heldBack{"main@" + image: 20 * time.Second},
			want:    "publish=async(Running) kill=main/m2(30s,holds) hold=main(CrashLoopBackOff 19s)"},
		{name: "an instance already stopping is not killed again", pod: simplePod(), rt: instances(runningInst("main", "m1", 0)),
			probes: probeResults{failed: map[string]string{"m1": "liveness"}}, stopping: []string{"m1"},
			want: "publish=async(Running)"},

		{name: "while a sync's kill runs, the pod's syncs wait: another container's failed liveness probe kills nothing yet", rt: instances(runningInst("main", "m1", 0), runningInst("side", "s1", 0)),
			pod: with(simplePod(), func(p *corev1.Pod) {
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Image: image})
			}),
			probes: probeResults{failed: map[string]string{"s1": "liveness"}}, stopping: []string{"m1"}, killing: []string{"m1"},
			want: ""},
		// What the readiness probes find meanwhile the pod worker publishes as the status
		// manager would (status.ApplyProbeResults), not the plan.
		{name: "while a sync's kill runs, a readiness result publishes nothing of the plan", pod: withReadySide(simplePod()),
			old: generated(withReadySide(simplePod()), instances(runningInst("main", "m1", 0), runningInst("side", "s1", 0)), probeResults{}),
			rt:  instances(runningInst("main", "m1", 0), runningInst("side", "s1", 0)), stopping: []string{"m1"}, killing: []string{"m1"},
			probes: probeResults{ready: map[string]bool{"s1": true}},
			want:   ""},
		{name: "a deleted pod does not wait for a sync's kill", pod: with(simplePod(), deleted(30)),
			rt: instances(runningInst("main", "m1", 0)), stopping: []string{"m1"}, killing: []string{"m1"},
			want: "publish=async(Running) phase=terminating"},
		{name: "once a sync's kills have returned, its deferred starts are made together", pod: groupPod(), probes: agentStarted,
			rt:       instances(fromImage(exitedInst("agent", "a1", 0, 137), "busybox:1.35"), exitedInst("init", "i1", 0, 0)),
			restarts: []string{"agent", "worker", "helper"}, killing: []string{"a1"},
			want: "start=agent start=worker start=helper requeue"},

		// A changed definition (an updated image).
		{name: "a regular container whose image changed is killed to restart, whatever the policy",
			pod:  with(simplePod(), func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }),
			rt:   instances(fromImage(runningInst("main", "m1", 0), "busybox:1.35")),
			want: "publish=async(Running) kill=main/m1(30s,restart,holds)"},
		{name: "an instance of the current image is kept", pod: simplePod(), rt: instances(fromImage(runningInst("main", "m1", 0), image)),
			want: "publish=async(Running)"},
		{name: "once stopped, a container its kill restarts starts at once and nothing is published",
			pod:      with(simplePod(), func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }),
			rt:       instances(fromImage(exitedInst("main", "m1", 0, 137), "busybox:1.35")),
			restarts: []string{"main"}, backoff: heldBack{"main@" + image: 20 * time.Second},
			want: "start=main requeue"},
		{name: "a started sidecar whose image changed restarts", pod: groupPod(), probes: agentStarted,
			rt:   instances(fromImage(runningInst("agent", "a1", 0), "busybox:1.35"), exitedInst("init", "i1", 0, 0)),
			want: "publish=async(Pending) kill=agent/a1(30s,restart,holds) defer=worker defer=helper"},
		{name: "a sidecar waiting for its startup probe keeps its old image", pod: groupPod(),
			rt:   instances(fromImage(runningInst("agent", "a1", 0), "busybox:1.35"), exitedInst("init", "i1", 0, 0)),
			want: "publish=async(Pending)"},
		{name: "a running init container is never restarted for its image", pod: groupPod(),
			rt:   instances(fromImage(runningInst("init", "i1", 0), "busybox:1.35")),
			want: "publish=async(Pending)"},

		// postStart hooks.
		{name: "while a postStart hook runs, the pod's sync waits", pod: groupPod(),
			rt: instances(runningInst("agent", "a1", 0), exitedInst("init", "i1", 0, 0)), postStart: map[string]bool{"a1": true},
			probes: agentStarted, want: ""},
		{name: "while a postStart hook runs, a startup probe's success publishes nothing of the plan", pod: groupPod(),
			old:    generated(groupPod(), instances(runningInst("agent", "a1", 0), exitedInst("init", "i1", 0, 0)), probeResults{}),
			rt:     instances(runningInst("worker", "w1", 0), runningInst("agent", "a1", 0), exitedInst("init", "i1", 0, 0)),
			probes: agentStarted, postStart: map[string]bool{"w1": true},
			want: ""},
		{name: "a failed postStart hook kills the instance", pod: simplePod(),
			rt: instances(runningInst("main", "m1", 0)), postStart: map[string]bool{"m1": false},
			want: "publish=async(Running) kill=main/m1(30s,holds)"},

		// RestartAllContainers.
		{name: "the trigger is published and waited for before the first kill", pod: groupPod(),
			rt:     instances(exitedInst("worker", "w1", 0, 42), runningInst("helper", "h1", 0), runningInst("agent", "a1", 0), exitedInst("init", "i1", 0, 0)),
			probes: agentStarted,
			want:   "publish=wait(Running) kill=helper/h1(1s)", status: "AllContainersRestarting=True RestartAllContainersStarted"},
		{name: "the cleanup goes on unpublished: targets first, removed once stopped", pod: groupPod(), old: triggered(),
			rt:   instances(exitedInst("worker", "w1", 0, 42), exitedInst("helper", "h1", 0, 137), runningInst("agent", "a1", 0), exitedInst("init", "i1", 0, 0)),
			want: "remove=h1 remove=i1 kill=agent/a1(1s)"},
		{name: "a stopping target is waited for", pod: groupPod(), old: triggered(), stopping: []string{"a1"},
			rt:   instances(exitedInst("worker", "w1", 0, 42), runningInst("agent", "a1", 0)),
			want: ""},
		{name: "the sources go last, then the pod syncs again", pod: groupPod(), old: triggered(),
			rt:   instances(exitedInst("worker", "w1", 0, 42), exitedInst("agent", "a1", 0, 137), exitedInst("init", "i1", 0, 0)),
			want: "remove=i1 remove=a1 remove=w1 requeue"},
		{name: "the cleaned-up status is waited for, then the init container starts over", pod: groupPod(), old: triggered(),
			rt:     instances(),
			want:   "publish=wait(Running) start=init",
			status: "AllContainersRestarting=False"},
		{name: "with the gate off a RestartAllContainers rule is inert", pod: groupPod(), gateOff: true,
			rt:   instances(exitedInst("worker", "w1", 0, 42), runningInst("helper", "h1", 0), runningInst("agent", "a1", 0), exitedInst("init", "i1", 0, 0)),
			want: "publish=async(Running)"},
		{name: "from 1.36 a restarted container keeps the cleanup's termination as lastState", pod: groupPod(),
			old: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "worker", RestartCount: 1,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: restart.ReasonRestartingAllContainers}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: restart.ReasonRestartingAllContainers}}}}},
			rt:     instances(runningInst("worker", "w2", 0), runningInst("helper", "h2", 0), runningInst("agent", "a2", 0), exitedInst("init", "i2", 0, 0)),
			probes: probeResults{started: map[string]bool{"a2": true}},
			want:   "publish=async(Running)",
			status: "worker Running last=- rc=1",
			statusOn: map[uint]string{36: "worker Running last=Terminated(137,RestartingAllContainers) rc=1",
				37: "worker Running last=Terminated(137,RestartingAllContainers) rc=1"}},

		// Termination: deletion, a terminal status, KillPod.
		{name: "a deleted pod's regular containers stop first, after their preStop hooks", pod: with(groupPod(), deleted(30)),
			probes: agentStarted,
			rt:     instances(runningInst("worker", "w1", 0), runningInst("helper", "h1", 0), runningInst("agent", "a1", 0), exitedInst("init", "i1", 0, 0)),
			want:   "publish=async(Running) kill=worker/w1(30s) kill=helper/h1(30s+preStop) kill=agent/a1(30s,after=w1+h1) phase=terminating"},
		{name: "the grace counts from the start of the termination", pod: with(groupPod(), deleted(30)), phase: TerminatingPod, terminatingFor: 25 * time.Second,
			probes: agentStarted,
			rt:     instances(runningInst("worker", "w1", 0), exitedInst("helper", "h1", 0, 0), runningInst("agent", "a1", 0), exitedInst("init", "i1", 0, 0)),
			want:   "publish=async(Running) kill=worker/w1(5s) kill=agent/a1(5s,after=w1) phase=terminating"},
		{name: "a termination past its grace still gives the least grace", pod: with(groupPod(), deleted(30)), phase: TerminatingPod, terminatingFor: time.Minute,
			probes: agentStarted,
			rt:     instances(runningInst("worker", "w1", 0), exitedInst("helper", "h1", 0, 0), runningInst("agent", "a1", 0), exitedInst("init", "i1", 0, 0)),
			want:   "publish=async(Running) kill=worker/w1(1s) kill=agent/a1(1s,after=w1) phase=terminating"},
		{name: "a sidecar's SIGTERM waits for the sidecars after it", pod: with(twoSidecars(), deleted(30)),
			probes: probeResults{started: map[string]bool{"a1": true, "b1": true}},
			rt:     instances(runningInst("worker", "w1", 0), runningInst("agent", "a1", 0), runningInst("agent2", "b1", 0)),
			want:   "publish=async(Running) kill=worker/w1(30s) kill=agent2/b1(30s,after=w1) kill=agent/a1(30s,after=w1+b1) phase=terminating"},
		{name: "once the regular containers are done, a stopped sidecar is not started again (KillPod)", pod: twoSidecars(),
			probes: probeResults{started: map[string]bool{"b1": true}},
			rt:     instances(exitedInst("worker", "w1", 0, 0), exitedInst("agent", "a1", 0, 137), runningInst("agent2", "b1", 0)),
			want:   "publish=async(Running) kill=agent2/b1(30s)"},
		{name: "the sidecars stop after the regular containers", pod: with(groupPod(), deleted(30)),
			probes: agentStarted,
			rt:     instances(exitedInst("worker", "w1", 0, 0), exitedInst("helper", "h1", 0, 0), runningInst("agent", "a1", 0), exitedInst("init", "i1", 0, 0)),
			want:   "publish=async(Running) kill=agent/a1(30s) phase=terminating"},
		{name: "a stopped deleted pod publishes its final status, waits for it and finishes", pod: with(groupPod(), deleted(30)),
			probes:   agentStarted,
			rt:       instances(exitedInst("worker", "w1", 0, 0), exitedInst("helper", "h1", 0, 0), exitedInst("agent", "a1", 0, 137), exitedInst("init", "i1", 0, 0)),
			want:     "stop-sandbox publish=wait(Succeeded) finish-deletion phase=terminated",
			status:   `PodReadyToStartContainers=False "" ""`,
			statusOn: map[uint]string{37: `PodReadyToStartContainers=False "PodSandboxNotReady" "pod sandbox is not ready"`}},
		{name: "a pod whose regular containers completed stops its sidecar (KillPod); the next status is terminal", pod: groupPod(),
			probes: agentStarted,
			rt:     instances(exitedInst("worker", "w1", 0, 0), exitedInst("helper", "h1", 0, 0), runningInst("agent", "a1", 0), exitedInst("init", "i1", 0, 0)),
			want:   "publish=async(Running) kill=agent/a1(30s)"},
		{name: "a completed pod with nothing running stops its sandbox", pod: with(simplePod(), func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }),
			rt:   instances(exitedInst("main", "m1", 0, 0)),
			want: "stop-sandbox publish=async(Succeeded) phase=terminated"},

		// Phases (phase.go): a pod only moves forward.
		{name: "a phase turned terminal in the API terminates the pod", rt: instances(runningInst("main", "m1", 0)),
			pod:  with(simplePod(), func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
			want: "publish=async(Failed) kill=main/m1(30s) phase=terminating"},
		{name: "a terminal status the kubelet generated before terminates the pod before the API has it", rt: instances(runningInst("main", "m1", 0)),
			pod: with(simplePod(), func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }), old: corev1.PodStatus{Phase: corev1.PodSucceeded},
			want: "publish=async(Running) kill=main/m1(30s) phase=terminating"},
		{name: "a terminating pod stays terminating: an exited container is not started again", phase: TerminatingPod,
			pod: with(simplePod(), func(p *corev1.Pod) {
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Image: image})
			}),
			rt:   instances(exitedInst("main", "m1", 0, 1), runningInst("side", "s1", 0)),
			want: "publish=async(Running) kill=side/s1(30s) phase=terminating"},
		{name: "a terminating pod that is not deleted waits for a postStart hook under way", phase: TerminatingPod,
			pod: with(simplePod(), func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
			rt:  instances(runningInst("main", "m1", 0)), postStart: map[string]bool{"m1": true},
			want: "phase=terminating"},
		{name: "a deleted pod does not wait for a postStart hook", phase: TerminatingPod, pod: with(simplePod(), deleted(30)),
			rt: instances(runningInst("main", "m1", 0)), postStart: map[string]bool{"m1": true},
			want: "publish=async(Running) kill=main/m1(30s) phase=terminating"},
		{name: "a terminated pod publishes its final status and starts nothing, whatever its restart policy", phase: TerminatedPod,
			pod: simplePod(), rt: &container.PodStatus{UID: "uid-1", IP: "10.64.0.2", Containers: []container.Status{exitedInst("main", "m1", 0, 1)}},
			want: "publish=async(Failed) phase=terminated", status: "main Terminated(1,Error) last=- rc=0"},
		{name: "a terminated pod once deleted waits its final status into the API and finishes", phase: TerminatedPod,
			pod:  with(simplePod(), deleted(30)),
			rt:   &container.PodStatus{UID: "uid-1", IP: "10.64.0.2", Containers: []container.Status{exitedInst("main", "m1", 0, 0)}},
			want: "publish=wait(Succeeded) finish-deletion phase=terminated"},
	} {
		for minor := uint(release.OldestMinor); minor <= release.NewestMinor; minor++ {
			t.Run(fmt.Sprintf("%s/1.%d", tc.name, minor), func(t *testing.T) { tc.run(t, minor) })
		}
	}
}

func (tc computeCase) run(t *testing.T, minor uint) {
	stopping := map[string]bool{}
	for _, id := range tc.stopping {
		stopping[id] = true
	}
	killing := map[string]bool{}
	for _, id := range tc.killing {
		killing[id] = true
	}
	restarts := map[string]Restart{}
	for _, name := range tc.restarts {
		restarts[name] = Restart{}
	}
	in := Input{Phase: tc.phase, Restarts: restarts, PostStart: tc.postStart, Pod: tc.pod.DeepCopy(), Old: tc.old, Runtime: tc.rt, HostIP: "172.16.0.1", Rules: restart.Rules{RestartAll: !tc.gateOff},
		Release: release.Minor(minor), Probes: tc.probes, Backoff: tc.backoff.at(tc.pod, tc.rt), Stopping: stopping, Killing: killing, MinGrace: time.Second, Now: now}
	if tc.old.Phase == "" && tc.old.Conditions == nil && tc.old.ContainerStatuses == nil {
		in.Old = *tc.pod.Status.DeepCopy()
	}
	if tc.terminatingFor > 0 {
		in.TerminatingAt = now.Add(-tc.terminatingFor)
	}
	got := Plan(&in)
	// The pod worker's step after the plan: the final status once the sandbox has stopped.
	if got.StopSandbox {
		stopped := *in.Runtime
		stopped.SandboxReady = false
		got.Status = GenerateStatus(in, &stopped, true)
	}
	want := tc.want
	if w, ok := tc.wantOn[minor]; ok {
		want = w
	}
	if s := got.String(); s != want {
		t.Errorf("actions:\n got %s\nwant %s", s, want)
	}
	wantStatus := tc.status
	if w, ok := tc.statusOn[minor]; ok {
		wantStatus = w
	}
	if wantStatus != "" && !strings.Contains(statusLines(got.Status), wantStatus) {
		t.Errorf("status has no line with %q:\n%s", wantStatus, statusLines(got.Status))
	}
}

// statusLines renders the parts of a status the table checks, one line per condition and
// container.
func statusLines(s corev1.PodStatus) string {
	var b strings.Builder
	for _, c := range s.Conditions {
		fmt.Fprintf(&b, "%s=%s %q %q\n", c.Type, c.Status, c.Reason, c.Message)
		if c.Reason != "" {
			fmt.Fprintf(&b, "%s=%s %s\n", c.Type, c.Status, c.Reason)
		}
	}
	for _, list := range [][]corev1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
		for _, c := range list {
			fmt.Fprintf(&b, "%s %s last=%s rc=%d started=%t ready=%t\n", c.Name, podtext.State(c.State), podtext.State(c.LastTerminationState),
				c.RestartCount, ptr.Deref(c.Started, false), c.Ready)
		}
	}
	return b.String()
}
