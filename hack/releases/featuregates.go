//go:build ignore

// featuregates prints the feature gates that a release's kube-apiserver, kube-controller-manager
// and kubelet know (k8s.io/kubernetes/pkg/features and the apiserver's own), with their default,
// stage, lock and dependencies, as JSON. hack/releases builds it from this file in
// each supported release's module; hack/releases keeps its output as that release's
// featuregates.json, so that restartbed checks a user's gates against the release that will run them.
package main

import (
	"encoding/json"
	"os"
	"sort"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	_ "k8s.io/kubernetes/pkg/features" // registers the Kubernetes gates in utilfeature
)

type gate struct {
	Name          string   `json:"name"`
	Default       bool     `json:"default"`
	PreRelease    string   `json:"preRelease"`
	LockToDefault bool     `json:"lockToDefault,omitempty"`
	DependsOn     []string `json:"dependsOn,omitempty"`
}

func main() {
	fg := utilfeature.DefaultMutableFeatureGate
	deps := fg.Dependencies()
	var gates []gate
	for name, spec := range fg.GetAll() {
		g := gate{Name: string(name), Default: spec.Default, PreRelease: string(spec.PreRelease), LockToDefault: spec.LockToDefault}
		for _, d := range deps[name] {
			g.DependsOn = append(g.DependsOn, string(d))
		}
		sort.Strings(g.DependsOn)
		gates = append(gates, g)
	}
	sort.Slice(gates, func(i, j int) bool { return gates[i].Name < gates[j].Name })
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(gates); err != nil {
		os.Exit(1)
	}
}
