package restart

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Container builders for the tables: the shapes of docs/reference/kubelet.md's sequences.
func ctr(name string, policy *corev1.ContainerRestartPolicy, rules ...corev1.ContainerRestartRule) corev1.Container {
	return corev1.Container{Name: name, RestartPolicy: policy, RestartPolicyRules: rules}
}

var (
	never     = ptr.To(corev1.ContainerRestartPolicyNever)
	always    = ptr.To(corev1.ContainerRestartPolicyAlways)
	onFailure = ptr.To(corev1.ContainerRestartPolicyOnFailure)
)

func rule(action corev1.ContainerRestartRuleAction, op corev1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) corev1.ContainerRestartRule {
	return corev1.ContainerRestartRule{Action: action, ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}
}

const (
	in         = corev1.ContainerRestartRuleOnExitCodesOpIn
	notIn      = corev1.ContainerRestartRuleOnExitCodesOpNotIn
	restart    = corev1.ContainerRestartRuleActionRestart
	restartAll = corev1.ContainerRestartRuleActionRestartAllContainers
)

// Status builders.
func runningS(name string, started bool) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Started: ptr.To(started), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
}

func exitedS(name string, code int32) corev1.ContainerStatus {
	reason := "Error"
	if code == 0 {
		reason = "Completed"
	}
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}}
}

func waitingS(name, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
}

func waitingAfterS(name, reason string, lastCode int32, lastReason string) corev1.ContainerStatus {
	s := waitingS(name, reason)
	s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: lastCode, Reason: lastReason}
	return s
}

// restartedAll is a container's status right after a RestartAllContainers cleanup (docs/reference/kubelet.md, "Sync by sync", Cleaned).
func restartedAll(name string) corev1.ContainerStatus {
	return waitingAfterS(name, ReasonRestartingAllContainers, 137, ReasonRestartingAllContainers)
}

func TestShouldRestart(t *testing.T) {
	cases := []struct {
		name      string
		c         corev1.Container
		pod       corev1.RestartPolicy
		exit      int32
		gateOff   bool
		want      bool
		wantAllOn bool
	}{
		{name: "pod Never", c: ctr("c", nil), pod: corev1.RestartPolicyNever, exit: 1, want: false},
		{name: "pod OnFailure, failure", c: ctr("c", nil), pod: corev1.RestartPolicyOnFailure, exit: 1, want: true},
		{name: "pod OnFailure, success", c: ctr("c", nil), pod: corev1.RestartPolicyOnFailure, exit: 0, want: false},
		{name: "pod Always, success", c: ctr("c", nil), pod: corev1.RestartPolicyAlways, exit: 0, want: true},
		{name: "container policy over pod policy", c: ctr("c", always), pod: corev1.RestartPolicyNever, exit: 0, want: true},
		{name: "container OnFailure under pod Always", c: ctr("c", onFailure), pod: corev1.RestartPolicyAlways, exit: 0, want: false},
		{name: "Restart In [42] matches", c: ctr("c", never, rule(restart, in, 42)), pod: corev1.RestartPolicyNever, exit: 42, want: true},
		{name: "Restart In [42] misses, Never decides", c: ctr("c", never, rule(restart, in, 42)), pod: corev1.RestartPolicyNever, exit: 1, want: false},
		{name: "first matching rule wins", c: ctr("c", always, rule(restart, notIn, 7), rule(restartAll, in, 1)), pod: corev1.RestartPolicyNever, exit: 1, want: true},
		{name: "NotIn [1] restarts on success", c: ctr("c", never, rule(restart, notIn, 1)), pod: corev1.RestartPolicyNever, exit: 0, want: true},
		{name: "NotIn [] matches everything", c: ctr("c", never, rule(restart, notIn)), pod: corev1.RestartPolicyNever, exit: 3, want: true},
		{name: "In [] matches nothing", c: ctr("c", never, rule(restart, in)), pod: corev1.RestartPolicyNever, exit: 3, want: false},
		{name: "rules need the container's own policy", c: ctr("c", nil, rule(restart, in, 42)), pod: corev1.RestartPolicyNever, exit: 42, want: false},
		{name: "RestartAllContainers counts as a restart", c: ctr("c", never, rule(restartAll, in, 42)), pod: corev1.RestartPolicyNever, exit: 42, want: true, wantAllOn: true},
		{name: "RestartAllContainers with the gate off is inert", c: ctr("c", never, rule(restartAll, in, 42)), pod: corev1.RestartPolicyNever, exit: 42, gateOff: true, want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Rules{RestartAll: !tc.gateOff}
			if got := r.ShouldRestart(&tc.c, tc.pod, tc.exit); got != tc.want {
				t.Errorf("ShouldRestart() = %v, want %v", got, tc.want)
			}
			if got := r.RestartsAll(&tc.c, tc.exit); got != tc.wantAllOn {
				t.Errorf("RestartsAll() = %v, want %v", got, tc.wantAllOn)
			}
		})
	}
}

