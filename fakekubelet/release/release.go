// Package release says what the emulated kubelet does differently in each supported Kubernetes
// minor (1.35, 1.36, 1.37): one method per difference that the API shows, each naming the
// upstream file and function it follows. The deciding packages (status, podactions) and the
// prober ask it; nothing else compares versions.
//
// It holds a value only and imports nothing of the emulator. Feature gates are not its concern:
// a behaviour behind a gate is decided with the gate (restart.Rules), and only behaviour that
// changed between releases with the same gates is listed here. docs/fakekubelet.md keeps the
// table of these differences.
package release

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"
)

// Supported minors, oldest first.
const (
	OldestMinor = 35
	NewestMinor = 37
)

// Kubelet is the behaviour of one kubelet release. The zero value is the oldest supported one.
type Kubelet struct {
	minor uint // 0: OldestMinor
}

// For returns the behaviour of the kubelet of the version (v1.36.4, 1.37). Versions outside the
// supported minors are refused.
func For(v string) (Kubelet, error) {
	parsed, err := version.ParseGeneric(v)
	if err != nil {
		return Kubelet{}, fmt.Errorf("kubelet version %q: %w", v, err)
	}
	if parsed.Major() != 1 || parsed.Minor() < OldestMinor || parsed.Minor() > NewestMinor {
		return Kubelet{}, fmt.Errorf("kubelet version %q: restartbed emulates the kubelets of 1.%d to 1.%d", v, OldestMinor, NewestMinor)
	}
	return Kubelet{minor: parsed.Minor()}, nil
}

// Minor returns a supported minor's behaviour; it panics on another (for tables and tests).
func Minor(minor uint) Kubelet {
	k, err := For(fmt.Sprintf("1.%d", minor))
	if err != nil {
		panic(err)
	}
	return k
}

// String is the release as "1.36".
func (k Kubelet) String() string { return fmt.Sprintf("1.%d", max(k.minor, OldestMinor)) }

// CarriesLastStateAcrossRestartAll: from 1.36 a container's new instance after a
// RestartAllContainers keeps the previous status's termination as its lastState (the
// instances it would come from are removed), so the restarted containers show
// lastState.terminated {137, RestartingAllContainers}; in 1.35 their lastState is empty.
// Upstream: pkg/kubelet/kubelet_pods.go, convertToAPIContainerStatuses (its
// convertContainerStatus), with the RestartAllContainersOnContainerExits gate.
func (k Kubelet) CarriesLastStateAcrossRestartAll() bool { return k.minor >= 36 }

// SandboxImage is the pause image of the release's sandboxes, which every node's runtime holds:
// kubeadm's PauseVersion, 3.10.1 in 1.35 and 3.10.2 from 1.36 (cmd/kubeadm/app/constants).
func (k Kubelet) SandboxImage() string {
	if k.minor >= 36 {
		return "registry.k8s.io/pause:3.10.2"
	}
	return "registry.k8s.io/pause:3.10.1"
}

// ExplainsSandboxNotReady: from 1.37 a PodReadyToStartContainers=False condition has reason
// PodSandboxNotReady and a message saying why ("no pod sandbox exists", "pod sandbox is not
// ready"); before it has neither. Upstream: pkg/kubelet/status/generate.go,
// GeneratePodReadyToStartContainersCondition, and kuberuntime/util PodSandboxChanged.
func (k Kubelet) ExplainsSandboxNotReady() bool { return k.minor >= 37 }

// ExecProbesWhileTerminating: from 1.37 the probe workers outlive the pod's sync context, so an
// exec readiness probe keeps running while the pod terminates and can make it NotReady. Before,
// that context is cancelled when the pod begins terminating: an exec probe then errors
// ("context canceled"), the kubelet records the error as an Unhealthy event and keeps the last
// result, while HTTP, TCP and gRPC probes, which do not use that context, go on. Upstream:
// pkg/kubelet/prober/prober_manager.go, AddPod (context.WithoutCancel in 1.37), and
// prober/worker.go, doProbe.
func (k Kubelet) ExecProbesWhileTerminating() bool { return k.minor >= 37 }
