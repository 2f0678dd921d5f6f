package scenarios

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/restartbed/restartbed/fakekubelet"
)

// Shares says why the scenario cannot run as a tenant of a shared control plane
// (RunOptions.Host), or "" when it can: when it runs there as on a cluster of its own. A tenant
// has a namespace and nodes of its own on the shared control plane, so a scenario cannot share
// one when it
//   - kills or starts a control-plane process (killComponent, startComponent): the others'
//     control plane too;
//   - runs its nodes in kubelet processes (spec.kubelets), or host binaries: their own clusters
//     are what those check;
//   - installs CRDs, which are the control plane's;
//   - puts objects in, or deletes from, another namespace than its own: the tenant's namespace
//     takes the place of spec.namespace, no other;
//   - names one of its nodes in an object or an expression: a tenant's nodes are named
//     <pool>-<tenant>-<i> (steps that name a node are told its name);
//   - has one node and a step that can take it down: the node lifecycle controller treats a
//     cluster whose every node is down (it stops evicting) otherwise than one node down among
//     other tenants' healthy ones.
func (sc *Scenario) Shares() string {
	if sc.Spec.Kubelets != nil {
		return "its nodes run in kubelet processes (spec.kubelets)"
	}
	if len(sc.HostBinaryProblems()) > 0 {
		return "its programs run host binaries"
	}
	if len(sc.CRDs) > 0 {
		return "it installs CRDs, which are the control plane's"
	}
	steps := sc.allSteps()
	nodes := 0
	for _, p := range sc.Pools {
		nodes += p.Count
	}
	for _, s := range steps {
		if s.KillComponent != nil || s.StartComponent != nil {
			return "it kills or starts a control-plane process"
		}
		if d := s.Delete; d != nil && d.Namespace != "" && d.Namespace != sc.Spec.Namespace {
			return fmt.Sprintf("it deletes from namespace %s, not its own", d.Namespace)
		}
		if nodes == 1 && (s.FailNode != nil || s.StopKubelet != nil || s.RebootNode != nil || (s.Delete != nil && s.Delete.Kind == "Node")) {
			return "its one node can go down, which the node lifecycle controller treats otherwise in a cluster of that node alone"
		}
	}
	objects := slices.Clone(sc.Objects)
	for _, s := range steps {
		if a, ok := s.action.(applyStep); ok {
			objects = append(objects, a.objects...)
		}
	}
	for _, obj := range objects {
		if ns := obj.GetNamespace(); ns != "" && ns != sc.Spec.Namespace {
			return fmt.Sprintf("%s: %s %s is in namespace %s, not its own", obj.Origin(), obj.GetKind(), obj.GetName(), ns)
		}
	}
	// Its node names, as words: node-1 is not node-10.
	var names []string
	for name := range sc.nodeNames() {
		names = append(names, regexp.QuoteMeta(name))
	}
	slices.Sort(names)
	named := regexp.MustCompile(`(^|[^a-z0-9-])(` + strings.Join(names, "|") + `)($|[^a-z0-9-])`)
	for _, obj := range objects {
		data, err := json.Marshal(obj.Object)
		if err == nil && named.Match(data) {
			return fmt.Sprintf("%s: %s %s names one of its nodes", obj.Origin(), obj.GetKind(), obj.GetName())
		}
	}
	for _, source := range sc.expressions() {
		if m := named.FindStringSubmatch(source); m != nil {
			return fmt.Sprintf("an expression names its node %s", m[2])
		}
	}
	return ""
}

// allSteps are the scenario's steps and its triggers'.
func (sc *Scenario) allSteps() []*Step {
	var out []*Step
	for i := range sc.Spec.Steps {
		out = append(out, &sc.Spec.Steps[i])
	}
	for i := range sc.Spec.Triggers {
		for j := range sc.Spec.Triggers[i].Steps {
			out = append(out, &sc.Spec.Triggers[i].Steps[j])
		}
	}
	return out
}

// expressions are the sources of every CEL expression of the scenario.
func (sc *Scenario) expressions() []string {
	var out []string
	for _, s := range sc.allSteps() {
		if s.WaitFor != nil {
			out = append(out, *s.WaitFor)
		}
		if s.Expect != nil {
			out = append(out, *s.Expect)
		}
		for _, c := range s.Capture {
			out = append(out, c)
		}
	}
	for _, t := range sc.Spec.Triggers {
		out = append(out, t.When)
	}
	for _, inv := range sc.Spec.Invariants {
		out = append(out, inv.Always)
	}
	return out
}

// tenantNamespace is a namespace of the scenario's own on a shared control plane:
// spec.namespace's name and a random suffix.
func tenantNamespace(sc *Scenario) string {
	base := sc.Spec.Namespace
	if len(base) > 56 {
		base = base[:56]
	}
	return strings.TrimRight(base, "-") + "-" + rand.String(6)
}

// namespaceVariable in a node label's value (spec.nodes[].labels) stands for the scenario's
// namespace: JobSet's exclusive placement selects nodes by a label that names a Job's namespace.
const namespaceVariable = "$(NAMESPACE)"

// poolsIn are the scenario's node pools with the namespace in their labels' values.
func (sc *Scenario) poolsIn(namespace string) []fakekubelet.NodePool {
	out := slices.Clone(sc.Pools)
	for i, p := range out {
		if p.Labels == nil {
			continue
		}
		p.Labels = maps.Clone(p.Labels)
		for k, v := range p.Labels {
			p.Labels[k] = strings.ReplaceAll(v, namespaceVariable, namespace)
		}
		out[i] = p
	}
	return out
}
