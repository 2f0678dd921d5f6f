package restart

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Rules decides, for one kubelet with the restart gates it runs with, what a container's
// exit means: the container-level restart policy and rules of KEP-5307 and the
// RestartAllContainers action of KEP-5532 (docs/reference/kubelet.md, "Deciding a restart").
//
// Upstream's helpers for this (k8s.io/kubernetes/pkg/api/v1/pod) read the process-wide feature
// gate; restartbed runs clusters with different gates in one process, so it decides here, with
// the gate of the kubelet at hand.
type Rules struct {
	// RestartAll is the RestartAllContainersOnContainerExits gate of this kubelet.
	RestartAll bool
}

// MatchingRule returns the first rule of c whose exit codes match, or nil. A rule without
// exitCodes or with an unknown operator never matches; In with no values matches nothing, and
// NotIn with no values matches everything.
func MatchingRule(c *corev1.Container, exitCode int32) *corev1.ContainerRestartRule {
	for i := range c.RestartPolicyRules {
		rule := &c.RestartPolicyRules[i]
		if rule.ExitCodes == nil {
			continue
		}
		listed := slices.Contains(rule.ExitCodes.Values, exitCode)
		switch rule.ExitCodes.Operator {
		case corev1.ContainerRestartRuleOnExitCodesOpIn:
			if listed {
				return rule
			}
		case corev1.ContainerRestartRuleOnExitCodesOpNotIn:
			if !listed {
				return rule
			}
		}
	}
	return nil
}

// ShouldRestart reports whether a container that exited with exitCode is started again. Rules
// count only when the container has its own restartPolicy; the first matching rule decides;
// without a match the container's policy decides, and without one the pod's.
func (r Rules) ShouldRestart(c *corev1.Container, pod corev1.RestartPolicy, exitCode int32) bool {
	if c.RestartPolicy != nil {
		if rule := MatchingRule(c, exitCode); rule != nil {
			switch rule.Action {
			case corev1.ContainerRestartRuleActionRestart:
				return true
			case corev1.ContainerRestartRuleActionRestartAllContainers:
				if r.RestartAll {
					return true
				}
				// With the gate off the rule is inert and the policies decide.
			}
		}
		return policyRestarts(corev1.RestartPolicy(*c.RestartPolicy), exitCode)
	}
	return policyRestarts(pod, exitCode)
}

// policyRestarts applies a pod-style restart policy; the empty policy is Always, as defaulted.
func policyRestarts(p corev1.RestartPolicy, exitCode int32) bool {
	switch p {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	default:
		return true
	}
}

// RestartsAll reports whether an exit of c with exitCode triggers RestartAllContainers: the
// first matching rule has that action, and the gate is on. Unlike ShouldRestart, it does not
// need the container's own restartPolicy (validation requires one anyway).
func (r Rules) RestartsAll(c *corev1.Container, exitCode int32) bool {
	if !r.RestartAll {
		return false
	}
	rule := MatchingRule(c, exitCode)
	return rule != nil && rule.Action == corev1.ContainerRestartRuleActionRestartAllContainers
}

// CouldRestartAll reports whether any init or regular container of the pod has a
// RestartAllContainers rule; only such pods carry the AllContainersRestarting condition.
func (r Rules) CouldRestartAll(spec *corev1.PodSpec) bool {
	if !r.RestartAll {
		return false
	}
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			for _, rule := range list[i].RestartPolicyRules {
				if rule.Action == corev1.ContainerRestartRuleActionRestartAllContainers {
					return true
				}
			}
		}
	}
	return false
}

// IsSidecar reports whether an init container is a sidecar: restartPolicy Always.
func IsSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}
