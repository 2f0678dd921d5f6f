package crd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCRDs(t *testing.T) {
	crds, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range crds {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"jobsets.jobset.x-k8s.io"}, names); diff != "" {
		t.Errorf("CRD names (-want +got):\n%s", diff)
	}
	js := crds[0].Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["failurePolicy"].Properties["restartStrategy"]
	var enum []string
	for _, e := range js.Enum {
		enum = append(enum, string(e.Raw))
	}
	if diff := cmp.Diff([]string{`"Recreate"`, `"BlockingRecreate"`, `"InPlaceRestart"`}, enum); diff != "" {
		t.Errorf("restartStrategy enum (-want +got):\n%s", diff)
	}
	if got := string(js.Default.Raw); got != `"Recreate"` {
		t.Errorf("restartStrategy default = %s, want \"Recreate\"", got)
	}
}
