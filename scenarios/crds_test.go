package scenarios

import (
	"errors"
	"strings"
	"testing"
)

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.restartbed.dev
spec:
  group: example.restartbed.dev
  scope: Namespaced
  names: {kind: Widget, plural: widgets}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// A directory in kubebuilder's layout: the CRDs are read, a kustomization and what is not
// YAML or JSON are skipped, subdirectories are not entered.
func TestReadCRDsOfADirectory(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "kustomization.yaml", "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [widgets.yaml]\n")
	write(t, dir, "widgets.yaml", "# the widgets\n"+widgetCRD+"---\n"+strings.ReplaceAll(widgetCRD, "widget", "gadget"))
	write(t, dir, "README.md", "not: [yaml")
	write(t, dir, "patches/broken.yaml", "not: [yaml")
	crds, err := ReadCRDs(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range crds {
		names = append(names, c.Name+"/"+c.Spec.Names.Kind)
	}
	if got := strings.Join(names, " "); got != "widgets.example.restartbed.dev/Widget gadgets.example.restartbed.dev/Widget" {
		t.Errorf("read %s", got)
	}
}

func TestReadCRDsSaysWhatIsWrongAndWhere(t *testing.T) {
	for _, tc := range []struct {
		name, file, content, want string
	}{
		{"unknown field", "crd.yaml", strings.Replace(widgetCRD, "  scope: Namespaced\n", "  scope: Namespaced\n  scop: typo\n", 1),
			`crd.yaml:1: CustomResourceDefinition: error unmarshaling JSON: while decoding JSON: json: unknown field "scop"`},
		{"second document", "crd.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\n" + strings.Replace(widgetCRD, "  name: widgets", "  nam: widgets", 1),
			`crd.yaml:5: CustomResourceDefinition: error unmarshaling JSON: while decoding JSON: json: unknown field "nam"`},
		{"v1beta1", "crd.yaml", strings.Replace(widgetCRD, "apiextensions.k8s.io/v1\n", "apiextensions.k8s.io/v1beta1\n", 1),
			"crd.yaml:1: CustomResourceDefinition must be apiextensions.k8s.io/v1, got apiextensions.k8s.io/v1beta1"},
		{"no name", "crd.yaml", strings.Replace(widgetCRD, "  name: widgets.example.restartbed.dev\n", "  labels: {}\n", 1),
			"crd.yaml:1: metadata.name: required"},
		{"bad YAML", "crd.yaml", "apiVersion: [\n", "crd.yaml:1: did not find expected node content"},
		{"no CRD", "crd.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "crd.yaml: no CustomResourceDefinition (apiextensions.k8s.io/v1) in it"},
		{"not YAML or JSON", "crd.txt", widgetCRD, "crd.txt: no CustomResourceDefinition (apiextensions.k8s.io/v1) in it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := write(t, dir, tc.file, tc.content)
			if tc.name == "not YAML or JSON" {
				// A file named on its own is read whatever its extension; only a directory's
				// files are chosen by it.
				if _, err := ReadCRDs(path); err != nil {
					t.Fatalf("a file named on its own: %v", err)
				}
				path = dir
				tc.want = "no CustomResourceDefinition (apiextensions.k8s.io/v1) in its .yaml, .yml and .json files"
			}
			_, err := ReadCRDs(path)
			var invalid *InvalidError
			if !errors.As(err, &invalid) {
				t.Fatalf("want an *InvalidError, got %v", err)
			}
			if got := strings.ReplaceAll(err.Error(), dir+"/", ""); !strings.Contains(got, tc.want) {
				t.Errorf("got:\n%s\nwant it to contain:\n%s", got, tc.want)
			}
		})
	}
	if _, err := ReadCRDs("/no/such/dir"); err == nil || !strings.Contains(err.Error(), "/no/such/dir: cannot read") {
		t.Errorf("a missing path: %v", err)
	}
}

// A scenario's CRD objects go to the cluster's options, installed before the controller-manager;
// a bad one is a problem at its manifest.
func TestScenarioCRDs(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "manifests/jobset.yaml", manifest+"---\n"+widgetCRD)
	sc, err := Load(write(t, dir, "s.yaml", valid))
	if err != nil {
		t.Fatal(err)
	}
	opts, err := sc.ClusterOptions()
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.CRDs) != 1 || opts.CRDs[0].Name != "widgets.example.restartbed.dev" {
		t.Errorf("cluster options' CRDs: %v", opts.CRDs)
	}

	write(t, dir, "manifests/jobset.yaml", manifest+"---\n"+strings.Replace(widgetCRD, "  scope: Namespaced\n", "  scope: Namespaced\n  scop: typo\n", 1))
	_, err = Load(write(t, dir, "s.yaml", valid))
	if want := `manifests/jobset.yaml:9: CustomResourceDefinition widgets.example.restartbed.dev: strict decoding error: unknown field "spec.scop"`; err == nil ||
		!strings.Contains(strings.ReplaceAll(err.Error(), dir+"/", ""), want) {
		t.Errorf("got %v, want it to contain %q", err, want)
	}
}
