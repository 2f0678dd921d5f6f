package yamlpath

import (
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestStepsAndFind(t *testing.T) {
	for path, want := range map[string][]any{
		"spec.replicatedJobs[0].template":         {"spec", "replicatedJobs", 0, "template"},
		"spec.resources.requests[google.com/tpu]": {"spec", "resources", "requests", "google.com/tpu"},
		"metadata.annotations[a.b/c].x":           {"metadata", "annotations", "a.b/c", "x"},
		"":                                        nil,
	} {
		if got := Steps(path); !reflect.DeepEqual(got, want) {
			t.Errorf("Steps(%q) = %#v, want %#v", path, got, want)
		}
	}
	var doc yaml.Node
	src := "spec:\n  list:\n  - a: 1\n  - b:\n      google.com/tpu: 4\n"
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	root := doc.Content[0]
	for path, line := range map[string]int{
		"spec.list[1].b[google.com/tpu]": 5,
		"spec.list[0].a":                 3,
		"spec.list[0].missing":           3, // the deepest ancestor that exists
		"spec.list[7]":                   3, // the list itself starts at its first item
	} {
		if got := Find(root, path).Line; got != line {
			t.Errorf("Find(%q) at line %d, want %d", path, got, line)
		}
	}
	if got := PathAt(root, 5, ""); got != "spec.list[1].b.google.com/tpu" {
		t.Errorf("PathAt(5) = %q", got)
	}
}
