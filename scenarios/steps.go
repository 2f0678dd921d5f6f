package scenarios

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/internal/yamlpath"
)

// This file holds every kind of step: its field in Step, its entry in stepKinds, and its type,
// which checks the step when the scenario loads and then names and runs it. Adding a kind of
// step touches this file only.

// Step is one step: an optional name and exactly one action.
type Step struct {
	Name string `yaml:"name"`

	WaitFor        *string           `yaml:"waitFor"`
	Timeout        *Duration         `yaml:"timeout"`
	Expect         *string           `yaml:"expect"`
	Capture        map[string]string `yaml:"capture"`
	Sleep          *Duration         `yaml:"sleep"`
	Apply          []ObjectSource    `yaml:"apply"`
	Delete         *DeleteAction     `yaml:"delete"`
	ExitContainer  *ExitContainer    `yaml:"exitContainer"`
	Exec           *ExecAction       `yaml:"exec"`
	FailNode       *NodeTarget       `yaml:"failNode"`
	RecoverNode    *NodeTarget       `yaml:"recoverNode"`
	RestartKubelet *NodeTarget       `yaml:"restartKubelet"`
	StopKubelet    *NodeTarget       `yaml:"stopKubelet"`
	StartKubelet   *NodeTarget       `yaml:"startKubelet"`
	RebootNode     *NodeTarget       `yaml:"rebootNode"`
	// ResetConnections with no node resets every node's pods' connections.
	ResetConnections *NodeTarget      `yaml:"resetConnections"`
	OOMKill          *ContainerTarget `yaml:"oomKill"`
	KillShard        *ShardTarget     `yaml:"killShard"`
	FailShard        *ShardTarget     `yaml:"failShard"`
	RecoverShard     *ShardTarget     `yaml:"recoverShard"`
	KillComponent    *ComponentTarget `yaml:"killComponent"`
	StartComponent   *ComponentTarget `yaml:"startComponent"`

	// Line is where the step starts in its file.
	Line int `yaml:"-"`
	// action is the step's one action, checked and ready to run; nil until the scenario loads.
	action stepAction
}

// DeleteAction deletes an object as a client would.
type DeleteAction struct {
	// APIVersion disambiguates a kind served by several groups (optional).
	APIVersion         string `yaml:"apiVersion"`
	Kind               string `yaml:"kind"`
	Name               string `yaml:"name"`
	Namespace          string `yaml:"namespace"`
	GracePeriodSeconds *int64 `yaml:"gracePeriodSeconds"`
	// Pod (a restartbed extension) names the pod to delete by name or selector, instead of kind
	// and name: a Job's pods have generated names.
	Pod *PodRef `yaml:"pod"`
}

// ExitContainer makes a running container's process exit with a code.
type ExitContainer struct {
	Pod       PodRef `yaml:"pod"`
	Container string `yaml:"container"`
	ExitCode  *int32 `yaml:"exitCode"`
}

// ContainerTarget names one container of one pod.
type ContainerTarget struct {
	Pod       PodRef `yaml:"pod"`
	Container string `yaml:"container"`
}

// ExecAction runs a command in a container's filesystem.
type ExecAction struct {
	Pod       PodRef   `yaml:"pod"`
	Container string   `yaml:"container"`
	Command   []string `yaml:"command"`
}

// stepAction is a checked step, ready to run.
type stepAction interface {
	// title is the action with its main argument, for the report.
	title() string
	// run takes the action; its error says why the step failed.
	run(ctx context.Context, r *runner) error
}

// stepKind is one kind of step: its key in the file, whether a step sets it, and its check,
// which reports problems through c and returns the action to run.
type stepKind struct {
	key   string
	set   func(*Step) bool
	check func(c *stepCheck) stepAction
}

