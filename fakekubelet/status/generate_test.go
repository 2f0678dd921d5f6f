package status

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/fakekubelet/container"
	"github.com/restartbed/restartbed/fakekubelet/release"
	"github.com/restartbed/restartbed/fakekubelet/restart"
	"github.com/restartbed/restartbed/internal/podtext"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func running(name string, attempt int, id string) container.Status {
	return container.Status{ID: id, Name: name, Attempt: attempt, State: container.Running, StartedAt: t0, Image: "docker.io/library/busybox:1.36"}
}

func exited(name string, attempt int, code int32, id string) container.Status {
	reason := container.ReasonError
	if code == 0 {
		reason = container.ReasonCompleted
	}
	return container.Status{ID: id, Name: name, Attempt: attempt, State: container.Exited, StartedAt: t0, FinishedAt: t0,
		ExitCode: code, Reason: reason, Image: "docker.io/library/busybox:1.36"}
}

// newest lists instances newest first, as the runtime reports them.
func newest(s ...container.Status) *container.PodStatus {
	return &container.PodStatus{UID: "uid-1", IP: "10.64.0.2", SandboxReady: true, Containers: s}
}

func rac(codes ...int32) []corev1.ContainerRestartRule {
	return []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: codes}}}
}

// summary renders what docs/reference/kubelet.md's sequences talk about, one line per item.
func summary(s corev1.PodStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s\n", s.Phase)
	for _, c := range s.Conditions {
		fmt.Fprintf(&b, "%s=%s %q %q\n", c.Type, c.Status, c.Reason, c.Message)
	}
	for _, list := range [][]corev1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
		for _, c := range list {
			fmt.Fprintf(&b, "%s %s last=%s rc=%d ready=%t started=%t id=%s\n", c.Name, podtext.State(c.State), podtext.State(c.LastTerminationState),
				c.RestartCount, c.Ready, ptr.Deref(c.Started, false), strings.TrimPrefix(c.ContainerID, "containerd://"))
		}
	}
	return b.String()
}

type step struct {
	name string
	rt   *container.PodStatus
	want string
}

// differs says that from a release on, old reads new wherever it occurs in the wants of the
// steps named.
type differs struct {
	from     uint
	steps    []string
	old, new string
}

// carriesLastState is how 1.36 differs after a RestartAllContainers (release.Kubelet.
// CarriesLastStateAcrossRestartAll): a container that restarted with the group shows the
// cleanup's termination as its last state, where 1.35 shows none.
func carriesLastState(restarts int, steps ...string) differs {
	return differs{from: 36, steps: steps, old: fmt.Sprintf("last=- rc=%d ", restarts),
		new: fmt.Sprintf("last=Terminated(137,RestartingAllContainers) rc=%d ", restarts)}
}

// run generates each step's status from the previous one, as the kubelet does, on every
// supported release.
func run(t *testing.T, pod *corev1.Pod, steps []step, on ...differs) {
	t.Helper()
	for minor := uint(release.OldestMinor); minor <= release.NewestMinor; minor++ {
		rel := release.Minor(minor)
		t.Run(rel.String(), func(t *testing.T) {
			pod := pod.DeepCopy()
			old := corev1.PodStatus{}
			for _, s := range steps {
				got := Generate(Input{Pod: pod, Old: old, Runtime: s.rt, Rules: restart.Rules{RestartAll: true}, Release: rel, Now: t0, HostIP: "172.16.0.1"})
				want := s.want
				for _, d := range on {
					if minor >= d.from && slices.Contains(d.steps, s.name) {
						if !strings.Contains(want, d.old) {
							t.Fatalf("step %s has no %q to differ on 1.%d", s.name, d.old, minor)
						}
						want = strings.ReplaceAll(want, d.old, d.new)
					}
				}
				if diff := cmp.Diff(strings.TrimSpace(want), strings.TrimSpace(summary(got))); diff != "" {
					t.Fatalf("step %s (-want +got):\n%s", s.name, diff)
				}
				old = got
				pod.Status = got // the API follows the kubelet
			}
		})
	}
}

