package controlplane

import (
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/version"
)

// NodeFeature is one feature of a release's registry of node-declared features
// (k8s.io/component-helpers/nodedeclaredfeatures), as hack/releases records it.
type NodeFeature struct {
	Name string `json:"name"`
	// Gates are the feature gates its discovery asks for; all must be on.
	Gates []string `json:"gates"`
	// Discoverable is false for a feature that also needs something of the node's runtime or
	// static configuration, which an emulated node never has.
	Discoverable bool `json:"discoverable"`
	// MaxVersion is the last kubelet version that reports the feature, if any.
	MaxVersion string `json:"maxVersion,omitempty"`
}

const nodeFeaturesFile = "nodefeatures.json"

func parseNodeFeatures(data []byte, source string) ([]NodeFeature, error) {
	var fs []NodeFeature
	if err := json.Unmarshal(data, &fs); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	for _, f := range fs {
		if f.MaxVersion != "" {
			if _, err := version.ParseGeneric(f.MaxVersion); err != nil {
				return nil, fmt.Errorf("%s: %s: maxVersion: %w", source, f.Name, err)
			}
		}
	}
	return fs, nil
}

// DeclaredFeatures lists what a kubelet of the release declares in status.declaredFeatures with
// these gates in force, as its registry's discovery decides: a discoverable feature whose gates
// are all on, unless the release is past the feature's last version. It is sorted by name.
func (r Release) DeclaredFeatures(inForce map[string]bool) []string {
	kubelet := version.MustParseSemantic(r.Kubernetes)
	var declared []string
	for _, f := range r.nodeFeatures {
		if !f.Discoverable {
			continue
		}
		on := true
		for _, g := range f.Gates {
			on = on && r.gates.Enabled(inForce, g)
		}
		if !on {
			continue
		}
		if f.MaxVersion != "" && kubelet.GreaterThan(version.MustParseGeneric(f.MaxVersion)) {
			continue
		}
		declared = append(declared, f.Name)
	}
	slices.Sort(declared)
	return declared
}
