package validate

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
	"github.com/restartbed/restartbed/controller"
	"github.com/restartbed/restartbed/envtest"
)

// FieldManager is the field manager of validate's dry-run requests.
const FieldManager = "restartbed-validate"

// dryRunner sends documents to the embedded apiserver with dryRun=All and strict field
// validation, and reports what it refuses in its own words.
type dryRunner struct {
	cluster    *envtest.Cluster
	dyn        dynamic.Interface
	add        func(Finding)
	namespaces map[string]bool
}

func newDryRunner(cluster *envtest.Cluster, add func(Finding)) (*dryRunner, error) {
	dyn, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		return nil, err
	}
	return &dryRunner{cluster: cluster, dyn: dyn, add: add, namespaces: map[string]bool{}}, nil
}

// run dry-runs one document and reports whether the apiserver accepted it.
func (r *dryRunner) run(ctx context.Context, d *Document) bool {
	u := d.Object.DeepCopy()
	gvk := u.GroupVersionKind()
	mapping, err := r.cluster.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		r.add(d.finding(Warning, CheckApiserver, "kind",
			fmt.Sprintf("%s %s is not served by a 1.35 apiserver with JobSet v0.12 installed (is its CRD among the files?); not checked", u.GetAPIVersion(), u.GetKind())))
		return false
	}
	ri := dynamic.ResourceInterface(r.dyn.Resource(mapping.Resource))
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			u.SetNamespace(metav1.NamespaceDefault)
		}
		if err := r.ensureNamespace(ctx, u.GetNamespace()); err != nil {
			r.add(d.finding(Error, CheckApiserver, "metadata.namespace", err.Error()))
			return false
		}
		ri = r.dyn.Resource(mapping.Resource).Namespace(u.GetNamespace())
	}
	created, err := ri.Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: FieldManager,
		FieldValidation: metav1.FieldValidationStrict})
	if err != nil {
		r.refused(d, err, func(p string) string { return p }, "")
		return false
	}
	if u.GetKind() == "JobSet" && gvk.Group == jobsetv1alpha2.GroupVersion.Group {
		r.childJobs(ctx, d, created)
	}
	return true
}

// ensureNamespace creates a namespace the objects name, for real: a dry-run create needs it.
func (r *dryRunner) ensureNamespace(ctx context.Context, name string) error {
	if r.namespaces[name] {
		return nil
	}
	if err := r.cluster.EnsureNamespace(ctx, name); err != nil {
		return err
	}
	r.namespaces[name] = true
	return nil
}

// childJobs dry-runs the first Job of each replicated Job as the JobSet controller would create
// it from the JobSet as admitted (webhook defaults applied): the apiserver checks a Job's pod
// template more strictly than JobSet's CRD, and such problems otherwise surface only as events
// after the JobSet was accepted.
func (r *dryRunner) childJobs(ctx context.Context, d *Document, created *unstructured.Unstructured) {
	var js jobsetv1alpha2.JobSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(created.Object, &js); err != nil {
		return
	}
	jobs := controller.ChildJobs(&js, controller.DefaultFeatureGates())
	seen := map[string]bool{}
	for _, job := range jobs {
		rj := job.Labels[jobsetv1alpha2.ReplicatedJobNameKey]
		if seen[rj] {
			continue
		}
		seen[rj] = true
		index := -1
		for i := range js.Spec.ReplicatedJobs {
			if js.Spec.ReplicatedJobs[i].Name == rj {
				index = i
			}
		}
		job.OwnerReferences = nil // the JobSet was not stored
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(job)
		if err != nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		u.SetAPIVersion("batch/v1")
		u.SetKind("Job")
		_, err = r.dyn.Resource(batchJobs).Namespace(job.Namespace).Create(ctx, u,
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: FieldManager})
		if err == nil {
			continue
		}
		prefix := fmt.Sprintf("spec.replicatedJobs[%d].template.", index)
		r.refused(d, err, func(p string) string {
			if strings.HasPrefix(p, "spec.") {
				return prefix + p
			}
			return p
		}, fmt.Sprintf("JobSet accepts this, but the controller's Job %s would be refused (the JobSet fails with JobCreationFailed): ", job.Name))
	}
}

// unknownField is how strict field validation names a field it does not know.
var unknownField = regexp.MustCompile(`unknown field "([^"]+)"`)

// refused reports an apiserver refusal, one finding per cause, each at the line of its field.
func (r *dryRunner) refused(d *Document, err error, mapPath func(string) string, prefix string) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		r.add(d.finding(Error, CheckApiserver, "", prefix+err.Error()))
		return
	}
	s := status.Status()
	if s.Details == nil || len(s.Details.Causes) == 0 {
		if m := unknownField.FindAllStringSubmatch(s.Message, -1); m != nil {
			for _, g := range m {
				path := mapPath(g[1])
				r.add(d.finding(Error, CheckApiserver, path, prefix+"unknown field (strict decoding)"))
			}
			return
		}
		r.add(d.finding(Error, CheckApiserver, "", prefix+s.Message))
		return
	}
	for _, c := range s.Details.Causes {
		path := mapPath(c.Field)
		r.add(d.finding(Error, CheckApiserver, path, prefix+c.Message+releasedFix(path, c.Message)))
	}
}

// releasedFix adds, to apiserver messages the seeds' manifests provoke, what a released cluster
// expects instead.
func releasedFix(path, msg string) string {
	switch {
	case strings.HasSuffix(path, ".restartPolicy") && strings.Contains(msg, "podFailurePolicy"):
		return " — JobSet's webhook sets an empty pod restartPolicy to OnFailure; set restartPolicy: Never in the pod template"
	case strings.Contains(path, "spec.resources") && !strings.Contains(path, "containers"):
		return " — pod-level resources take cpu, memory and hugepages only; request extended resources such as google.com/tpu as container limits"
	}
	return ""
}