// TestSequenceA replays sequence A (docs/reference/kubelet.md, "Status sequences").
func TestSequenceA(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox:1.36"},
			{Name: "sidecar", Image: "busybox:1.36", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
		Containers: []corev1.Container{
			{Name: "source-container", Image: "busybox:1.36", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyNever), RestartPolicyRules: rac(42)},
			{Name: "regular", Image: "busybox:1.36"}},
	}}
	run(t, pod, []step{
		{"S0", newest(), `
phase Pending
PodReadyToStartContainers=True "" ""
Initialized=False "ContainersNotInitialized" "containers with incomplete status: [init sidecar]"
Ready=False "ContainersNotReady" "containers with unready status: [sidecar source-container regular]"
ContainersReady=False "ContainersNotReady" "containers with unready status: [sidecar source-container regular]"
PodScheduled=True "" ""
AllContainersRestarting=False "" ""
init Waiting(PodInitializing) last=- rc=0 ready=false started=false id=
sidecar Waiting(PodInitializing) last=- rc=0 ready=false started=false id=
regular Waiting(PodInitializing) last=- rc=0 ready=false started=false id=
source-container Waiting(PodInitializing) last=- rc=0 ready=false started=false id=`},
		{"S1", newest(running("init", 0, "i1")), `
phase Pending
PodReadyToStartContainers=True "" ""
Initialized=False "ContainersNotInitialized" "containers with incomplete status: [init sidecar]"
Ready=False "ContainersNotReady" "containers with unready status: [sidecar source-container regular]"
ContainersReady=False "ContainersNotReady" "containers with unready status: [sidecar source-container regular]"
PodScheduled=True "" ""
AllContainersRestarting=False "" ""
init Running last=- rc=0 ready=false started=true id=i1
sidecar Waiting(PodInitializing) last=- rc=0 ready=false started=false id=
regular Waiting(PodInitializing) last=- rc=0 ready=false started=false id=
source-container Waiting(PodInitializing) last=- rc=0 ready=false started=false id=`},
		{"S2", newest(running("sidecar", 0, "s1"), exited("init", 0, 0, "i1")), `
phase Pending
PodReadyToStartContainers=True "" ""
Initialized=True "" ""
Ready=False "ContainersNotReady" "containers with unready status: [source-container regular]"
ContainersReady=False "ContainersNotReady" "containers with unready status: [source-container regular]"
PodScheduled=True "" ""
AllContainersRestarting=False "" ""
init Terminated(0,Completed) last=- rc=0 ready=true started=false id=i1
sidecar Running last=- rc=0 ready=true started=true id=s1
regular Waiting(PodInitializing) last=- rc=0 ready=false started=false id=
source-container Waiting(PodInitializing) last=- rc=0 ready=false started=false id=`},
		{"S3", newest(running("regular", 0, "r1"), running("source-container", 0, "c1"), running("sidecar", 0, "s1"), exited("init", 0, 0, "i1")), `
phase Running
PodReadyToStartContainers=True "" ""
Initialized=True "" ""
Ready=True "" ""
ContainersReady=True "" ""
PodScheduled=True "" ""
AllContainersRestarting=False "" ""
init Terminated(0,Completed) last=- rc=0 ready=true started=false id=i1
sidecar Running last=- rc=0 ready=true started=true id=s1
regular Running last=- rc=0 ready=true started=true id=r1
source-container Running last=- rc=0 ready=true started=true id=c1`},
		{"S4 source exits 42", newest(running("regular", 0, "r1"), exited("source-container", 0, 42, "c1"), running("sidecar", 0, "s1"), exited("init", 0, 0, "i1")), `
phase Running
PodReadyToStartContainers=True "" ""
Initialized=True "" ""
Ready=False "ContainersNotReady" "containers with unready status: [source-container]"
ContainersReady=False "ContainersNotReady" "containers with unready status: [source-container]"
PodScheduled=True "" ""
AllContainersRestarting=True "RestartAllContainersStarted" "container exited with restart policy rule"
init Terminated(0,Completed) last=- rc=0 ready=true started=false id=i1
sidecar Running last=- rc=0 ready=true started=true id=s1
regular Running last=- rc=0 ready=true started=true id=r1
source-container Terminated(42,Error) last=- rc=0 ready=false started=false id=c1`},
		{"S5 cleaned up", newest(), `
phase Running
PodReadyToStartContainers=True "" ""
Initialized=True "" ""
Ready=False "ContainersNotReady" "containers with unready status: [sidecar source-container regular]"
ContainersReady=False "ContainersNotReady" "containers with unready status: [sidecar source-container regular]"
PodScheduled=True "" ""
AllContainersRestarting=False "" ""
init Waiting(RestartingAllContainers) last=Terminated(137,RestartingAllContainers) rc=1 ready=true started=false id=i1
sidecar Waiting(RestartingAllContainers) last=Terminated(137,RestartingAllContainers) rc=1 ready=false started=false id=
regular Waiting(RestartingAllContainers) last=Terminated(137,RestartingAllContainers) rc=1 ready=false started=false id=
source-container Waiting(RestartingAllContainers) last=Terminated(137,RestartingAllContainers) rc=1 ready=false started=false id=c1`},
		{"S6 init again", newest(running("init", 0, "i2")), `
phase Pending
PodReadyToStartContainers=True "" ""
Initialized=True "" ""
Ready=False "ContainersNotReady" "containers with unready status: [sidecar source-container regular]"
ContainersReady=False "ContainersNotReady" "containers with unready status: [sidecar source-container regular]"
PodScheduled=True "" ""
AllContainersRestarting=False "" ""
init Running last=- rc=1 ready=false started=true id=i2
sidecar Waiting(PodInitializing) last=Terminated(137,RestartingAllContainers) rc=1 ready=false started=false id=
regular Waiting(PodInitializing) last=Terminated(137,RestartingAllContainers) rc=1 ready=false started=false id=
source-container Waiting(PodInitializing) last=Terminated(137,RestartingAllContainers) rc=1 ready=false started=false id=`},
		// getPhase gives Running once the sidecar has started and no regular init container is
		// pending: the waiting containers' last state is the cleanup's, which counts as restartable.
		{"S7 sidecar again", newest(running("sidecar", 0, "s2"), exited("init", 0, 0, "i2")), `
phase Running
PodReadyToStartContainers=True "" ""
Initialized=True "" ""
Ready=False "ContainersNotReady" "containers with unready status: [source-container regular]"
ContainersReady=False "ContainersNotReady" "containers with unready status: [source-container regular]"
PodScheduled=True "" ""
AllContainersRestarting=False "" ""
init Terminated(0,Completed) last=- rc=1 ready=true started=false id=i2
sidecar Running last=- rc=1 ready=true started=true id=s2
regular Waiting(PodInitializing) last=Terminated(137,RestartingAllContainers) rc=1 ready=false started=false id=
source-container Waiting(PodInitializing) last=Terminated(137,RestartingAllContainers) rc=1 ready=false started=false id=`},
		{"S8 all running", newest(running("regular", 0, "r2"), running("source-container", 0, "c2"), running("sidecar", 0, "s2"), exited("init", 0, 0, "i2")), `
phase Running
PodReadyToStartContainers=True "" ""
Initialized=True "" ""
Ready=True "" ""
ContainersReady=True "" ""
PodScheduled=True "" ""
AllContainersRestarting=False "" ""
init Terminated(0,Completed) last=- rc=1 ready=true started=false id=i2
sidecar Running last=- rc=1 ready=true started=true id=s2
regular Running last=- rc=1 ready=true started=true id=r2
source-container Running last=- rc=1 ready=true started=true id=c2`},
		{"S9 regular exits 1", newest(exited("regular", 0, 1, "r2"), running("source-container", 0, "c2"), running("sidecar", 0, "s2"), exited("init", 0, 0, "i2")), `
phase Running
PodReadyToStartContainers=True "" ""
Initialized=True "" ""
Ready=False "ContainersNotReady" "containers with unready status: [regular]"
ContainersReady=False "ContainersNotReady" "containers with unready status: [regular]"
PodScheduled=True "" ""
AllContainersRestarting=False "" ""
init Terminated(0,Completed) last=- rc=1 ready=true started=false id=i2
sidecar Running last=- rc=1 ready=true started=true id=s2
regular Terminated(1,Error) last=- rc=1 ready=false started=false id=r2
source-container Running last=- rc=1 ready=true started=true id=c2`},
		{"S10 source exits 42", newest(exited("regular", 0, 1, "r2"), exited("source-container", 0, 42, "c2"), running("sidecar", 0, "s2"), exited("init", 0, 0, "i2")), `
phase Running
PodReadyToStartContainers=True "" ""
Initialized=True "" ""
Ready=False "ContainersNotReady" "containers with unready status: [source-container regular]"
ContainersReady=False "ContainersNotReady" "containers with unready status: [source-container regular]"
PodScheduled=True "" ""
AllContainersRestarting=True "RestartAllContainersStarted" "container exited with restart policy rule"
init Terminated(0,Completed) last=- rc=1 ready=true started=false id=i2
sidecar Running last=- rc=1 ready=true started=true id=s2
regular Terminated(1,Error) last=- rc=1 ready=false started=false id=r2
source-container Terminated(42,Error) last=- rc=1 ready=false started=false id=c2`},
		{"S11 cleaned, regular revived", newest(), `
phase Running
PodReadyToStartContainers=True "" ""
Initialized=True "" ""
Ready=False "ContainersNotReady" "containers with unready status: [sidecar source-container regular]"
ContainersReady=False "ContainersNotReady" "containers with unready status: [sidecar source-container regular]"
PodScheduled=True "" ""
AllContainersRestarting=False "" ""
init Waiting(RestartingAllContainers) last=Terminated(137,RestartingAllContainers) rc=2 ready=true started=false id=i2
sidecar Waiting(RestartingAllContainers) last=Terminated(137,RestartingAllContainers) rc=2 ready=false started=false id=
regular Waiting(RestartingAllContainers) last=Terminated(137,RestartingAllContainers) rc=2 ready=false started=false id=r2
source-container Waiting(RestartingAllContainers) last=Terminated(137,RestartingAllContainers) rc=2 ready=false started=false id=c2`},
		{"S12 init again", newest(running("init", 0, "i3")), `
phase Pending
PodReadyToStartContainers=True "" ""
Initialized=True "" ""
Ready=False "ContainersNotReady" "containers with unready status: [sidecar source-container regular]"
ContainersReady=False "ContainersNotReady" "containers with unready status: [sidecar source-container regular]"
PodScheduled=True "" ""
AllContainersRestarting=False "" ""
init Running last=- rc=2 ready=false started=true id=i3
sidecar Waiting(PodInitializing) last=Terminated(137,RestartingAllContainers) rc=2 ready=false started=false id=
regular Waiting(PodInitializing) last=Terminated(137,RestartingAllContainers) rc=2 ready=false started=false id=
source-container Waiting(PodInitializing) last=Terminated(137,RestartingAllContainers) rc=2 ready=false started=false id=`},
		{"S13 init fails", newest(exited("init", 0, 1, "i3")), `
phase Failed
PodReadyToStartContainers=True "" ""
Initialized=True "" ""
Ready=False "PodFailed" ""
ContainersReady=False "PodFailed" ""
PodScheduled=True "" ""
AllContainersRestarting=False "PodFailed" ""
init Terminated(1,Error) last=- rc=2 ready=false started=false id=i3
sidecar Waiting(PodInitializing) last=Terminated(137,RestartingAllContainers) rc=2 ready=false started=false id=
regular Waiting(PodInitializing) last=Terminated(137,RestartingAllContainers) rc=2 ready=false started=false id=
source-container Waiting(PodInitializing) last=Terminated(137,RestartingAllContainers) rc=2 ready=false started=false id=`},
	}, carriesLastState(1, "S6 init again", "S7 sidecar again", "S8 all running", "S9 regular exits 1", "S10 source exits 42"),
		carriesLastState(2, "S12 init again", "S13 init fails"))
}

