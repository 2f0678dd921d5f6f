package podactions

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/restartbed/restartbed/fakekubelet/container"
	"github.com/restartbed/restartbed/fakekubelet/status"
)

// Publish says whether and how an Actions' status goes to the API.
type Publish int

const (
	// PublishNone: nothing is published (a RestartAllContainers cleanup under way).
	PublishNone Publish = iota
	// PublishAsync: the status manager writes it when it can; the containers do not wait.
	PublishAsync
	// PublishAndWait: the status must be in the API before any container action of the plan
	// (the AllContainersRestarting trigger and the cleaned-up status that follows it, and a
	// deleted pod's final status before the deletion finishes).
	PublishAndWait
)

// String names the mode in test tables.
func (p Publish) String() string {
	return [...]string{"none", "async", "wait"}[p]
}

// Kill stops one running container instance.
type Kill struct {
	Container *corev1.Container
	ID        string
	// Grace is how long the instance has after SIGTERM (its preStop hook included).
	Grace time.Duration
	// Message is the Killing event's message.
	Message string
	// PreStop: run the container's preStop hook first, within the grace.
	PreStop bool
	// After lists the instances whose exit the SIGTERM waits for, within the grace, once the
	// preStop hook has run: the pod's termination order (sidecars after the regular containers
	// and after the sidecars that follow them).
	After []string
	// Restart, when set, is the start the kubelet decided together with the kill: once the
	// instance has stopped, the container starts again at once (Input.Restarts).
	Restart *Restart
	// HoldsSync: a live pod's sync kills (a failed probe, a changed image, a failed postStart
	// hook): the pod's next syncs wait until the instance has stopped (Input.Killing).
	HoldsSync bool
}

// Restart is a container's start that waits for the instances a sync kills: its own (Kill.Restart)
// or any other (Actions.Deferred). The kubelet kills and starts within one SyncPod, checking the
// crash-loop backoff against the newest instance that had exited before the kill; the start does
// not depend on how the killed instance exits.
type Restart struct {
	// BackoffKey is the backoff entry the start advances; empty when no instance had exited.
	BackoffKey string
	// BackoffSince is when that instance exited.
	BackoffSince time.Time
}

// Start starts a container.
type Start struct {
	Container *corev1.Container
	// BackoffKey is the crash-loop backoff entry a restart advances; empty for a first start.
	BackoffKey string
	// BackoffSince is when the instance it replaces exited.
	BackoffSince time.Time
}

// HoldBack is a container that should start but waits out its crash-loop backoff.
type HoldBack struct {
	Container *corev1.Container
	// Waiting is the reason the kubelet remembers and shows until the container starts.
	Waiting status.Waiting
	// Retry is when the backoff ends, from now.
	Retry time.Duration
}

// Actions are everything one sync of a pod does, in the order the pod workers apply them:
// create the sandbox (and plan again on it), stop the sandbox, publish the status, remove,
// kill, hold back and start containers, finish the deletion, look again; and the phase the pod
// is in after them.
type Actions struct {
	// CreateSandbox: the pod has no ready sandbox; nothing else is planned until it has one.
	CreateSandbox bool
	// SandboxChanged: CreateSandbox replaces a sandbox that stopped under the live pod (a node's
	// reboot): the SandboxChanged event, and Remove lists the init containers' instances, which
	// the kubelet purges before it starts the pod again from its first init container.
	SandboxChanged bool
	// StopSandbox: every container has stopped; the sandbox stops and gives its IP back. The
	// status to publish is then generated from the runtime with the sandbox stopped
	// (GenerateStatus, terminating): Status is left empty.
	StopSandbox bool

	Publish Publish
	// Status is the status to publish (when Publish is not PublishNone): Input.Status, or what
	// the termination makes of it. Nothing published, the pod worker still applies what the probe
	// workers found (the status manager's SetContainerReadiness).
	Status corev1.PodStatus

	// Remove lists instance IDs to remove from the runtime (a RestartAllContainers cleanup).
	Remove []string
	// Kill lists instances to stop.
	Kill     []Kill
	HoldBack []HoldBack
	Start    []Start
	// Deferred are the starts of a sync that kills (Kill.HoldsSync): SyncPod makes them once
	// its kills have returned, so they wait as Input.Restarts do.
	Deferred []Start

	// FinishDeletion: the deleted pod has stopped; delete it from the API for good.
	FinishDeletion bool

	// Phase is the pod's phase once the sync is done: the one it began in (Input.Phase), or a
	// later one it moved to (phase.go).
	Phase Phase

	// Requeue: sync the pod again (a cleanup is done, or the restarts a kill decided have been
	// made); as every sync that begins a SyncPod, it waits for the next relist.
	Requeue bool
}

// RetryAfter is the earliest retry of a held-back container, or 0 when none is held back.
func (a *Actions) RetryAfter() time.Duration {
	var d time.Duration
	for i, h := range a.HoldBack {
		if i == 0 || h.Retry < d {
			d = h.Retry
		}
	}
	return d
}

// String is a one-line summary of the actions, for test tables and logs.
func (a *Actions) String() string {
	var parts []string
	add := func(format string, args ...any) { parts = append(parts, fmt.Sprintf(format, args...)) }
	if a.CreateSandbox {
		add("create-sandbox")
	}
	if a.SandboxChanged {
		add("sandbox-changed")
	}
	if a.StopSandbox {
		add("stop-sandbox")
	}
	if a.Publish != PublishNone {
		add("publish=%s(%s)", a.Publish, a.Status.Phase)
	}
	for _, id := range a.Remove {
		add("remove=%s", id)
	}
	for _, k := range a.Kill {
		hook := ""
		if k.PreStop && k.Container.Lifecycle != nil && k.Container.Lifecycle.PreStop != nil {
			hook = "+preStop"
		}
		redefined := ""
		if k.Restart != nil {
			redefined = ",restart"
		}
		after := ""
		if len(k.After) > 0 {
			after = ",after=" + strings.Join(k.After, "+")
		}
		holds := ""
		if k.HoldsSync {
			holds = ",holds"
		}
		add("kill=%s/%s(%s%s%s%s%s)", k.Container.Name, k.ID, k.Grace, hook, after, redefined, holds)
	}
	for _, h := range a.HoldBack {
		add("hold=%s(%s %s)", h.Container.Name, h.Waiting.Reason, h.Retry)
	}
	for _, s := range a.Start {
		add("start=%s", s.Container.Name)
	}
	for _, s := range a.Deferred {
		add("defer=%s", s.Container.Name)
	}
	if a.FinishDeletion {
		add("finish-deletion")
	}
	if a.Requeue {
		add("requeue")
	}
	if a.Phase != SyncPod {
		add("phase=%s", a.Phase)
	}
	return strings.Join(parts, " ")
}

// containerSpec returns the pod's init or regular container with the name; a container the
// spec no longer names (which the API does not allow) gets a spec with the name only.
func containerSpec(pod *corev1.Pod, name string) *corev1.Container {
	if c := container.SpecOf(pod, name); c != nil {
		return c
	}
	return &corev1.Container{Name: name}
}

// running reports whether any instance of the pod runs.
func running(rt *container.PodStatus) bool {
	for i := range rt.Containers {
		if rt.Containers[i].State == container.Running {
			return true
		}
	}
	return false
}
