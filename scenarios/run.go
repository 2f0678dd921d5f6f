package scenarios

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/timing"
)

// FieldManager is the field owner of what a scenario applies.
const FieldManager = "restartbed-scenario"

// reevaluateEvery bounds how long a waitFor that reads only `elapsed` waits past its moment
// when no object changes.
const reevaluateEvery = 100 * time.Millisecond

// RunOptions configure Run.
type RunOptions struct {
	// Progress receives the report as it goes: a header, one line per step, failure details and
	// a summary. Nil: nothing.
	Progress io.Writer
	// Trace receives every observed object change as a JSON line. Nil: nothing.
	Trace io.Writer
	// Configure adjusts the cluster's options before it starts (control-plane assets, logs).
	Configure func(*envtest.Options)
	// Clock is the scenario clock: the cluster's components run on it, and steps, reports and
	// the wall time read it. Default: the real clock.
	Clock clock.WithTicker
	// Started runs once the cluster is up, before the scenario's objects are applied: start your
	// own controller against it here (with Configure turning restartbed's off). Its error fails
	// the run. Its ctx is cancelled after the steps, before the cluster stops: whatever it
	// started must let go of the apiserver then, or the apiserver's shutdown waits for it.
	Started func(ctx context.Context, cluster *envtest.Cluster) error
	// AllowHostBinaries lets the scenario's programs run host executables (spec.programs[].binary);
	// without it such a scenario fails with an *InvalidError before anything starts.
	AllowHostBinaries bool
	// KubeletCommand is the restartbed binary (and any arguments before its subcommand) that a
	// scenario with spec.kubelets runs its kubelet processes with: restartbed run's own
	// executable. Such a scenario fails without it.
	KubeletCommand []string
	// Host runs the scenario as a tenant of this shared control plane (envtest.Options.Tenants,
	// envtest.Cluster.Tenant) instead of on a cluster of its own: its nodes and a namespace of
	// its own (spec.namespace's name with a suffix, where its objects and expressions find
	// their namespace's objects) on the host's control plane, removed when it ends. It must be
	// one that can share (Scenario.Shares) and ask for the host's release, timing profile and
	// gates; otherwise it fails with an error before anything starts.
	Host *envtest.Cluster
}

// Status is the outcome of a step.
type Status string

// Step outcomes.
const (
	Passed  Status = "PASS"
	Failed  Status = "FAIL"
	Skipped Status = "SKIP"
)

// StepResult is what became of one step.
type StepResult struct {
	// Index counts from 1, as the report shows it.
	Index int
	Title string
	Status
	// Took is the scenario time the step took; At is the scenario time when it ended.
	Took, At time.Duration
	// Failure explains a failed step: what was expected, the last evaluation error, the pods.
	Failure string
}

// Result is what became of a scenario.
type Result struct {
	Scenario *Scenario
	Steps    []StepResult
	// Err is a failure outside the steps: the cluster did not start, an object was refused.
	Err error
	// Wall is the wall time of the whole run, cluster start-up included.
	Wall time.Duration
	// Captured are the values the capture steps stored, by key.
	Captured map[string]any
	// Violations are the invariants the run broke (spec.invariants), the first of each; the
	// run stops at the first.
	Violations []Violation
	// Triggers are what became of spec.triggers, in their order.
	Triggers []TriggerResult
}

// Passed reports whether the scenario passed.
func (r *Result) Passed() bool {
	if r.Err != nil || len(r.Violations) > 0 {
		return false
	}
	for _, s := range r.Steps {
		if s.Status != Passed {
			return false
		}
	}
	for _, t := range r.Triggers {
		for _, s := range t.Steps {
			if s.Status != Passed {
				return false
			}
		}
	}
	return true
}