type backoffReasons map[string]Waiting

// TestIndividualRestart replays an individual restart (docs/reference/kubelet.md, "Status sequences").
func TestIndividualRestart(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "main", Image: "busybox:1.36", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyNever),
			RestartPolicyRules: []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart,
				ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}}},
	}}
	backoff := backoffReasons{"main": {Reason: ReasonCrashLoopBackOff, Message: "back-off 10s restarting failed container=main pod=p_ns(uid-1)"}}
	old := corev1.PodStatus{}
	for _, s := range []struct {
		name    string
		rt      *container.PodStatus
		reasons backoffReasons
		want    string
	}{
		{"I1", newest(running("main", 0, "m1")), nil, "phase Running\nmain Running last=- rc=0 ready=true started=true id=m1"},
		{"I2", newest(exited("main", 0, 42, "m1")), nil, "phase Running\nmain Terminated(42,Error) last=- rc=0 ready=false started=false id=m1"},
		{"I3", newest(exited("main", 0, 42, "m1")), backoff, "phase Running\nmain Waiting(CrashLoopBackOff) last=Terminated(42,Error) rc=0 ready=false started=false id=m1"},
		{"I4", newest(running("main", 1, "m2"), exited("main", 0, 42, "m1")), nil, "phase Running\nmain Running last=Terminated(42,Error) rc=1 ready=true started=true id=m2"},
		{"I5", newest(exited("main", 1, 1, "m2"), exited("main", 0, 42, "m1")), nil, "phase Failed\nmain Terminated(1,Error) last=Terminated(42,Error) rc=1 ready=false started=false id=m2"},
	} {
		got := Generate(Input{Pod: pod, Old: old, Runtime: s.rt, Rules: restart.Rules{RestartAll: true}, Now: t0, Reasons: s.reasons})
		var lines []string
		for _, l := range strings.Split(summary(got), "\n") {
			if strings.HasPrefix(l, "phase") || strings.HasPrefix(l, "main") {
				lines = append(lines, l)
			}
		}
		if diff := cmp.Diff(s.want, strings.Join(lines, "\n")); diff != "" {
			t.Fatalf("step %s (-want +got):\n%s", s.name, diff)
		}
		if s.name == "I3" && got.ContainerStatuses[0].State.Waiting.Message != backoff["main"].Message {
			t.Errorf("I3 waiting message %q", got.ContainerStatuses[0].State.Waiting.Message)
		}
		if s.name == "I5" {
			for _, c := range got.Conditions {
				if (c.Type == corev1.PodReady || c.Type == corev1.ContainersReady) && (c.Status != corev1.ConditionFalse || c.Reason != ReasonPodFailed) {
					t.Errorf("I5 %s = %s/%s, want False/PodFailed", c.Type, c.Status, c.Reason)
				}
			}
		}
		old = got
		pod.Status = got
	}
}

