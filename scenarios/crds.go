package scenarios

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"go.yaml.in/yaml/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/restartbed/restartbed/internal/yamlpath"
)

// crdKind is the group and kind of a CustomResourceDefinition.
var crdKind = schema.GroupKind{Group: apiextensionsv1.GroupName, Kind: "CustomResourceDefinition"}

// crdsOf decodes the CustomResourceDefinitions among a scenario's objects, each problem at its
// manifest. The cluster installs them before kube-controller-manager starts
// (envtest.Options.CRDs), so that its garbage collector and quota controllers know their kinds
// from the start; applying them again with the other objects changes nothing.
func crdsOf(objs []Object) ([]*apiextensionsv1.CustomResourceDefinition, []Problem) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	var problems []Problem
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		if gvk.GroupKind() != crdKind {
			continue
		}
		if gvk.Version != apiextensionsv1.SchemeGroupVersion.Version {
			problems = append(problems, Problem{File: obj.File, Line: obj.Line, Message: crdVersionMessage(gvk.Version)})
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, crd, true); err != nil {
			problems = append(problems, Problem{File: obj.File, Line: obj.Line, Message: fmt.Sprintf("CustomResourceDefinition %s: %v", obj.GetName(), err)})
			continue
		}
		crds = append(crds, crd)
	}
	return crds, problems
}

func crdVersionMessage(version string) string {
	return fmt.Sprintf("CustomResourceDefinition must be apiextensions.k8s.io/v1, got %s (v1beta1 is not served since Kubernetes 1.22)",
		apiextensionsv1.GroupName+"/"+version)
}

// ReadCRDs reads the CustomResourceDefinitions of a file or of a directory's .yaml, .yml and .json
// files (not its subdirectories), as controller-runtime's envtest reads CRDDirectoryPaths:
// documents of other kinds (a kustomization beside the CRDs) are skipped. Each CRD is decoded as
// the apiserver would, unknown fields refused; every problem is said with its file and line.
// A path that holds no CRD at all is a problem too.
func ReadCRDs(path string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, &InvalidError{Problems: []Problem{{File: path, Message: fmt.Sprintf("cannot read: %s", yamlpath.ReadError(err))}}}
	}
	files := []string{path}
	if info.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, &InvalidError{Problems: []Problem{{File: path, Message: fmt.Sprintf("cannot read: %s", yamlpath.ReadError(err))}}}
		}
		files = nil
		for _, e := range entries {
			if !e.IsDir() && slices.Contains([]string{".yaml", ".yml", ".json"}, filepath.Ext(e.Name())) {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	var problems []Problem
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			problems = append(problems, Problem{File: file, Message: fmt.Sprintf("cannot read: %s", yamlpath.ReadError(err))})
			continue
		}
		got, p := readCRDFile(file, data)
		crds, problems = append(crds, got...), append(problems, p...)
	}
	if len(crds) == 0 && len(problems) == 0 {
		what := "it"
		if info.IsDir() {
			what = "its .yaml, .yml and .json files"
		}
		problems = append(problems, Problem{File: path, Message: fmt.Sprintf("no CustomResourceDefinition (apiextensions.k8s.io/v1) in %s", what)})
	}
	if len(problems) > 0 {
		return nil, &InvalidError{Problems: problems}
	}
	return crds, nil
}

// readCRDFile decodes the CustomResourceDefinitions among a file's YAML (or JSON) documents.
func readCRDFile(file string, data []byte) ([]*apiextensionsv1.CustomResourceDefinition, []Problem) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	problems := eachDocument(file, data, func(content *yaml.Node) *Problem {
		if content.Kind != yaml.MappingNode || yamlpath.At(content, "kind").Value != crdKind.Kind {
			return nil
		}
		apiVersion := yamlpath.At(content, "apiVersion").Value
		if gv, err := schema.ParseGroupVersion(apiVersion); err != nil || gv.Group != crdKind.Group {
			return nil // a kind of the same name in another group
		} else if gv.Version != apiextensionsv1.SchemeGroupVersion.Version {
			return &Problem{File: file, Line: content.Line, Message: crdVersionMessage(gv.Version)}
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := decodeKubernetes(content, crd); err != nil {
			return &Problem{File: file, Line: content.Line, Message: fmt.Sprintf("CustomResourceDefinition: %v", err)}
		}
		if crd.Name == "" {
			return &Problem{File: file, Line: content.Line, Path: "metadata.name", Message: "required"}
		}
		crds = append(crds, crd)
		return nil
	})
	return crds, problems
}