// stepKinds are the kinds of step, in the order messages list them.
var stepKinds = []stepKind{
	{"waitFor", func(s *Step) bool { return s.WaitFor != nil }, checkWaitFor},
	{"expect", func(s *Step) bool { return s.Expect != nil }, checkExpect},
	{"capture", func(s *Step) bool { return s.Capture != nil }, checkCapture},
	{"sleep", func(s *Step) bool { return s.Sleep != nil }, func(c *stepCheck) stepAction { return sleepStep{*c.step.Sleep} }},
	{"apply", func(s *Step) bool { return s.Apply != nil }, checkApply},
	{"delete", func(s *Step) bool { return s.Delete != nil }, checkDelete},
	{"exitContainer", func(s *Step) bool { return s.ExitContainer != nil }, checkExitContainer},
	{"oomKill", func(s *Step) bool { return s.OOMKill != nil }, checkOOMKill},
	{"exec", func(s *Step) bool { return s.Exec != nil }, checkExec},
	{"failNode", func(s *Step) bool { return s.FailNode != nil }, func(c *stepCheck) stepAction {
		return c.nodeStep("failNode", c.step.FailNode, func(ctx context.Context, r *runner, node string) error { return r.cluster.Faults().FailNode(ctx, node) })
	}},
	{"recoverNode", func(s *Step) bool { return s.RecoverNode != nil }, func(c *stepCheck) stepAction {
		return c.nodeStep("recoverNode", c.step.RecoverNode, func(ctx context.Context, r *runner, node string) error {
			return r.cluster.Faults().RecoverNode(ctx, node)
		})
	}},
	{"restartKubelet", func(s *Step) bool { return s.RestartKubelet != nil }, func(c *stepCheck) stepAction {
		return c.nodeStep("restartKubelet", c.step.RestartKubelet, func(ctx context.Context, r *runner, node string) error {
			return r.cluster.Faults().RestartKubelet(ctx, node)
		})
	}},
	{"stopKubelet", func(s *Step) bool { return s.StopKubelet != nil }, func(c *stepCheck) stepAction {
		return c.nodeStep("stopKubelet", c.step.StopKubelet, func(ctx context.Context, r *runner, node string) error {
			return r.cluster.Faults().StopKubelet(ctx, node)
		})
	}},
	{"startKubelet", func(s *Step) bool { return s.StartKubelet != nil }, func(c *stepCheck) stepAction {
		return c.nodeStep("startKubelet", c.step.StartKubelet, func(ctx context.Context, r *runner, node string) error {
			return r.cluster.Faults().StartKubelet(ctx, node)
		})
	}},
	{"resetConnections", func(s *Step) bool { return s.ResetConnections != nil }, func(c *stepCheck) stepAction {
		if t := c.step.ResetConnections; t.Node == "" && t.NodeOf == nil {
			return resetAllStep{}
		}
		return c.nodeStep("resetConnections", c.step.ResetConnections, func(ctx context.Context, r *runner, node string) error {
			return r.cluster.Faults().ResetConnections(ctx, node)
		})
	}},
	{"rebootNode", func(s *Step) bool { return s.RebootNode != nil }, func(c *stepCheck) stepAction {
		return c.nodeStep("rebootNode", c.step.RebootNode, func(ctx context.Context, r *runner, node string) error {
			return r.cluster.Faults().RebootNode(ctx, node)
		})
	}},
	{"killShard", func(s *Step) bool { return s.KillShard != nil }, func(c *stepCheck) stepAction {
		return c.shardStep("killShard", c.step.KillShard, func(_ context.Context, r *runner, shard string) error {
			return r.cluster.KillKubeletProcess(shard)
		})
	}},
	{"failShard", func(s *Step) bool { return s.FailShard != nil }, func(c *stepCheck) stepAction {
		return c.shardStep("failShard", c.step.FailShard, func(ctx context.Context, r *runner, shard string) error {
			return r.onShardNodes(ctx, shard, r.cluster.Faults().FailNode)
		})
	}},
	{"recoverShard", func(s *Step) bool { return s.RecoverShard != nil }, func(c *stepCheck) stepAction {
		return c.shardStep("recoverShard", c.step.RecoverShard, func(ctx context.Context, r *runner, shard string) error {
			return r.onShardNodes(ctx, shard, r.cluster.Faults().RecoverNode)
		})
	}},
	{"killComponent", func(s *Step) bool { return s.KillComponent != nil }, func(c *stepCheck) stepAction {
		return c.componentStep("killComponent", c.step.KillComponent, func(_ context.Context, r *runner, name string) error {
			return r.cluster.KillComponent(name)
		})
	}},
	{"startComponent", func(s *Step) bool { return s.StartComponent != nil }, func(c *stepCheck) stepAction {
		return c.componentStep("startComponent", c.step.StartComponent, func(ctx context.Context, r *runner, name string) error {
			return r.cluster.StartComponent(ctx, name)
		})
	}},
}

// stepCheck is what a kind's check works with: the step, its node in the file and its path.
type stepCheck struct {
	l    *loader
	sc   *Scenario
	step *Step
	node *yaml.Node
	path string
}

// at is the node of one of the step's fields, and field its path.
func (c *stepCheck) at(field string) *yaml.Node { return yamlpath.At(c.node, field) }
func (c *stepCheck) field(name string) string   { return c.path + "." + name }