func TestPhase(t *testing.T) {
	// The pod of sequence A: init, sidecar, a RestartAllContainers source and a regular.
	seqA := corev1.PodSpec{
		RestartPolicy:  corev1.RestartPolicyNever,
		InitContainers: []corev1.Container{ctr("init", nil), ctr("sidecar", always)},
		Containers:     []corev1.Container{ctr("source-container", never, rule(restartAll, in, 42)), ctr("regular", nil)},
	}
	cases := []struct {
		name string
		in   PhaseInput
		want corev1.PodPhase
	}{
		{
			name: "I5: no rule matches and the container may not restart: Failed",
			in: PhaseInput{
				Spec:     &corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{ctr("main", never, rule(restart, in, 42))}},
				Statuses: []corev1.ContainerStatus{exitedS("main", 1)},
			},
			want: corev1.PodFailed,
		},
		{
			name: "I2: exit 42 matching Restart keeps the pod Running",
			in: PhaseInput{
				Spec:     &corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{ctr("main", never, rule(restart, in, 42))}},
				Statuses: []corev1.ContainerStatus{exitedS("main", 42)},
			},
			want: corev1.PodRunning,
		},
		{
			name: "I3: in CrashLoopBackOff the pod stays Running",
			in: PhaseInput{
				Spec:     &corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{ctr("main", never, rule(restart, in, 42))}},
				Statuses: []corev1.ContainerStatus{waitingAfterS("main", "CrashLoopBackOff", 42, "Error")},
			},
			want: corev1.PodRunning,
		},
		{
			name: "Failed despite pod Always: a Never container failed",
			in: PhaseInput{
				Spec:     &corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{ctr("a", never), ctr("b", onFailure)}},
				Statuses: []corev1.ContainerStatus{exitedS("a", 1), exitedS("b", 0)},
			},
			want: corev1.PodFailed,
		},
		{
			name: "Succeeded despite pod Always: every container's own policy lets it stop",
			in: PhaseInput{
				Spec:     &corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{ctr("a", never), ctr("b", onFailure)}},
				Statuses: []corev1.ContainerStatus{exitedS("a", 0), exitedS("b", 0)},
			},
			want: corev1.PodSucceeded,
		},
		{
			name: "pod Always without container policies restarts: Running",
			in: PhaseInput{
				Spec:     &corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{ctr("a", nil)}},
				Statuses: []corev1.ContainerStatus{exitedS("a", 0)},
			},
			want: corev1.PodRunning,
		},
		{
			name: "terminating: stopped containers make the pod terminal even if they would restart",
			in: PhaseInput{
				Spec:        &corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{ctr("a", nil)}},
				Statuses:    []corev1.ContainerStatus{exitedS("a", 137)},
				Terminating: true,
			},
			want: corev1.PodFailed,
		},
		{
			name: "S0: nothing started",
			in: PhaseInput{Spec: &seqA,
				InitStatuses: []corev1.ContainerStatus{waitingS("init", "PodInitializing"), waitingS("sidecar", "PodInitializing")},
				Statuses:     []corev1.ContainerStatus{waitingS("source-container", "PodInitializing"), waitingS("regular", "PodInitializing")}},
			want: corev1.PodPending,
		},
		{
			name: "S3: all running",
			in: PhaseInput{Spec: &seqA, Initialized: true,
				InitStatuses: []corev1.ContainerStatus{exitedS("init", 0), runningS("sidecar", true)},
				Statuses:     []corev1.ContainerStatus{runningS("source-container", true), runningS("regular", true)}},
			want: corev1.PodRunning,
		},
		{
			name: "S4: the source exited 42: still Running",
			in: PhaseInput{Spec: &seqA, Initialized: true,
				InitStatuses: []corev1.ContainerStatus{exitedS("init", 0), runningS("sidecar", true)},
				Statuses:     []corev1.ContainerStatus{exitedS("source-container", 42), runningS("regular", true)}},
			want: corev1.PodRunning,
		},
		{
			name: "S5: cleaned up: everything restartable, Running",
			in: PhaseInput{Spec: &seqA,
				InitStatuses: []corev1.ContainerStatus{restartedAll("init"), restartedAll("sidecar")},
				Statuses:     []corev1.ContainerStatus{restartedAll("source-container"), restartedAll("regular")}},
			want: corev1.PodRunning,
		},
		{
			name: "S6: the init container runs again: Pending",
			in: PhaseInput{Spec: &seqA,
				InitStatuses: []corev1.ContainerStatus{runningS("init", true), restartedAll("sidecar")},
				Statuses:     []corev1.ContainerStatus{restartedAll("source-container"), restartedAll("regular")}},
			want: corev1.PodPending,
		},
		{
			name: "S13: the init container fails after the restart, pod Never: Failed",
			in: PhaseInput{Spec: &seqA,
				InitStatuses: []corev1.ContainerStatus{exitedS("init", 1), restartedAll("sidecar")},
				Statuses:     []corev1.ContainerStatus{restartedAll("source-container"), restartedAll("regular")}},
			want: corev1.PodFailed,
		},
		{
			name: "a sidecar not yet started holds the pod Pending before initialization",
			in: PhaseInput{Spec: &seqA,
				InitStatuses: []corev1.ContainerStatus{exitedS("init", 0), runningS("sidecar", false)},
				Statuses:     []corev1.ContainerStatus{waitingS("source-container", "PodInitializing"), waitingS("regular", "PodInitializing")}},
			want: corev1.PodPending,
		},
		{
			name: "S9: a Never container exited 1 while the others run: Running",
			in: PhaseInput{Spec: &seqA, Initialized: true,
				InitStatuses: []corev1.ContainerStatus{exitedS("init", 0), runningS("sidecar", true)},
				Statuses:     []corev1.ContainerStatus{runningS("source-container", true), exitedS("regular", 1)}},
			want: corev1.PodRunning,
		},
	}
	r := Rules{RestartAll: true}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, r.Phase(tc.in)); diff != "" {
				t.Errorf("Phase() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCouldRestartAll(t *testing.T) {
	spec := &corev1.PodSpec{InitContainers: []corev1.Container{ctr("agent", always, rule(restartAll, in, 1))}}
	if !(Rules{RestartAll: true}).CouldRestartAll(spec) {
		t.Error("a sidecar's RestartAllContainers rule makes the pod eligible")
	}
	if (Rules{RestartAll: false}).CouldRestartAll(spec) {
		t.Error("with the gate off no pod is eligible")
	}
	if (Rules{RestartAll: true}).CouldRestartAll(&corev1.PodSpec{Containers: []corev1.Container{ctr("w", never, rule(restart, in, 1))}}) {
		t.Error("a Restart rule alone does not make the pod eligible")
	}
}