// ClusterOptions are the envtest options a scenario asks for. Load has checked them; a
// scenario built otherwise can name an unknown timing profile, which is an error here.
func (sc *Scenario) ClusterOptions() (envtest.Options, error) {
	profile, err := timing.ByName(sc.Spec.Timing)
	if err != nil {
		return envtest.Options{}, fmt.Errorf("spec.timing: %w", err)
	}
	opts := envtest.Options{KubernetesVersion: sc.Spec.KubernetesVersion, FeatureGates: sc.Spec.FeatureGates, Timing: &profile, JobSet: true, Nodes: sc.poolsIn(sc.Spec.Namespace),
		CRDs: sc.CRDs}
	if k := sc.Spec.Controllers.KueueFailureRecovery; k != nil && k.Enabled {
		opts.KueueFailureRecovery = &envtest.KueueFailureRecovery{}
		if k.Threshold != nil {
			opts.KueueFailureRecovery.Threshold = k.Threshold.Duration
		}
	}
	for _, p := range sc.Spec.Programs {
		opts.Programs = append(opts.Programs, p.rule())
	}
	for _, img := range sc.Spec.Images {
		opts.Images = append(opts.Images, img.rule())
	}
	opts.ImageCommands = sc.Spec.ImageCommands
	return opts, nil
}

// inKubeletProcesses turns the cluster's options into spec.kubelets' form: the nodes in kubelet
// processes run with command, which take the nodes, timing, programs and images from the
// scenario's file (restartbed kubelet --from).
func (sc *Scenario) inKubeletProcesses(opts *envtest.Options, command []string, clk clock.WithTicker, allowHostBinaries bool) error {
	k := sc.Spec.Kubelets
	if len(command) == 0 {
		return errors.New("spec.kubelets: no kubelet command to run the processes with (restartbed run sets it; the library: RunOptions.KubeletCommand)")
	}
	if clk != nil {
		return errors.New("spec.kubelets: the kubelet processes run on the real clock, not RunOptions.Clock")
	}
	if fi, err := os.Stat(sc.File); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("spec.kubelets: the kubelet processes read the scenario from its file, and %q is not one", sc.File)
	}
	file, err := filepath.Abs(sc.File)
	if err != nil {
		return err
	}
	opts.KubeletProcesses, opts.KubeletCommand = k.Processes, command
	opts.KubeletArgs = []string{"--from", file}
	if k.Takeover {
		opts.KubeletArgs = append(opts.KubeletArgs, "--takeover")
	}
	if allowHostBinaries {
		opts.KubeletArgs = append(opts.KubeletArgs, "--allow-host-binaries")
	}
	opts.Programs, opts.Images, opts.ImageCommands = nil, nil, false
	return nil
}

