package validate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
	"github.com/restartbed/restartbed/builtins"
	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/scenarios"
	"github.com/restartbed/restartbed/timing"
)

// DrillOptions tune a drill.
type DrillOptions struct {
	// Timeout bounds the wait for the pods to run and the wait for the group restart, each.
	Timeout time.Duration
	// Timing is the timing profile (default realistic: the question is how long a cluster takes).
	Timing string
	// AgentBinary, if set, is a host executable (an absolute path) run as the agent containers
	// instead of restartbed's builtin agent: the drill then allows host binaries
	// (docs/host-binaries.md).
	AgentBinary string
}

// DrillResult is the outcome of a drill.
type DrillResult struct {
	// Skipped says why the drill did not run ("" when it ran).
	Skipped string `json:"skipped,omitempty"`
	JobSet  string `json:"jobSet,omitempty"`
	Pods    int    `json:"pods,omitempty"`
	// Worker is the pod/container that was made to exit, with ExitCode.
	Worker   string `json:"worker,omitempty"`
	ExitCode int32  `json:"exitCode,omitempty"`
	// Completed says whether every pod ran again at the next restart attempt within the timeout.
	Completed bool `json:"completed"`
	// GroupRestart is the time from the worker's exit to every worker running again.
	GroupRestart time.Duration `json:"groupRestartNanoseconds,omitempty"`
	// Recreated counts the pods replaced rather than restarted in place; -1 when the drill did
	// not get that far.
	Recreated int    `json:"recreated"`
	Timing    string `json:"timing,omitempty"`
	// Report is the step-by-step report of the run, with the pod table when a step failed.
	Report string `json:"report,omitempty"`
}

// Passed reports whether the drill ran and the group restart completed.
func (r *DrillResult) Passed() bool { return r.Skipped == "" && r.Completed }

func (r *DrillResult) String() string {
	switch {
	case r.Skipped != "":
		return "drill: skipped: " + r.Skipped
	case r.Completed:
		how := "in place"
		if r.Recreated > 0 {
			how = fmt.Sprintf("with %d of %d pods recreated", r.Recreated, r.Pods)
		}
		return fmt.Sprintf("drill: JobSet %s, %d pods (%s timing): %s exited %d; the group restart completed %s in %s",
			r.JobSet, r.Pods, r.Timing, r.Worker, r.ExitCode, how, r.GroupRestart.Round(10*time.Millisecond))
	default:
		return fmt.Sprintf("drill: JobSet %s, %d pods (%s timing): the group restart did not complete:\n%s", r.JobSet, r.Pods, r.Timing, r.Report)
	}
}

// Drill step indexes (0-based) in the generated scenario.
const (
	drillStepRunning = iota
	drillStepCapture
	drillStepExit
	drillStepRestart
)

// drill runs the accepted manifests on emulated nodes, makes one worker of the first
// InPlaceRestart JobSet exit with a code its rules restart the pod for, and times the group
// restart, through a generated scenario.
func drill(ctx context.Context, docs []*Document, opts DrillOptions, base envtest.Options, errs int) *DrillResult {
	if errs > 0 {
		return &DrillResult{Skipped: "the manifests have errors; fix them first"}
	}
	var js *jobsetv1alpha2.JobSet
	var objects []scenarios.Object
	for _, d := range docs {
		objects = append(objects, scenarios.Object{Unstructured: d.Object, File: d.File, Line: d.Line})
		if d.Kind() != "JobSet" || js != nil {
			continue
		}
		var candidate jobsetv1alpha2.JobSet
		if runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, &candidate) == nil &&
			candidate.Spec.FailurePolicy != nil && candidate.Spec.FailurePolicy.RestartStrategy == jobsetv1alpha2.InPlaceRestart {
			js = &candidate
		}
	}
	if js == nil {
		return &DrillResult{Skipped: "no JobSet with restartStrategy InPlaceRestart among the manifests"}
	}
	objects = append(objects, missingServiceAccounts(js, docs)...)
	if opts.Timing == "" {
		opts.Timing = timing.Realistic().Name
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 3 * time.Minute
	}
	plan := planDrill(js)
	res := &DrillResult{JobSet: js.Name, Pods: plan.pods, ExitCode: plan.exitCode, Timing: opts.Timing, Recreated: -1,
		Worker: fmt.Sprintf("container %s of the first pod of replicated Job %s", plan.worker, plan.replicatedJob)}
	data, err := yaml.Marshal(plan.scenario(js, opts))
	if err != nil {
		return &DrillResult{Skipped: err.Error()}
	}
	sc, err := scenarios.Parse("drill", data)
	if err != nil {
		return &DrillResult{Skipped: "building the drill: " + err.Error()}
	}
	sc.Objects = objects
	var report strings.Builder
	run := scenarios.Run(ctx, sc, scenarios.RunOptions{Progress: &report, AllowHostBinaries: opts.AgentBinary != "", Configure: func(o *envtest.Options) {
		o.Assets, o.Logger, o.ControlPlaneOutput = base.Assets, base.Logger, base.ControlPlaneOutput
		o.FeatureGates, o.KubernetesVersion = base.FeatureGates, base.KubernetesVersion
	}})
	res.Report = report.String()
	if len(run.Steps) > drillStepRestart && run.Steps[drillStepRestart].Status == scenarios.Passed {
		res.Completed = true
		res.GroupRestart = run.Steps[drillStepRestart].Took
	}
	if n, ok := run.Captured["recreated"].(int64); ok {
		res.Recreated = int(n)
	}
	return res
}

// drillPlan is what the drill needs to know about the JobSet.
type drillPlan struct {
	pods          int
	pools         []map[string]any
	agents        []string
	replicatedJob string
	worker        string
	exitCode      int32
}

