package validate

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/internal/yamlpath"
)

var batchJobs = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}

// Options tune a validation.
type Options struct {
	// DryRun sends every document to an embedded kube-apiserver of the release
	// (Cluster.KubernetesVersion) with JobSet's CRD and webhook (server-side dry-run), and each
	// JobSet's child Jobs as its controller makes them.
	DryRun bool
	// Cluster are the options of the clusters validate starts (control-plane assets, logger);
	// validate sets what it needs on top.
	Cluster envtest.Options
	// Drill, when set, runs the manifests on emulated nodes and measures a group restart.
	Drill *DrillOptions
}

// Report is the outcome of a validation.
type Report struct {
	Findings []Finding `json:"findings"`
	// Documents is how many manifests the files hold; DryRun how many the apiserver accepted.
	Documents int `json:"documents"`
	DryRun    int `json:"dryRunAccepted"`
	// DryRunSkipped says why no document was sent to the apiserver, when none was.
	DryRunSkipped string `json:"dryRunSkipped,omitempty"`
	// KubernetesVersion is the release the manifests were checked against.
	KubernetesVersion string `json:"kubernetesVersion"`
	// FeatureGates are the dry-run apiserver's gates that differ from the release's defaults
	// (restartbed's and Options.Cluster's).
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
	Drill        *DrillResult    `json:"drill,omitempty"`
}

// Count returns how many findings have the severity.
func (r *Report) Count(s Severity) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == s {
			n++
		}
	}
	return n
}

// Run validates manifest files (a directory stands for its *.yaml and *.yml files). The error is
// for what kept validate from working (a control plane that would not start), never for a problem
// in the files: those are findings.
func Run(ctx context.Context, paths []string, opts Options) (*Report, error) {
	release, err := controlplane.ResolveRelease(opts.Cluster.KubernetesVersion)
	if err != nil {
		return nil, err
	}
	rep := &Report{KubernetesVersion: release.Kubernetes}
	add := func(f Finding) { rep.Findings = append(rep.Findings, f) }
	docs := load(paths, add)
	rep.Documents = len(docs)
	checkReadiness(docs, add)
	defer func() { rep.Findings = append([]Finding{}, sortFindings(rep.Findings)...) }()

	switch {
	case !opts.DryRun:
		rep.DryRunSkipped = "turned off"
		return rep, nil
	case len(docs) == 0:
		rep.DryRunSkipped = "no manifest could be read"
		return rep, nil
	}
	clusterOpts := opts.Cluster
	clusterOpts.JobSet = true
	clusterOpts.DisableControllerManager = true
	cluster, err := envtest.Start(ctx, clusterOpts)
	if err != nil {
		return rep, fmt.Errorf("starting the apiserver for the dry-run: %w", err)
	}
	defer func() { _ = cluster.Stop() }()
	rep.FeatureGates = envtest.ChangedFeatureGates(cluster.Release, cluster.FeatureGates)
	dr, err := newDryRunner(cluster, add)
	if err != nil {
		return rep, err
	}
	accepted := make([]*Document, 0, len(docs))
	for _, d := range docs {
		if d.Object != nil && dr.run(ctx, d) {
			accepted = append(accepted, d)
		}
	}
	rep.DryRun = len(accepted)
	if opts.Drill != nil {
		rep.Drill = drill(ctx, accepted, *opts.Drill, opts.Cluster, rep.Count(Error))
	}
	return rep, nil
}

// load reads every file and runs the checks that need no cluster, each on its document.
func load(paths []string, add func(Finding)) []*Document {
	files, problems := yamlpath.Files(paths)
	for _, p := range problems {
		add(Finding{File: p.Path, Severity: Error, Check: CheckParse, Message: p.Message})
	}
	scheme, err := envtest.NewScheme()
	if err != nil {
		panic(err) // the scheme is built from compiled-in types
	}
	letters := map[string]int{}
	var docs []*Document
	for _, f := range files {
		for _, d := range readDocuments(f, add) {
			d.Fixed = copyNode(d.Root)
			// The draft check runs first (it reshapes rules the schema would call unknown) and
			// its paths are as written; they are reported with the schema's renames applied.
			var drafts []Finding
			dropRules := checkDrafts(d, func(f Finding) { drafts = append(drafts, f) })
			renames := checkSchema(d, scheme, letters, add)
			dropRules()
			for _, f := range drafts {
				f.Path = renamePath(f.Path, renames)
				add(f)
			}
			if obj, err := toObject(d.Fixed); err == nil {
				d.Object = obj
			}
			docs = append(docs, d)
		}
	}
	return docs
}