// Run runs a loaded scenario on a fresh cluster and stops the cluster before it returns.
func Run(ctx context.Context, sc *Scenario, opts RunOptions) *Result {
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	wallStart := clk.Now()
	res := &Result{Scenario: sc}
	rep := &reporter{w: opts.Progress, sc: sc}
	rep.header()
	defer func() {
		res.Wall = clk.Since(wallStart)
		rep.summary(res)
	}()
	if problems := sc.HostBinaryProblems(); len(problems) > 0 && !opts.AllowHostBinaries {
		res.Err = &InvalidError{Problems: problems}
		res.skipAll(0)
		return res
	}
	clusterOpts, err := sc.ClusterOptions()
	if err != nil {
		res.Err = fmt.Errorf("%s: %w", sc.File, err)
		res.skipAll(0)
		return res
	}
	if sc.Spec.Kubelets != nil {
		if err := sc.inKubeletProcesses(&clusterOpts, opts.KubeletCommand, opts.Clock, opts.AllowHostBinaries); err != nil {
			res.Err = fmt.Errorf("%s: %w", sc.File, err)
			res.skipAll(0)
			return res
		}
	} else {
		clusterOpts.Clock = clk
		clusterOpts.AllowHostBinaries = opts.AllowHostBinaries
	}
	if opts.Configure != nil {
		opts.Configure(&clusterOpts)
	}
	var cluster *envtest.Cluster
	if opts.Host != nil {
		if why := sc.Shares(); why != "" {
			err = fmt.Errorf("%s: this scenario cannot share a control plane: %s", sc.File, why)
		} else {
			ns := tenantNamespace(sc)
			clusterOpts.Nodes = sc.poolsIn(ns)
			cluster, err = opts.Host.Tenant(ctx, ns, clusterOpts)
		}
	} else {
		cluster, err = envtest.Start(ctx, clusterOpts)
	}
	if err != nil {
		res.Err = fmt.Errorf("starting the cluster: %w", err)
		res.skipAll(0)
		return res
	}
	defer func() {
		if err := cluster.Stop(); err != nil && res.Err == nil {
			res.Err = fmt.Errorf("stopping the cluster: %w", err)
		}
	}()
	if opts.Started != nil {
		startedCtx, stopStarted := context.WithCancel(ctx)
		defer stopStarted() // before the cluster stops
		if err := opts.Started(startedCtx, cluster); err != nil {
			res.Err = fmt.Errorf("after the cluster started: %w", err)
			res.skipAll(0)
			return res
		}
	}
	// The watches end before the cluster stops, so that the apiserver has no request to drain.
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	r := &runner{sc: sc, cluster: cluster, ns: cmp.Or(cluster.Namespace(), sc.Spec.Namespace),
		obs: newObserver(cluster.Clock, opts.Trace, newRunVariables(sc, cluster.Timing, cluster.Release.Kubernetes)), rep: rep}
	// The steps and triggers run under stepsCtx, which the first broken invariant ends.
	stepsCtx, stopSteps := context.WithCancel(ctx)
	defer stopSteps()
	if j := newJudge(sc); j.active() {
		j.onViolation = stopSteps
		r.obs.judge = j
	}
	if err := r.setUp(ctx, watchCtx); err != nil {
		res.Err = err
		res.skipAll(0)
		return res
	}
	r.obs.mu.Lock()
	r.obs.start = cluster.Clock.Now()
	r.obs.mu.Unlock()
	armCtx, disarm := context.WithCancel(stepsCtx)
	defer disarm()
	waitTriggers := r.runTriggers(stepsCtx, armCtx, sc.Spec.Triggers)
	for i := range sc.Spec.Steps {
		step := &sc.Spec.Steps[i]
		began := cluster.Clock.Now()
		failure := step.run(stepsCtx, r)
		if failure != "" && stepsCtx.Err() != nil && ctx.Err() == nil {
			failure = "interrupted: an invariant was broken"
		}
		sr := StepResult{Index: i + 1, Title: step.title(), Status: Passed, Took: cluster.Clock.Since(began),
			At: cluster.Clock.Since(r.obs.start), Failure: failure}
		if failure != "" {
			sr.Status = Failed
		}
		res.Steps = append(res.Steps, sr)
		rep.step(sr)
		if sr.Status == Failed || stepsCtx.Err() != nil {
			res.skipAll(i + 1)
			break
		}
	}
	disarm()
	res.Triggers = waitTriggers()
	r.awaitRecovery(stepsCtx)
	r.obs.mu.Lock()
	res.Captured = r.obs.captured
	if j := r.obs.judge; j != nil {
		j.finish(r.obs.scenarioTimeLocked(), r.obs.recentLocked)
		res.Violations = j.violations
	}
	r.obs.mu.Unlock()
	for _, v := range res.Violations {
		rep.violation(v)
	}
	for _, t := range res.Triggers {
		if !t.Fired {
			rep.printf("TRIGGER %s never fired", t.Name)
		}
	}
	if r.obs.traceErr != nil {
		res.Err = fmt.Errorf("writing the trace: %w", r.obs.traceErr)
	}
	return res
}

// skipAll records the steps from index on as skipped.
func (r *Result) skipAll(from int) {
	for i := from; i < len(r.Scenario.Spec.Steps); i++ {
		r.Steps = append(r.Steps, StepResult{Index: i + 1, Title: r.Scenario.Spec.Steps[i].title(), Status: Skipped})
	}
}

func (t *NodeTarget) String() string {
	if t.NodeOf != nil {
		return "nodeOf " + t.NodeOf.String()
	}
	return t.Node
}

type runner struct {
	sc      *Scenario
	cluster *envtest.Cluster
	// ns is the scenario's namespace on the cluster: spec.namespace, or a tenant's own.
	ns  string
	dyn dynamic.Interface
	obs *observer
	rep *reporter
}

// setUp creates the namespace, starts watching and applies the scenario's objects.
func (r *runner) setUp(ctx, watchCtx context.Context) error {
	var err error
	if r.dyn, err = dynamic.NewForConfig(r.cluster.Config); err != nil {
		return err
	}
	if err := r.cluster.EnsureNamespace(ctx, r.ns); err != nil {
		return err
	}
	// Objects go to a cluster whose nodes all take pods, as a person would apply them.
	if err := r.cluster.WaitForSchedulableNodes(ctx); err != nil {
		return err
	}
	if err := r.obs.watch(watchCtx, r.dyn, r.cluster.Client.RESTMapper(), r.ns, r.cluster.NodeSelector()); err != nil {
		return err
	}
	return r.apply(ctx, r.sc.Objects)
}