// checkStep checks that a step takes exactly one action and that the action is valid, and
// prepares it to run.
func (l *loader) checkStep(sc *Scenario, s *Step, node *yaml.Node, path string) {
	s.Line = node.Line
	var set []stepKind
	for _, k := range stepKinds {
		if k.set(s) {
			set = append(set, k)
		}
	}
	keys := func(kinds []stepKind) string {
		names := make([]string, len(kinds))
		for i, k := range kinds {
			names[i] = k.key
		}
		return strings.Join(names, ", ")
	}
	switch len(set) {
	case 0:
		l.addf(node.Line, path, "no action: a step takes exactly one of %s", keys(stepKinds))
		return
	case 1:
	default:
		l.addf(node.Line, path, "%d actions (%s): a step takes exactly one; split it into %d steps", len(set), keys(set), len(set))
		return
	}
	if s.Timeout != nil && s.WaitFor == nil {
		l.addf(yamlpath.At(node, "timeout").Line, path+".timeout", "only a waitFor step has a timeout")
	}
	s.action = set[0].check(&stepCheck{l: l, sc: sc, step: s, node: node, path: path})
}

// title is the step's name, or its action with its main argument.
func (s *Step) title() string {
	switch {
	case s.Name != "":
		return s.Name
	case s.action != nil:
		return s.action.title()
	}
	return "step"
}

// run runs the step's action and returns why it failed, or "".
func (s *Step) run(ctx context.Context, r *runner) string {
	if s.action == nil {
		return "the step was not checked" // Load checks every step; a Scenario built otherwise is not runnable
	}
	if err := s.action.run(ctx, r); err != nil {
		return err.Error()
	}
	return ""
}

// compileAt compiles a CEL expression of the step's field, reporting an error at its line.
func (c *stepCheck) compileAt(field, source string, wantBool bool) expression {
	return c.compileNode(c.at(field), c.field(field), source, wantBool)
}

// compileNode compiles a CEL expression the file has at node, whose field path is path,
// reporting an error at its line.
func (c *stepCheck) compileNode(node *yaml.Node, path, source string, wantBool bool) expression {
	prg, err := compile(source, wantBool)
	if err != nil {
		c.l.addf(node.Line, path, "%v", err)
	}
	return expression{source: source, program: prg, at: fmt.Sprintf("%s:%d (%s)", c.l.file, node.Line, path)}
}

// waitFor: wait until a CEL expression over the observed objects is true, or time out.
type waitForStep struct {
	expr    expression
	timeout Duration
}

func checkWaitFor(c *stepCheck) stepAction {
	w := waitForStep{expr: c.compileAt("waitFor", *c.step.WaitFor, true), timeout: Duration{DefaultWaitTimeout}}
	if c.step.Timeout != nil {
		w.timeout = *c.step.Timeout
	}
	return w
}

func (w waitForStep) title() string { return "waitFor " + w.expr.source }

func (w waitForStep) run(ctx context.Context, r *runner) error {
	return r.waitFor(ctx, w.expr, w.timeout.Duration)
}

// expect: a CEL expression must be true now.
type expectStep struct{ expr expression }

func checkExpect(c *stepCheck) stepAction {
	return expectStep{expr: c.compileAt("expect", *c.step.Expect, true)}
}

func (e expectStep) title() string { return "expect " + e.expr.source }

func (e expectStep) run(_ context.Context, r *runner) error {
	v, err := r.obs.eval(e.expr.program)
	if err != nil {
		return r.explain("expect", e.expr, err)
	}
	if v != true {
		return r.explain("expect", e.expr, nil)
	}
	return nil
}

// capture: evaluate CEL expressions and keep their values under names, in file order.
type captureStep struct {
	keys  []string
	exprs []expression
}

func checkCapture(c *stepCheck) stepAction {
	var s captureStep
	capture := c.at("capture")
	if len(c.step.Capture) == 0 {
		c.l.addf(capture.Line, c.field("capture"), "nothing to capture: give key: CEL pairs")
	}
	for i := 0; i+1 < len(capture.Content); i += 2 {
		key := capture.Content[i].Value
		s.keys = append(s.keys, key)
		s.exprs = append(s.exprs, c.compileNode(capture.Content[i+1], c.field("capture."+key), c.step.Capture[key], false))
	}
	return s
}

func (s captureStep) title() string { return "capture " + strings.Join(s.keys, ", ") }

func (s captureStep) run(_ context.Context, r *runner) error {
	for i, key := range s.keys {
		v, err := r.obs.eval(s.exprs[i].program)
		if err != nil {
			return r.explain("capture "+key, s.exprs[i], err)
		}
		r.obs.capture(key, v)
	}
	return nil
}

