package envtest

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	_ "k8s.io/kubernetes/pkg/features" // registers the kube-apiserver's gates in utilfeature
)

// Feature gates restartbed turns on by default, so that JobSet's in-place restart works.
const (
	// GateContainerRestartRules allows restartPolicyRules on containers (beta, on in 1.35).
	GateContainerRestartRules = "ContainerRestartRules"
	// GateRestartAllContainers allows the RestartAllContainers action (alpha in 1.35). It depends
	// on the other two.
	GateRestartAllContainers = "RestartAllContainersOnContainerExits"
	// GateNodeDeclaredFeatures makes nodes publish status.declaredFeatures (alpha in 1.35).
	GateNodeDeclaredFeatures = "NodeDeclaredFeatures"
)

// DefaultFeatureGates returns the gates every cluster starts with; Options.FeatureGates is
// merged over them.
func DefaultFeatureGates() map[string]bool {
	return map[string]bool{
		GateContainerRestartRules: true,
		GateRestartAllContainers:  true,
		GateNodeDeclaredFeatures:  true,
	}
}

// ResolveFeatureGates merges overrides over the defaults and checks the result with the
// kube-apiserver's own gate registry, so an unknown gate, a locked one or a missing dependency
// is reported with the apiserver's words before any process starts.
func ResolveFeatureGates(overrides map[string]bool) (map[string]bool, error) {
	gates := DefaultFeatureGates()
	maps.Copy(gates, overrides)
	check := utilfeature.DefaultMutableFeatureGate.DeepCopy()
	if err := check.SetFromMap(gates); err != nil {
		return nil, fmt.Errorf("feature gates: %w", err)
	}
	return gates, nil
}

// gatesFlag renders gates as the value of --feature-gates, sorted for stable output.
func gatesFlag(gates map[string]bool) string {
	parts := make([]string, 0, len(gates))
	for _, name := range slices.Sorted(maps.Keys(gates)) {
		parts = append(parts, fmt.Sprintf("%s=%t", name, gates[name]))
	}
	return strings.Join(parts, ",")
}
