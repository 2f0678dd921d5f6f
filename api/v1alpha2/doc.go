// Package v1alpha2 holds the JobSet API, jobset.x-k8s.io/v1alpha2, wire-compatible with upstream
// JobSet v0.12: the same group, kind, field names, enums, defaults and CEL rules, so that a
// manifest written for a cluster with JobSet is accepted here unchanged and means the same.
//
// It holds types and their generated code only; defaulting and validation beyond what the CRD
// schema expresses belong to the controller's admission webhook.
//
// +kubebuilder:object:generate=true
// +groupName=jobset.x-k8s.io
package v1alpha2

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is jobset.x-k8s.io/v1alpha2.
	GroupVersion = schema.GroupVersion{Group: "jobset.x-k8s.io", Version: "v1alpha2"}

	// SchemeBuilder registers the JobSet types.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the JobSet types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