// apply creates or updates the objects in the scenario's namespace; in a tenant's, those the
// scenario put in spec.namespace by name too.
func (r *runner) apply(ctx context.Context, objs []Object) error {
	if r.ns != r.sc.Spec.Namespace {
		moved := make([]Object, len(objs))
		for i, obj := range objs {
			moved[i] = obj
			if obj.GetNamespace() == r.sc.Spec.Namespace {
				moved[i].Unstructured = obj.DeepCopy()
				moved[i].SetNamespace(r.ns)
			}
		}
		objs = moved
	}
	return Apply(ctx, r.cluster, r.dyn, r.ns, objs)
}

// Apply creates or updates objects by server-side apply with FieldManager, in order, as a user's
// client would: a namespaced object without a namespace goes to namespace, a namespace that does
// not exist yet is created, and an object with only a generateName is created. It stops at the
// first object the apiserver refuses, naming where that object came from.
func Apply(ctx context.Context, cluster *envtest.Cluster, dyn dynamic.Interface, namespace string, objs []Object) error {
	made := map[string]bool{}
	for _, obj := range objs {
		u := obj.DeepCopy()
		gvk := u.GroupVersionKind()
		mapping, err := cluster.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s: %s %s: the cluster does not serve this kind: %w", obj.Origin(), u.GetAPIVersion(), u.GetKind(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if u.GetNamespace() == "" {
				u.SetNamespace(namespace)
			}
			if !made[u.GetNamespace()] {
				if err := cluster.EnsureNamespace(ctx, u.GetNamespace()); err != nil {
					return fmt.Errorf("%s: %w", obj.Origin(), err)
				}
				made[u.GetNamespace()] = true
			}
			ri = dyn.Resource(mapping.Resource).Namespace(u.GetNamespace())
		}
		if u.GetName() == "" {
			_, err = ri.Create(ctx, u, metav1.CreateOptions{FieldManager: FieldManager})
		} else {
			_, err = ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
		}
		if err != nil {
			return fmt.Errorf("%s: applying %s %s: %w", obj.Origin(), u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// waitFor waits until the program is true, re-evaluating it on every change it observes and
// every reevaluateEvery, for at most timeout; its error says why it failed.
func (r *runner) waitFor(ctx context.Context, e expression, timeout time.Duration) error {
	clk := r.cluster.Clock
	w := r.obs.startWait(e.program)
	deadline := clk.After(timeout)
	tick := clk.NewTicker(reevaluateEvery)
	defer tick.Stop()
	for {
		select {
		case <-w.done:
			if w := r.obs.stopWait(); w.fatal != nil {
				return r.explain("waitFor", e, w.fatal)
			}
			return nil
		case <-tick.C():
			r.obs.reevaluate()
		case <-deadline:
			w := r.obs.stopWait()
			return r.explain(fmt.Sprintf("waitFor (timed out after %s, %d evaluations)", timeout, w.evals), e, w.lastErr)
		case <-ctx.Done():
			r.obs.stopWait()
			return fmt.Errorf("interrupted: %w", ctx.Err())
		}
	}
}

// explain is a failed expression's report: the expression and where the file has it, the
// evaluation error if any, and the pods.
func (r *runner) explain(what string, e expression, err error) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\nat %s\n", what, strings.TrimSpace(e.source), e.at)
	if err != nil {
		fmt.Fprintf(&b, "last evaluation error: %v\n", err)
	} else {
		b.WriteString("it was false\n")
	}
	b.WriteString(podTable(r.obs.pods()))
	if warnings := r.obs.warnings(8); len(warnings) > 0 {
		b.WriteString("latest warning events:\n")
		for _, w := range warnings {
			b.WriteString("  " + oneLine(w, 300) + "\n")
		}
	}
	return errors.New(b.String())
}

// resolvePod finds the pod a POD reference names.
func (r *runner) resolvePod(ctx context.Context, ref PodRef) (*corev1.Pod, error) {
	ns := r.ns
	if ref.Name != "" {
		var pod corev1.Pod
		if err := r.cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &pod); err != nil {
			return nil, fmt.Errorf("pod %s/%s: %w", ns, ref.Name, err)
		}
		return &pod, nil
	}
	sel, err := labels.Parse(ref.Selector)
	if err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := r.cluster.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	index := ptr.Deref(ref.Index, 0)
	if index >= len(pods.Items) {
		return nil, fmt.Errorf("selector %q matches %d pod(s) in %s, so there is no index %d", ref.Selector, len(pods.Items), ns, index)
	}
	return &pods.Items[index], nil
}

