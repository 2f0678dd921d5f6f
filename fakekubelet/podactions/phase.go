package podactions

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/restartbed/restartbed/fakekubelet/restart"
)

// Phase is where a pod is in its life on the kubelet: the state of its pod worker
// (PodWorkerState in pkg/kubelet/pod_workers.go), which decides what a sync of the pod does.
// A pod only moves forward:
//
//	SyncPod ──▶ TerminatingPod ──▶ TerminatedPod ──▶ gone
//
// Every transition the plan makes is decided in this file:
//
//   - SyncPod → TerminatingPod when the sync begins (Update, as the pod worker's UpdatePod): the
//     pod is deleted, or its phase in the API or in the status the kubelet last generated is
//     terminal.
//   - SyncPod → TerminatingPod within the sync (syncPod's isTerminal): the status generated for
//     the sync is terminal, every container being done for good. The same sync goes on as a
//     TerminatingPod, as the pod worker requeues the pod at once.
//   - TerminatingPod → TerminatedPod: no container runs (syncTerminatingPod has killed them all);
//     the sandbox stops and the final status is generated. The same sync goes on as a
//     TerminatedPod.
//   - TerminatedPod → gone: a deleted pod's final status is waited into the API and the
//     deletion finishes (the status manager's canBeDeleted). A pod that is not deleted stays
//     TerminatedPod until it leaves the API.
//
// The pod worker (package fakekubelet) keeps each pod's phase, hands it to the plan
// (Input.Phase), takes the plan's (Actions.Phase) and does what entering a phase does (the
// liveness and startup probes stop on TerminatingPod, the probe workers and tokens go on
// TerminatedPod). Two more ends are the pod worker's alone: a pod that leaves the API or whose
// node is released is torn down from any phase, and a kubelet restart forgets every pod's phase,
// which its next sync finds again from the API (Update), as the kubelet's does.
type Phase uint8

const (
	// SyncPod: the pod runs; its containers start, restart and are probed (syncPod).
	SyncPod Phase = iota
	// TerminatingPod: the pod's containers are being stopped for good (syncTerminatingPod).
	TerminatingPod
	// TerminatedPod: every container and the sandbox have stopped, and the final status is
	// generated (syncTerminatedPod); nothing runs again.
	TerminatedPod
)

// String names the phase in test tables and logs.
func (ph Phase) String() string {
	return [...]string{"sync", "terminating", "terminated"}[ph]
}

// Update is the pod's phase when a sync begins, from the phase its worker kept and what the
// kubelet knows of the pod: a deleted pod, or one whose phase in the API or in the kubelet's
// last status (old) is terminal, terminates (UpdatePod). It never moves a pod back.
func Update(ph Phase, pod *corev1.Pod, old *corev1.PodStatus) Phase {
	if ph == SyncPod && (pod.DeletionTimestamp != nil || restart.IsTerminal(pod.Status.Phase) || restart.IsTerminal(old.Phase)) {
		return TerminatingPod
	}
	return ph
}

// compute plans one sync in the pod's phase and moves the pod through the phases the sync
// completes: the pod worker's loop (podWorkerLoop), which runs syncPod, syncTerminatingPod and
// syncTerminatedPod by the pod's phase.
func (p *planner) compute() {
	p.out.Phase = Update(p.in.Phase, p.in.Pod, &p.in.Old)
	if p.out.Phase == SyncPod {
		if !p.syncPod() {
			return
		}
		p.out.Phase = TerminatingPod
	}
	if p.out.Phase == TerminatingPod {
		if !p.syncTerminatingPod() {
			return
		}
		p.out.Phase = TerminatedPod
	}
	p.syncTerminatedPod()
}