func TestTransitionTimesAndStartTimeStay(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	first := Generate(Input{Pod: pod, Runtime: newest(running("c", 0, "c1")), Now: t0})
	later := Generate(Input{Pod: pod, Old: first, Runtime: newest(running("c", 0, "c1")), Now: t0.Add(time.Hour)})
	if diff := cmp.Diff(first.Conditions, later.Conditions); diff != "" {
		t.Errorf("unchanged conditions changed (-first +later):\n%s", diff)
	}
	if !later.StartTime.Equal(first.StartTime) {
		t.Errorf("startTime moved from %v to %v", first.StartTime, later.StartTime)
	}
	exitedLater := Generate(Input{Pod: pod, Old: later, Runtime: newest(exited("c", 0, 1, "c1")), Now: t0.Add(2 * time.Hour)})
	for _, c := range exitedLater.Conditions {
		if c.Type == corev1.PodReady && !c.LastTransitionTime.Equal(ptr.To(metav1.NewTime(t0.Add(2*time.Hour)))) {
			t.Errorf("Ready changed status but kept transition time %v", c.LastTransitionTime)
		}
	}
}

// TestSequenceB replays sequence B: an init container is the source.
func TestSequenceB(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		InitContainers: []corev1.Container{
			{Name: "sidecar", Image: "busybox:1.36", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
			{Name: "init", Image: "busybox:1.36"},
			{Name: "source-init", Image: "busybox:1.36", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyNever), RestartPolicyRules: rac(42)}},
		Containers: []corev1.Container{{Name: "regular", Image: "busybox:1.36"}},
	}}
	run(t, pod, []step{
		{"N1", newest(running("source-init", 0, "x1"), exited("init", 0, 0, "i1"), running("sidecar", 0, "s1")), `
phase Pending
PodReadyToStartContainers=True "" ""
Initialized=False "ContainersNotInitialized" "containers with incomplete status: [source-init]"
Ready=False "ContainersNotReady" "containers with unready status: [regular]"
ContainersReady=False "ContainersNotReady" "containers with unready status: [regular]"
PodScheduled=True "" ""
AllContainersRestarting=False "" ""
sidecar Running last=- rc=0 ready=true started=true id=s1
init Terminated(0,Completed) last=- rc=0 ready=true started=false id=i1
source-init Running last=- rc=0 ready=false started=true id=x1
regular Waiting(PodInitializing) last=- rc=0 ready=false started=false id=`},
		{"N2 source-init exits 42", newest(exited("source-init", 0, 42, "x1"), exited("init", 0, 0, "i1"), running("sidecar", 0, "s1")), `
phase Pending
PodReadyToStartContainers=True "" ""
Initialized=False "ContainersNotInitialized" "containers with incomplete status: [source-init]"
Ready=False "ContainersNotReady" "containers with unready status: [regular]"
ContainersReady=False "ContainersNotReady" "containers with unready status: [regular]"
PodScheduled=True "" ""
AllContainersRestarting=True "RestartAllContainersStarted" "container exited with restart policy rule"
sidecar Running last=- rc=0 ready=true started=true id=s1
init Terminated(0,Completed) last=- rc=0 ready=true started=false id=i1
source-init Terminated(42,Error) last=- rc=0 ready=false started=false id=x1
regular Waiting(PodInitializing) last=- rc=0 ready=false started=false id=`},
		{"N3 cleaned", newest(), `
phase Pending
PodReadyToStartContainers=True "" ""
Initialized=False "ContainersNotInitialized" "containers with incomplete status: [sidecar source-init]"
Ready=False "ContainersNotReady" "containers with unready status: [sidecar regular]"
ContainersReady=False "ContainersNotReady" "containers with unready status: [sidecar regular]"
PodScheduled=True "" ""
AllContainersRestarting=False "" ""
sidecar Waiting(RestartingAllContainers) last=Terminated(137,RestartingAllContainers) rc=1 ready=false started=false id=
init Waiting(RestartingAllContainers) last=Terminated(137,RestartingAllContainers) rc=1 ready=true started=false id=i1
source-init Waiting(RestartingAllContainers) last=Terminated(137,RestartingAllContainers) rc=1 ready=false started=false id=x1
regular Waiting(PodInitializing) last=- rc=0 ready=false started=false id=`},
		{"N6 all running again", newest(running("regular", 0, "r1"), exited("source-init", 0, 0, "x2"), exited("init", 0, 0, "i2"), running("sidecar", 0, "s2")), `
phase Running
PodReadyToStartContainers=True "" ""
Initialized=True "" ""
Ready=True "" ""
ContainersReady=True "" ""
PodScheduled=True "" ""
AllContainersRestarting=False "" ""
sidecar Running last=- rc=1 ready=true started=true id=s2
init Terminated(0,Completed) last=- rc=1 ready=true started=false id=i2
source-init Terminated(0,Completed) last=- rc=1 ready=true started=false id=x2
regular Running last=- rc=0 ready=true started=true id=r1`},
	}, carriesLastState(1, "N6 all running again"))
}

