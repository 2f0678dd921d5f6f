package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/restartbed/restartbed/fakekubelet/container"
)

// The labels the kubelet gives every sandbox and container it creates, and that crictl and
// upstream's tests select them by (pkg/kubelet/types/labels.go).
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"
)

// ErrNotFound reports a sandbox or container ID the node's runtime does not have.
var ErrNotFound = errors.New("not found")

// podMeta is what a sandbox's CRI configuration carries of its pod.
type podMeta struct {
	name, namespace     string
	labels, annotations map[string]string
}

func metaOf(pod *corev1.Pod) podMeta {
	return podMeta{name: pod.Name, namespace: pod.Namespace, labels: maps.Clone(pod.Labels), annotations: maps.Clone(pod.Annotations)}
}

// sandboxID is the ID of the pod's sandbox of the given attempt: 64 hex digits, as containerd's.
func sandboxID(uid types.UID, attempt uint32) string {
	sum := sha256.Sum256([]byte(string(uid) + "/sandbox/" + strconv.FormatUint(uint64(attempt), 10)))
	return hex.EncodeToString(sum[:])
}

// Sandbox is a pod sandbox as the CRI shows it.
type Sandbox struct {
	ID        string
	Attempt   uint32
	Ready     bool
	CreatedAt time.Time
	PodUID    types.UID
	Name      string
	Namespace string
	// Labels are the pod's labels and the kubelet's (LabelPodName, ...); Annotations the pod's.
	Labels, Annotations map[string]string
	IP                  string
}

// Container is a container instance as the CRI shows it.
type Container struct {
	container.Status
	SandboxID string
	PodUID    types.UID
	// Labels are the kubelet's (LabelContainerName, LabelPodName, ...).
	Labels map[string]string
}

// on returns the sandboxes of the node's pods; r.mu is held.
func (r *Runtime) on(node string) []*sandbox {
	var out []*sandbox
	for _, sb := range r.pods {
		if sb.node == node {
			out = append(out, sb)
		}
	}
	return out
}

// Sandboxes returns the current sandbox of every pod on the node, oldest first.
func (r *Runtime) Sandboxes(node string) []Sandbox {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Sandbox
	for _, sb := range r.on(node) {
		labels := maps.Clone(sb.meta.labels)
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, sb.kubeletLabels())
		out = append(out, Sandbox{ID: sb.id, Attempt: sb.attempt, Ready: sb.ready, CreatedAt: sb.createdAt, PodUID: sb.uid,
			Name: sb.meta.name, Namespace: sb.meta.namespace, Labels: labels, Annotations: maps.Clone(sb.meta.annotations), IP: sb.ip})
	}
	slices.SortFunc(out, func(a, b Sandbox) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out
}

// kubeletLabels are the labels the kubelet puts on the sandbox and its containers; r.mu is held.
func (sb *sandbox) kubeletLabels() map[string]string {
	return map[string]string{LabelPodName: sb.meta.name, LabelPodNamespace: sb.meta.namespace, LabelPodUID: string(sb.uid)}
}

// Containers returns every container instance on the node, oldest first.
func (r *Runtime) Containers(node string) []Container {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Container
	for _, sb := range r.on(node) {
		for _, in := range sb.instances {
			labels := sb.kubeletLabels()
			labels[LabelContainerName] = in.status.Name
			out = append(out, Container{Status: in.status, SandboxID: in.sandboxID, PodUID: sb.uid, Labels: labels})
		}
	}
	slices.SortFunc(out, func(a, b Container) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out
}

// StopSandboxByID stops the node's sandbox with the ID as the CRI's StopPodSandbox does, and a
// node's reboot: every instance still running is killed at once (SIGKILL), and the sandbox is
// not ready and off the network. The kubelet's next sync of the pod replaces it (RunSandbox).
// Stopping a stopped sandbox does nothing.
func (r *Runtime) StopSandboxByID(node, id string) error {
	r.mu.Lock()
	var sb *sandbox
	for _, s := range r.on(node) {
		if s.id == id {
			sb = s
		}
	}
	if sb == nil {
		r.mu.Unlock()
		return fmt.Errorf("sandbox %q: %w", id, ErrNotFound)
	}
	sb.stop()
	var kills []func()
	for _, in := range sb.instances {
		if in.status.State == container.Running && in.kill != nil {
			kills = append(kills, in.kill)
		}
	}
	r.mu.Unlock()
	for _, kill := range kills {
		kill()
	}
	r.opts.Notify(sb.uid)
	return nil
}

// findByID returns the node's instance with the ID and its pod; r.mu is held.
func (r *Runtime) findByID(node, id string) (*sandbox, *instance) {
	for _, sb := range r.on(node) {
		if _, in := r.find(sb.uid, id); in != nil {
			return sb, in
		}
	}
	return nil, nil
}

// StopContainerByID stops the node's instance with the ID as the CRI's StopContainer does:
// SIGTERM, and SIGKILL after timeout.
func (r *Runtime) StopContainerByID(node, id string, timeout time.Duration) error {
	r.mu.Lock()
	sb, in := r.findByID(node, id)
	r.mu.Unlock()
	if in == nil {
		return fmt.Errorf("container %q: %w", id, ErrNotFound)
	}
	r.Stop(sb.uid, id, timeout)
	return nil
}

// RemoveContainerByID removes the node's instance with the ID as the CRI's RemoveContainer
// does: a running one is killed first. Unlike the kubelet's removal (Remove), the container's
// log files are the kubelet's and stay, so its next instance goes on counting attempts.
func (r *Runtime) RemoveContainerByID(node, id string) error {
	r.mu.Lock()
	sb, in := r.findByID(node, id)
	if in == nil {
		r.mu.Unlock()
		return fmt.Errorf("container %q: %w", id, ErrNotFound)
	}
	sb.instances = slices.DeleteFunc(sb.instances, func(x *instance) bool { return x == in })
	kill := in.kill
	r.mu.Unlock()
	if kill != nil {
		kill() // an exited instance's cancel does nothing
	}
	r.opts.Notify(sb.uid)
	return nil
}

// ExecByID runs argv in the node's instance with the ID, which must be running, as Exec does.
func (r *Runtime) ExecByID(ctx context.Context, node, id string, argv []string) (int, string, error) {
	r.mu.Lock()
	sb, in := r.findByID(node, id)
	var name string
	running := false
	if in != nil {
		name, running = in.status.Name, in.status.State == container.Running
	}
	r.mu.Unlock()
	switch {
	case in == nil:
		return 0, "", fmt.Errorf("container %q: %w", id, ErrNotFound)
	case !running:
		return 0, "", fmt.Errorf("container %q: %w", id, ErrNotRunning)
	}
	return r.Exec(ctx, sb.uid, name, argv)
}
