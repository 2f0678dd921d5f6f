//go:build ignore

// nodefeatures prints, as JSON, what a release's kubelet declares in status.declaredFeatures
// (k8s.io/component-helpers/nodedeclaredfeatures of that release): each feature of the registry
// with the feature gates its discovery asks for, whether it is discovered when they are all on
// (a feature that also needs something of the node's runtime or static configuration is not),
// and the last version that reports it. hack/releases builds it in each supported release's
// module and keeps its output as that release's nodefeatures.json; the emulated kubelets declare
// a feature when it is discoverable, its gates are on and their version is not past its last.
//
// The registry's types moved between releases (nodedeclaredfeatures.NodeConfiguration in 1.35,
// nodedeclaredfeatures/types from 1.36), so the configuration is built by reflection.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"

	"k8s.io/component-helpers/nodedeclaredfeatures/features"
)

type feature struct {
	Name         string   `json:"name"`
	Gates        []string `json:"gates"`
	Discoverable bool     `json:"discoverable"`
	MaxVersion   string   `json:"maxVersion,omitempty"`
}

// allOn answers every gate as on and remembers which were asked.
type allOn struct{ asked *[]string }

func (g allOn) Enabled(key string) bool { *g.asked = append(*g.asked, key); return true }

func main() {
	var out []feature
	for _, f := range features.AllFeatures {
		v := reflect.ValueOf(f)
		discover := v.MethodByName("Discover")
		cfg := reflect.New(discover.Type().In(0).Elem())
		var asked []string
		cfg.Elem().FieldByName("FeatureGates").Set(reflect.ValueOf(allOn{asked: &asked}))
		found := discover.Call([]reflect.Value{cfg})[0].Bool()
		sort.Strings(asked)
		entry := feature{Name: f.Name(), Gates: asked, Discoverable: found}
		if max := f.MaxVersion(); max != nil {
			entry.MaxVersion = max.String()
		}
		out = append(out, entry)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
