package envtest

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/fakekubelet"
)

// Feature gates that JobSet's in-place restart needs.
const (
	// GateContainerRestartRules allows restartPolicyRules on containers (beta and on from 1.35).
	GateContainerRestartRules = "ContainerRestartRules"
	// GateRestartAllContainers allows the RestartAllContainers action (alpha in 1.35, beta and on
	// from 1.36). It depends on the other two.
	GateRestartAllContainers = fakekubelet.GateRestartAllContainers
	// GateNodeDeclaredFeatures makes nodes publish status.declaredFeatures (alpha in 1.35, beta
	// in 1.36, GA in 1.37).
	GateNodeDeclaredFeatures = "NodeDeclaredFeatures"
)

// RequiredFeatureGates returns what restartbed sets on a release: GateRestartAllContainers and
// every gate it depends on, each turned on only where the release leaves it off. On 1.35 that is
// RestartAllContainersOnContainerExits and NodeDeclaredFeatures; from 1.36 on, nothing.
func RequiredFeatureGates(r controlplane.Release) map[string]bool {
	gates := r.FeatureGates()
	settings := map[string]bool{}
	seen := map[string]bool{}
	var need func(name string)
	need = func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		if !gates[name].Default {
			settings[name] = true
		}
		for _, dep := range gates[name].DependsOn {
			need(dep)
		}
	}
	need(GateRestartAllContainers)
	return settings
}

// ResolveFeatureGates merges overrides over RequiredFeatureGates and checks the result against
// the release's own registry, so that an unknown gate, a locked one or a missing dependency is
// reported in the components' words before any process starts. It returns every gate of the
// release with the value it has in the cluster, defaults included.
func ResolveFeatureGates(r controlplane.Release, overrides map[string]bool) (map[string]bool, error) {
	settings := RequiredFeatureGates(r)
	maps.Copy(settings, overrides)
	gates := r.FeatureGates()
	if err := gates.Check(settings, r.Kubernetes); err != nil {
		return nil, err
	}
	inForce := make(map[string]bool, len(gates))
	for name := range gates {
		inForce[name] = gates.Enabled(settings, name)
	}
	return inForce, nil
}

// ChangedFeatureGates returns the gates of inForce whose value is not the release's default:
// what the components' --feature-gates say.
func ChangedFeatureGates(r controlplane.Release, inForce map[string]bool) map[string]bool {
	gates := r.FeatureGates()
	changed := map[string]bool{}
	for name, on := range inForce {
		if g, ok := gates[name]; !ok || g.Default != on {
			changed[name] = on
		}
	}
	return changed
}

// FormatFeatureGates renders gates as A=true,B=false, sorted: the form of --feature-gates.
func FormatFeatureGates(gates map[string]bool) string {
	parts := make([]string, 0, len(gates))
	for _, name := range slices.Sorted(maps.Keys(gates)) {
		parts = append(parts, fmt.Sprintf("%s=%t", name, gates[name]))
	}
	return strings.Join(parts, ",")
}

// gatesFlag is the value of the components' --feature-gates: the gates in force that differ
// from the release's defaults.
func gatesFlag(r controlplane.Release, inForce map[string]bool) string {
	return FormatFeatureGates(ChangedFeatureGates(r, inForce))
}