// planDrill sizes the node pools (one node per pod, with each replicated Job's node selector as
// labels), finds the agents and picks the worker to crash: the first regular container of the
// replicated Job whose pods sort first, with the first exit code that restarts all containers.
func planDrill(js *jobsetv1alpha2.JobSet) drillPlan {
	var p drillPlan
	first := slices.MinFunc(js.Spec.ReplicatedJobs, func(a, b jobsetv1alpha2.ReplicatedJob) int { return strings.Compare(a.Name, b.Name) })
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		perJob := int32(1)
		if par := rj.Template.Spec.Parallelism; par != nil {
			perJob = *par
		}
		count := int(rj.Replicas * perJob)
		p.pods += count
		spec := &rj.Template.Spec.Template.Spec
		pool := map[string]any{"name": fmt.Sprintf("pool-%d", i), "count": max(count, 1)}
		if len(spec.NodeSelector) > 0 {
			pool["labels"] = spec.NodeSelector
		}
		p.pools = append(p.pools, pool)
		agents := findAgents(spec)
		for _, a := range agents {
			if !slices.Contains(p.agents, a.c.Name) {
				p.agents = append(p.agents, a.c.Name)
			}
		}
		if rj.Name != first.Name {
			continue
		}
		p.replicatedJob = rj.Name
		for j := range spec.Containers {
			c := &spec.Containers[j]
			if slices.ContainsFunc(agents, func(a agentRef) bool { return a.c == c }) {
				continue
			}
			p.worker, p.exitCode = c.Name, 1
			for code := int32(1); code <= 255; code++ {
				if rules.RestartsAll(c, code) {
					p.exitCode = code
					break
				}
			}
			break
		}
	}
	return p
}

// scenario renders the drill as a restartbed scenario.
func (p drillPlan) scenario(js *jobsetv1alpha2.JobSet, opts DrillOptions) map[string]any {
	namespace := js.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	var programs []map[string]any
	for _, name := range p.agents {
		if opts.AgentBinary != "" {
			programs = append(programs, map[string]any{"container": name, "binary": opts.AgentBinary})
			continue
		}
		programs = append(programs, map[string]any{"container": name, "builtin": builtins.Agent})
	}
	live := fmt.Sprintf(`pods.filter(p, p.metadata.labels[%q] == %q && !has(p.metadata.deletionTimestamp) && !(p.status.phase in ["Failed", "Succeeded"]))`,
		jobsetv1alpha2.JobSetNameKey, js.Name)
	allRunning := fmt.Sprintf(`%s.size() == %d && %s.all(p, has(p.status.containerStatuses) && p.status.containerStatuses.all(c, has(c.state.running)))`,
		live, p.pods, live)
	attempt := func(n int) string {
		return fmt.Sprintf(`jobsets.exists(j, j.metadata.name == %q && has(j.status.currentInPlaceRestartAttempt) && j.status.currentInPlaceRestartAttempt == %d)`, js.Name, n)
	}
	timeout := opts.Timeout.String()
	return map[string]any{
		"apiVersion": scenarios.APIVersion,
		"kind":       scenarios.Kind,
		"metadata":   map[string]any{"name": "drill"},
		"spec": map[string]any{
			"description": "restartbed validate --drill",
			"namespace":   namespace,
			"timing":      opts.Timing,
			"nodes":       p.pools,
			"programs":    programs,
			"steps": []map[string]any{
				drillStepRunning: {"name": "every pod runs behind a lifted barrier", "waitFor": allRunning + " && " + attempt(0), "timeout": timeout},
				drillStepCapture: {"capture": map[string]any{"uids": live + ".map(p, p.metadata.uid)"}},
				drillStepExit: {"name": fmt.Sprintf("worker %s exits %d", p.worker, p.exitCode), "exitContainer": map[string]any{
					"pod":       map[string]any{"selector": fmt.Sprintf("%s=%s,%s=%s", jobsetv1alpha2.JobSetNameKey, js.Name, jobsetv1alpha2.ReplicatedJobNameKey, p.replicatedJob), "index": 0},
					"container": p.worker, "exitCode": p.exitCode}},
				drillStepRestart: {"name": "the group restarts and every worker runs again", "waitFor": allRunning + " && " + attempt(1), "timeout": timeout},
				{"capture": map[string]any{"recreated": live + ".filter(p, !(p.metadata.uid in captured.uids)).size()"}},
			},
		},
	}
}

// missingServiceAccounts are the service accounts the JobSet's pods name that the files do not
// hold. A cluster refuses those pods until the accounts exist (readiness warns about each); the
// drill creates them, empty, so that it measures the restart rather than stopping there.
func missingServiceAccounts(js *jobsetv1alpha2.JobSet, docs []*Document) []scenarios.Object {
	have := map[string]bool{}
	for _, d := range docs {
		if d.Kind() == "ServiceAccount" && d.Object != nil {
			have[nsName(d.Object.GetNamespace(), d.Object.GetName())] = true
		}
	}
	var objs []scenarios.Object
	for _, rj := range js.Spec.ReplicatedJobs {
		name := rj.Template.Spec.Template.Spec.ServiceAccountName
		if name == "" || name == "default" || have[nsName(js.Namespace, name)] {
			continue
		}
		have[nsName(js.Namespace, name)] = true
		sa := &unstructured.Unstructured{}
		sa.SetAPIVersion("v1")
		sa.SetKind("ServiceAccount")
		sa.SetName(name)
		sa.SetNamespace(js.Namespace)
		objs = append(objs, scenarios.Object{Unstructured: sa, File: "drill: service account " + name + " of JobSet " + js.Name})
	}
	return objs
}
