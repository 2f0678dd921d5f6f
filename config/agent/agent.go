// Package agent holds the manifests the in-place-restart agent needs in a cluster — its service
// account, Role and RoleBinding (rbac.yaml, per namespace) and the ValidatingAdmissionPolicy that
// confines its pod patches to the attempt annotation (policy.yaml, cluster-wide) — embedded so
// that tests and tools apply exactly the files users apply.
package agent

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

var (
	//go:embed rbac.yaml
	rbacYAML []byte
	//go:embed policy.yaml
	policyYAML []byte
)

// ServiceAccountName is the agent's service account in rbac.yaml.
const ServiceAccountName = "jobset-in-place-restart"

// RBAC returns rbac.yaml's objects placed in namespace.
func RBAC(namespace string) ([]*unstructured.Unstructured, error) {
	objs, err := decode("config/agent/rbac.yaml", rbacYAML)
	for _, o := range objs {
		o.SetNamespace(namespace)
	}
	return objs, err
}

// Policy returns policy.yaml's objects.
func Policy() ([]*unstructured.Unstructured, error) {
	return decode("config/agent/policy.yaml", policyYAML)
}

func decode(name string, data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}