// TestSequenceC replays sequence C and the lagging restart count: a source that had restarted on its
// own, and a crash-loop restart after the group restart that does not raise the API count. From
// 1.36 the restarted containers keep the cleanup's termination as their lastState until a
// previous instance replaces it (release.Kubelet.CarriesLastStateAcrossRestartAll).
func TestSequenceC(t *testing.T) {
	backoff := backoffReasons{"source-container": {Reason: ReasonCrashLoopBackOff, Message: "back-off 10s restarting failed container=source-container pod=p_ns(uid-1)"}}
	steps := []struct {
		name    string
		rt      *container.PodStatus
		reasons backoffReasons
		want    string
		// from136 is the 1.36 and 1.37 lines where they differ.
		from136 string
	}{
		{"P1", newest(running("regular", 0, "r1"), running("source-container", 0, "c1")), nil,
			"regular Running last=- rc=0\nsource-container Running last=- rc=0", ""},
		{"P2 exit 1", newest(running("regular", 0, "r1"), exited("source-container", 0, 1, "c1")), nil,
			"regular Running last=- rc=0\nsource-container Terminated(1,Error) last=- rc=0", ""},
		{"P3 restarted", newest(running("source-container", 1, "c2"), running("regular", 0, "r1"), exited("source-container", 0, 1, "c1")), nil,
			"regular Running last=- rc=0\nsource-container Running last=Terminated(1,Error) rc=1", ""},
		{"P4 exit 42", newest(exited("source-container", 1, 42, "c2"), running("regular", 0, "r1"), exited("source-container", 0, 1, "c1")), nil,
			"regular Running last=- rc=0\nsource-container Terminated(42,Error) last=Terminated(1,Error) rc=1", ""},
		{"P5 cleaned", newest(), nil,
			"regular Waiting(RestartingAllContainers) last=Terminated(137,RestartingAllContainers) rc=1\nsource-container Waiting(RestartingAllContainers) last=Terminated(137,RestartingAllContainers) rc=2", ""},
		{"P6 running", newest(running("regular", 0, "r2"), running("source-container", 0, "c3")), nil,
			"regular Running last=- rc=1\nsource-container Running last=- rc=2",
			"regular Running last=Terminated(137,RestartingAllContainers) rc=1\nsource-container Running last=Terminated(137,RestartingAllContainers) rc=2"},
		{"P7 exit 1", newest(running("regular", 0, "r2"), exited("source-container", 0, 1, "c3")), nil,
			"regular Running last=- rc=1\nsource-container Terminated(1,Error) last=- rc=2",
			"regular Running last=Terminated(137,RestartingAllContainers) rc=1\nsource-container Terminated(1,Error) last=Terminated(137,RestartingAllContainers) rc=2"},
		{"P8 backoff", newest(running("regular", 0, "r2"), exited("source-container", 0, 1, "c3")), backoff,
			"regular Running last=- rc=1\nsource-container Waiting(CrashLoopBackOff) last=Terminated(1,Error) rc=2",
			"regular Running last=Terminated(137,RestartingAllContainers) rc=1\nsource-container Waiting(CrashLoopBackOff) last=Terminated(1,Error) rc=2"},
		{"P9 restarted, count unchanged (Q6)", newest(running("source-container", 1, "c4"), running("regular", 0, "r2"), exited("source-container", 0, 1, "c3")), nil,
			"regular Running last=- rc=1\nsource-container Running last=Terminated(1,Error) rc=2",
			"regular Running last=Terminated(137,RestartingAllContainers) rc=1\nsource-container Running last=Terminated(1,Error) rc=2"},
	}
	for minor := uint(release.OldestMinor); minor <= release.NewestMinor; minor++ {
		rel := release.Minor(minor)
		t.Run(rel.String(), func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"}, Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyAlways,
				Containers: []corev1.Container{
					{Name: "source-container", Image: "busybox:1.36", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), RestartPolicyRules: rac(42)},
					{Name: "regular", Image: "busybox:1.36"}},
			}}
			old := corev1.PodStatus{}
			for _, s := range steps {
				got := Generate(Input{Pod: pod, Old: old, Runtime: s.rt, Rules: restart.Rules{RestartAll: true}, Release: rel, Now: t0, Reasons: s.reasons})
				var lines []string
				for _, c := range got.ContainerStatuses {
					lines = append(lines, fmt.Sprintf("%s %s rc=%d", c.Name, strings.Fields(summaryLine(c))[0]+" "+strings.Fields(summaryLine(c))[1], c.RestartCount))
				}
				want := s.want
				if minor >= 36 && s.from136 != "" {
					want = s.from136
				}
				if diff := cmp.Diff(want, strings.Join(lines, "\n")); diff != "" {
					t.Fatalf("step %s (-want +got):\n%s", s.name, diff)
				}
				if got.Phase != corev1.PodRunning {
					t.Fatalf("step %s: phase %s, want Running", s.name, got.Phase)
				}
				old = got
				pod.Status = got
			}
		})
	}
}

