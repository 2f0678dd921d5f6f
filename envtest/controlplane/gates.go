package controlplane

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Gate is one feature gate as a release's components register it.
type Gate struct {
	Name string `json:"name"`
	// Default is the gate's value when nobody sets it.
	Default bool `json:"default"`
	// PreRelease is ALPHA, BETA, empty for GA, or DEPRECATED.
	PreRelease string `json:"preRelease"`
	// LockToDefault gates cannot be set to anything but their default.
	LockToDefault bool `json:"lockToDefault,omitempty"`
	// DependsOn are the gates that must be on for this one to be on.
	DependsOn []string `json:"dependsOn,omitempty"`
}

// Gates is a release's feature-gate registry by name.
type Gates map[string]Gate

// FeatureGates is the release's registry (releases/<minor>/featuregates.json, which
// hack/releases writes from the release's own k8s.io/kubernetes/pkg/features).
func (r Release) FeatureGates() Gates { return r.gates }

func parseGates(data []byte, source string) (Gates, error) {
	var list []Gate
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	gates := make(Gates, len(list))
	for _, g := range list {
		gates[g.Name] = g
	}
	return gates, nil
}

// Enabled is the gate's value under these settings: the setting, else the default; unknown
// gates are off.
func (gs Gates) Enabled(settings map[string]bool, name string) bool {
	if v, ok := settings[name]; ok {
		return v
	}
	return gs[name].Default
}

// Check reports what the release's components would refuse in settings, in their words and
// all at once: an unknown gate, a locked gate set away from its default, and a gate turned on
// while a gate it depends on is off. release names the release in the messages.
func (gs Gates) Check(settings map[string]bool, release string) error {
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(settings)) {
		g, ok := gs[name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("unrecognized feature gate: %s", name))
		case g.LockToDefault && settings[name] != g.Default:
			problems = append(problems, fmt.Sprintf("cannot set feature gate %s to %t, feature is locked to %t", name, settings[name], g.Default))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(gs)) {
		if !gs.Enabled(settings, name) {
			continue
		}
		var off []string
		for _, dep := range gs[name].DependsOn {
			if !gs.Enabled(settings, dep) {
				off = append(off, dep)
			}
		}
		if len(off) > 0 {
			problems = append(problems, fmt.Sprintf("%s is enabled, but depends on features that are disabled: %v", name, off))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("feature gates of Kubernetes %s: %s", release, strings.Join(problems, "; "))
	}
	return nil
}
