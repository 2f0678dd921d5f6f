// Package container holds what the emulated kubelet knows of a pod's containers at one moment,
// as upstream's kubecontainer does for the kubelet: snapshots of a pod's sandbox and container
// instances (PodStatus, Status), their states and containerd's exit reasons. The runtime makes
// them; the kubelet's deciding parts (restart, status) read them.
//
// It is a leaf: it imports nothing of the emulator, holds values only, and runs nothing.
package container

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// State is a container instance's state, as the CRI reports it.
type State string

const (
	// Running: the process runs.
	Running State = "running"
	// Exited: the process ended, or never started (a start error).
	Exited State = "exited"
)

// Exit reasons, as containerd reports them.
const (
	ReasonCompleted  = "Completed"
	ReasonError      = "Error"
	ReasonOOMKilled  = "OOMKilled"
	ReasonStartError = "StartError"
)

// ExitCodeKilled is the exit code of an instance the runtime killed (128+SIGKILL), and the one
// the kubelet gives an instance it can no longer find.
const ExitCodeKilled = 137

// Status is a snapshot of one container instance.
type Status struct {
	ID   string
	Name string
	// Attempt counts the instances of this container since the pod started or since its
	// instances were last all removed.
	Attempt    int
	State      State
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	ExitCode   int32
	Reason     string
	Message    string
	Image      string
	ImageRef   string
	// SpecImage is the image as the container's spec named it when the instance was created:
	// with the container's name, all that the kubelet's container hash covers (HashContainer in
	// pkg/kubelet/container/helpers.go), so a running instance whose SpecImage differs from
	// the spec's has had its definition changed.
	SpecImage string
}

// idScheme prefixes an instance's ID in the API (the runtime's name, as containerd's).
const idScheme = "containerd://"

// ContainerID is the status's ID as the API shows it.
func (s *Status) ContainerID() string { return idScheme + s.ID }

// InstanceID is the instance ID in a container status's containerID ("containerd://ID"); an ID
// without a scheme is returned as it is.
func InstanceID(containerID string) string {
	if _, id, found := strings.Cut(containerID, "://"); found {
		return id
	}
	return containerID
}

// PodStatus is a snapshot of one pod's sandbox and container instances.
type PodStatus struct {
	UID types.UID
	IP  string
	// SandboxID is the runtime's sandbox's ID; empty when the pod has none (its creation failed).
	SandboxID    string
	SandboxReady bool
	// Containers are every instance, newest first.
	Containers []Status
}

// Latest returns the newest instance of the named container, or nil.
func (p *PodStatus) Latest(name string) *Status {
	if p == nil {
		return nil
	}
	for i := range p.Containers {
		if p.Containers[i].Name == name {
			return &p.Containers[i]
		}
	}
	return nil
}

// Previous returns the second-newest instance of the named container, or nil.
func (p *PodStatus) Previous(name string) *Status {
	if p == nil {
		return nil
	}
	seen := false
	for i := range p.Containers {
		if p.Containers[i].Name == name {
			if seen {
				return &p.Containers[i]
			}
			seen = true
		}
	}
	return nil
}

// Running reports whether the instance with the ID runs.
func (p *PodStatus) Running(id string) bool {
	if p == nil {
		return false
	}
	for i := range p.Containers {
		if p.Containers[i].ID == id {
			return p.Containers[i].State == Running
		}
	}
	return false
}

// Instances returns every instance of the named container, newest first.
func (p *PodStatus) Instances(name string) []*Status {
	var out []*Status
	for i := range p.Containers {
		if p.Containers[i].Name == name {
			out = append(out, &p.Containers[i])
		}
	}
	return out
}

// SpecOf returns the pod's init or regular container with the name, or nil.
func SpecOf(pod *corev1.Pod, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}