// TestReadyToStartContainersExplainsFrom137: from 1.37 a False PodReadyToStartContainers says
// why (release.Kubelet.ExplainsSandboxNotReady).
func TestReadyToStartContainersExplainsFrom137(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "main", Image: "busybox:1.36"}}}}
	stopped := newest(exited("main", 0, 0, "m1"))
	stopped.SandboxReady = false
	for _, tc := range []struct {
		name string
		rt   *container.PodStatus
		want map[uint]string
	}{
		{"no sandbox", nil, map[uint]string{35: `False "" ""`, 36: `False "" ""`, 37: `False "PodSandboxNotReady" "no pod sandbox exists"`}},
		{"stopped sandbox", stopped, map[uint]string{35: `False "" ""`, 36: `False "" ""`, 37: `False "PodSandboxNotReady" "pod sandbox is not ready"`}},
		{"ready sandbox", newest(), map[uint]string{35: `True "" ""`, 36: `True "" ""`, 37: `True "" ""`}},
	} {
		for minor, want := range tc.want {
			got := Generate(Input{Pod: pod, Runtime: tc.rt, Release: release.Minor(minor), Now: t0})
			for _, c := range got.Conditions {
				if c.Type != corev1.PodReadyToStartContainers {
					continue
				}
				if line := fmt.Sprintf("%s %q %q", c.Status, c.Reason, c.Message); line != want {
					t.Errorf("%s on 1.%d: PodReadyToStartContainers=%s, want %s", tc.name, minor, line, want)
				}
			}
		}
	}
}

// summaryLine renders one container as summary does, without its name.
func summaryLine(c corev1.ContainerStatus) string {
	line := summary(corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{c}})
	line = strings.Split(strings.TrimSpace(line), "\n")[1]
	return strings.TrimPrefix(line, c.Name+" ")
}
