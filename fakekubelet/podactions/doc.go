// Package podactions decides what the emulated kubelet does in one sync of one pod, as the
// kubelet's computePodActions (pkg/kubelet/kuberuntime/kuberuntime_manager.go) does for SyncPod
// and as SyncPod, SyncTerminatingPod and SyncTerminatedPod (pkg/kubelet/kubelet.go) decide
// around it, each in its phase of the pod's worker (Phase; phase.go holds every move between the
// phases). From the pod, its phase, the status the kubelet last generated, the runtime's view of
// the pod's containers, the crash-loop backoff, the probe results, the restart rules, the release
// and the time, Compute returns one Actions value: the status to publish and how, the containers
// to kill, remove, start or hold back and why, the sandbox to create or stop, whether the pod's
// deletion can finish, when to look again, and the phase the pod is in after the sync.
//
// It is pure: it starts, stops, writes and waits for nothing, and reads no clock: the time is
// Input.Now, and the crash-loop backoff comes as the values it has at that time (BackoffState),
// which the caller reads, and the probe results are the values the probe workers (package
// prober) had then. The pod workers (package fakekubelet) keep each pod's phase and apply its
// Actions. docs/fakekubelet.md describes the sync it plans.
package podactions