// onPod does something to the pod ref names; a failure comes with the scenario's pods.
func (r *runner) onPod(ctx context.Context, ref PodRef, do func(*corev1.Pod) error) error {
	pod, err := r.resolvePod(ctx, ref)
	if err == nil {
		err = do(pod)
	}
	if err != nil {
		return fmt.Errorf("%w\n%s", err, podTable(r.obs.pods()))
	}
	return nil
}

// onNode does something to the node t names, directly or as a pod's.
func (r *runner) onNode(ctx context.Context, t *NodeTarget, do func(string) error) error {
	node := r.cluster.NodeName(t.Node)
	if t.NodeOf != nil {
		pod, err := r.resolvePod(ctx, *t.NodeOf)
		if err != nil {
			return err
		}
		if pod.Spec.NodeName == "" {
			return fmt.Errorf("pod %s is not bound to a node yet", pod.Name)
		}
		node = pod.Spec.NodeName
	}
	return do(node)
}

// onShardNodes does something to every node the kubelet process holds now, and fails if it
// holds none.
func (r *runner) onShardNodes(ctx context.Context, shard string, do func(context.Context, string) error) error {
	nodes, err := r.cluster.Faults().ShardNodes(ctx, shard)
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		return fmt.Errorf("kubelet process %s holds no node", shard)
	}
	var errs []error
	for _, node := range nodes {
		if err := do(ctx, node); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// delete deletes an object as a client would (background propagation).
func (r *runner) delete(ctx context.Context, d *DeleteAction) error {
	gvr, namespaced, err := r.resource(d.APIVersion, d.Kind)
	if err != nil {
		return err
	}
	opts := metav1.DeleteOptions{GracePeriodSeconds: d.GracePeriodSeconds, PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
	name := d.Name
	if gvr.Group == "" && gvr.Resource == "nodes" {
		name = r.cluster.NodeName(name) // a tenant's node has a name of its own
	}
	ri := dynamic.ResourceInterface(r.dyn.Resource(gvr))
	if namespaced {
		ns := d.Namespace
		if ns == "" || ns == r.sc.Spec.Namespace {
			ns = r.ns
		}
		ri = r.dyn.Resource(gvr).Namespace(ns)
	}
	if err := ri.Delete(ctx, name, opts); err != nil {
		return fmt.Errorf("deleting %s %s: %w", d.Kind, name, err)
	}
	return nil
}

// resource finds the resource of a kind: in the apiVersion's group when one is given, else the
// one group that serves the kind.
func (r *runner) resource(apiVersion, kind string) (schema.GroupVersionResource, bool, error) {
	if apiVersion != "" {
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil {
			return schema.GroupVersionResource{}, false, fmt.Errorf("apiVersion %q: %w", apiVersion, err)
		}
		m, err := r.cluster.Client.RESTMapper().RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
		if err != nil {
			return schema.GroupVersionResource{}, false, fmt.Errorf("kind %s in %s: %w", kind, apiVersion, err)
		}
		return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
	}
	lists, err := r.cluster.Clientset.Discovery().ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		return schema.GroupVersionResource{}, false, fmt.Errorf("discovering the kinds the cluster serves: %w", err)
	}
	var found []schema.GroupVersionResource
	namespaced := false
	for _, l := range lists {
		gv, _ := schema.ParseGroupVersion(l.GroupVersion) // discovery's group versions are well-formed
		for _, res := range l.APIResources {
			if res.Kind == kind && !strings.Contains(res.Name, "/") {
				found = append(found, gv.WithResource(res.Name))
				namespaced = res.Namespaced
			}
		}
	}
	switch len(found) {
	case 0:
		return schema.GroupVersionResource{}, false, fmt.Errorf("the cluster serves no kind %q (kinds are case-sensitive: Pod, Job, JobSet, ...)", kind)
	case 1:
		return found[0], namespaced, nil
	}
	var groups []string
	for _, f := range found {
		groups = append(groups, f.GroupVersion().String())
	}
	return schema.GroupVersionResource{}, false, fmt.Errorf("kind %q is served by %s: set delete.apiVersion", kind, strings.Join(groups, ", "))
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "    (none)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