// sleep: let the cluster's clock run.
type sleepStep struct{ Duration }

func (s sleepStep) title() string { return "sleep " + s.String() }

func (s sleepStep) run(ctx context.Context, r *runner) error {
	select {
	case <-r.cluster.Clock.After(s.Duration.Duration):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// apply: create or update manifests, as at the start.
type applyStep struct{ objects []Object }

func checkApply(c *stepCheck) stepAction {
	var s applyStep
	if len(c.step.Apply) == 0 {
		c.l.addf(c.at("apply").Line, c.field("apply"), "nothing to apply")
	}
	for i, src := range c.step.Apply {
		s.objects = append(s.objects, c.l.objects(src, yamlpath.At(c.node, "apply", i), fmt.Sprintf("%s.apply[%d]", c.path, i))...)
	}
	return s
}

func (s applyStep) title() string { return fmt.Sprintf("apply %d object(s)", len(s.objects)) }

func (s applyStep) run(ctx context.Context, r *runner) error { return r.apply(ctx, s.objects) }

// delete: delete an object by kind and name, or a pod by name or selector.
type deleteStep struct{ *DeleteAction }

func checkDelete(c *stepCheck) stepAction {
	d, node, path := c.step.Delete, c.at("delete"), c.field("delete")
	switch {
	case d.Pod != nil:
		if d.Kind != "" || d.Name != "" || d.APIVersion != "" {
			c.l.addf(node.Line, path, "pod names the pod to delete: give it instead of kind and name, not with them")
		}
		c.l.podRef(*d.Pod, yamlpath.At(node, "pod"), path+".pod")
	default:
		if d.Kind == "" {
			c.l.addf(node.Line, path+".kind", "required: the kind of the object, such as Pod or JobSet (or pod: POD)")
		}
		if d.Name == "" {
			c.l.addf(node.Line, path+".name", "required: the name of the object")
		}
	}
	if g := d.GracePeriodSeconds; g != nil && *g < 0 {
		c.l.addf(yamlpath.At(node, "gracePeriodSeconds").Line, path+".gracePeriodSeconds", "must not be negative, got %d", *g)
	}
	return deleteStep{d}
}

func (d deleteStep) title() string {
	if d.Pod != nil {
		return fmt.Sprintf("delete pod %s", d.Pod)
	}
	return fmt.Sprintf("delete %s %s", d.Kind, d.Name)
}

func (d deleteStep) run(ctx context.Context, r *runner) error {
	if d.Pod != nil {
		return r.onPod(ctx, *d.Pod, func(pod *corev1.Pod) error {
			return r.delete(ctx, &DeleteAction{Kind: "Pod", Name: pod.Name, Namespace: pod.Namespace, GracePeriodSeconds: d.GracePeriodSeconds})
		})
	}
	return r.delete(ctx, d.DeleteAction)
}

// exitContainer: a running container's process exits with a code.
type exitContainerStep struct{ *ExitContainer }

func checkExitContainer(c *stepCheck) stepAction {
	e, node, path := c.step.ExitContainer, c.at("exitContainer"), c.field("exitContainer")
	c.l.podRef(e.Pod, yamlpath.At(node, "pod"), path+".pod")
	c.l.required(e.Container, node, path+".container")
	if e.ExitCode == nil {
		c.l.addf(node.Line, path+".exitCode", "required: the code the process exits with (0-255)")
	} else if *e.ExitCode < 0 || *e.ExitCode > 255 {
		c.l.addf(yamlpath.At(node, "exitCode").Line, path+".exitCode", "must be 0-255, got %d", *e.ExitCode)
	}
	return exitContainerStep{e}
}

func (e exitContainerStep) title() string {
	return fmt.Sprintf("exitContainer %s/%s %d", e.Pod, e.Container, *e.ExitCode)
}

func (e exitContainerStep) run(ctx context.Context, r *runner) error {
	return r.onPod(ctx, e.Pod, func(pod *corev1.Pod) error {
		return r.cluster.Faults().ExitContainer(ctx, pod.Namespace, pod.Name, e.Container, *e.ExitCode)
	})
}

// oomKill: the kernel's OOM killer ends a container's process.
type oomKillStep struct{ *ContainerTarget }

func checkOOMKill(c *stepCheck) stepAction {
	o, node, path := c.step.OOMKill, c.at("oomKill"), c.field("oomKill")
	c.l.podRef(o.Pod, yamlpath.At(node, "pod"), path+".pod")
	c.l.required(o.Container, node, path+".container")
	return oomKillStep{o}
}

func (o oomKillStep) title() string { return fmt.Sprintf("oomKill %s/%s", o.Pod, o.Container) }

func (o oomKillStep) run(ctx context.Context, r *runner) error {
	return r.onPod(ctx, o.Pod, func(pod *corev1.Pod) error {
		return r.cluster.Faults().OOMKill(ctx, pod.Namespace, pod.Name, o.Container)
	})
}

// exec: run a command in a container; a non-zero exit fails the step.
type execStep struct{ *ExecAction }

func checkExec(c *stepCheck) stepAction {
	e, node, path := c.step.Exec, c.at("exec"), c.field("exec")
	c.l.podRef(e.Pod, yamlpath.At(node, "pod"), path+".pod")
	c.l.required(e.Container, node, path+".container")
	if len(e.Command) == 0 {
		c.l.addf(node.Line, path+".command", "required: the command and its arguments, such as [touch, /tmp/exit3]")
	}
	return execStep{e}
}

func (e execStep) title() string {
	return fmt.Sprintf("exec %s/%s %s", e.Pod, e.Container, strings.Join(e.Command, " "))
}

func (e execStep) run(ctx context.Context, r *runner) error {
	return r.onPod(ctx, e.Pod, func(pod *corev1.Pod) error {
		code, out, err := r.cluster.Faults().Exec(ctx, pod.Namespace, pod.Name, e.Container, e.Command)
		if err != nil {
			return err
		}
		if code != 0 {
			return fmt.Errorf("exit code %d; output:\n%s", code, indent(out))
		}
		return nil
	})
}

// failNode, recoverNode, restartKubelet, stopKubelet, startKubelet, rebootNode: a fault of a node, named or as the node of a pod.
type nodeStep struct {
	key    string
	target *NodeTarget
	do     func(ctx context.Context, r *runner, node string) error
}

func (c *stepCheck) nodeStep(key string, target *NodeTarget, do func(ctx context.Context, r *runner, node string) error) stepAction {
	c.l.nodeTarget(c.sc, target, c.at(key), c.field(key))
	return nodeStep{key: key, target: target, do: do}
}

func (n nodeStep) title() string { return n.key + " " + n.target.String() }

func (n nodeStep) run(ctx context.Context, r *runner) error {
	return r.onNode(ctx, n.target, func(node string) error { return n.do(ctx, r, node) })
}

// resetConnections with no node: every pod's connections to the apiserver, on every node.
type resetAllStep struct{}

func (resetAllStep) title() string { return "resetConnections on every node" }

func (resetAllStep) run(ctx context.Context, r *runner) error {
	return r.cluster.Faults().ResetAllConnections(ctx)
}

// killShard, failShard, recoverShard: a fault of a whole kubelet process, named or as the
// holder of a node.
type shardStep struct {
	key    string
	target *ShardTarget
	do     func(ctx context.Context, r *runner, shard string) error
}

func (c *stepCheck) shardStep(key string, target *ShardTarget, do func(ctx context.Context, r *runner, shard string) error) stepAction {
	c.l.shardTarget(c.sc, target, c.at(key), c.field(key))
	return shardStep{key: key, target: target, do: do}
}

func (s shardStep) title() string { return s.key + " " + s.target.String() }

func (s shardStep) run(ctx context.Context, r *runner) error {
	if s.target.Shard != "" {
		return s.do(ctx, r, s.target.Shard)
	}
	return r.onNode(ctx, &NodeTarget{Node: s.target.Node, NodeOf: s.target.NodeOf}, func(node string) error {
		shard, err := r.cluster.Faults().ShardOf(ctx, node)
		if err != nil {
			return err
		}
		return s.do(ctx, r, shard)
	})
}

// killComponent, startComponent: a fault of one of the control plane's processes.
type componentStep struct {
	key    string
	target *ComponentTarget
	do     func(ctx context.Context, r *runner, name string) error
}

func (c *stepCheck) componentStep(key string, target *ComponentTarget, do func(ctx context.Context, r *runner, name string) error) stepAction {
	if !slices.Contains(envtest.ComponentNames, target.Component) {
		path, node := c.field(key)+".component", yamlpath.At(c.at(key), "component")
		if target.Component == "" {
			path, node = c.field(key), c.at(key)
		}
		c.l.addf(node.Line, path, "component %q: give one of %s", target.Component, strings.Join(envtest.ComponentNames, ", "))
	}
	return componentStep{key: key, target: target, do: do}
}

func (s componentStep) title() string { return s.key + " " + s.target.Component }

func (s componentStep) run(ctx context.Context, r *runner) error {
	return s.do(ctx, r, s.target.Component)
}
