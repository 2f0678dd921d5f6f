package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/restartbed/restartbed/internal/yamlpath"
	"github.com/restartbed/restartbed/invariants"
)

// BuiltinJobSetInPlace names the built-in invariants of a JobSet in-place restart (package
// invariants) in spec.invariants.
const BuiltinJobSetInPlace = "jobset-in-place"

// DefaultRecoverWithin is how long after the run's last step the JobSets have to run again.
const DefaultRecoverWithin = 2 * time.Minute

// Invariant is one entry of spec.invariants: the built-in invariants, or a named CEL expression
// that must hold on every state the run observes.
type Invariant struct {
	Builtin string `yaml:"builtin"`
	// RecoverWithin bounds, for the built-in set, how long after the last step (and the last
	// fired trigger's) the JobSets must run again (invariants.Recovers); default
	// DefaultRecoverWithin, 0s to not judge it.
	RecoverWithin *Duration `yaml:"recoverWithin"`
	Name          string    `yaml:"name"`
	Always        string    `yaml:"always"`

	expr expression
}

// title names the invariant in reports.
func (inv *Invariant) title() string {
	if inv.Builtin != "" {
		return inv.Builtin
	}
	return inv.Name
}

// Violation is an invariant the run broke.
type Violation struct {
	// Invariant is the CEL invariant's name, or the built-in one's (invariants.Names).
	Invariant string
	// At is the scenario time at which the change that broke it was observed.
	At time.Duration
	// Object is the object whose change revealed it, when known; Message what happened.
	Object, Message string
	// Trace is the observed changes leading to it, oldest first, one line each.
	Trace []string
}

// MarshalJSON writes the violation with its time in seconds, as the reports' other times.
func (v Violation) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Invariant string   `json:"invariant"`
		At        float64  `json:"atSeconds"`
		Object    string   `json:"object,omitempty"`
		Message   string   `json:"message"`
		Trace     []string `json:"trace,omitempty"`
	}{v.Invariant, v.At.Seconds(), v.Object, v.Message, v.Trace})
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invariant %s broken at %s", v.Invariant, round(v.At))
	if v.Object != "" {
		fmt.Fprintf(&b, " by %s", v.Object)
	}
	fmt.Fprintf(&b, ": %s", v.Message)
	return b.String()
}

// checkInvariants checks spec.invariants and compiles their expressions.
func (l *loader) checkInvariants(sc *Scenario, doc *yaml.Node) {
	list := yamlpath.At(doc, "spec", "invariants")
	names := map[string]bool{}
	for i := range sc.Spec.Invariants {
		inv := &sc.Spec.Invariants[i]
		node := yamlpath.At(list, i)
		path := fmt.Sprintf("spec.invariants[%d]", i)
		switch {
		case inv.Builtin != "" && (inv.Name != "" || inv.Always != ""):
			l.addf(node.Line, path, "give either builtin or name and always, not both")
		case inv.RecoverWithin != nil && inv.Builtin == "":
			l.addf(yamlpath.At(node, "recoverWithin").Line, path+".recoverWithin", "only the built-in set (builtin: %s) has a recovery bound", BuiltinJobSetInPlace)
		case inv.Builtin != "":
			if inv.Builtin != BuiltinJobSetInPlace {
				l.addf(yamlpath.At(node, "builtin").Line, path+".builtin", "unknown built-in invariants %q: the one set is %s", inv.Builtin, BuiltinJobSetInPlace)
			}
		case inv.Name == "" || inv.Always == "":
			l.addf(node.Line, path, "an invariant needs a name and an always expression (CEL that must hold on every observed state), or builtin: %s", BuiltinJobSetInPlace)
		default:
			at := yamlpath.At(node, "always")
			prg, err := compile(inv.Always, true)
			if err != nil {
				l.addf(at.Line, path+".always", "%v", err)
			}
			inv.expr = expression{source: inv.Always, program: prg, at: fmt.Sprintf("%s:%d (%s.always)", l.file, at.Line, path)}
		}
		if t := inv.title(); t != "" {
			if names[t] {
				l.addf(node.Line, path, "invariant %q is given twice", t)
			}
			names[t] = true
		}
	}
}

// judge is the invariants of one run: it sees every observed change, under the observer's lock,
// and keeps the first violation of each invariant.
type judge struct {
	cel     []*Invariant
	builtin *invariants.JobSetInPlace
	// recoverWithin bounds the wait for the built-in set's recovery (0: not judged).
	recoverWithin time.Duration
	// broken are the invariants already violated: each is reported once.
	broken     map[string]bool
	violations []Violation
	// onViolation is called, with the observer's lock held, after the first violation.
	onViolation func()
}

func newJudge(sc *Scenario) *judge {
	j := &judge{broken: map[string]bool{}}
	for i := range sc.Spec.Invariants {
		inv := &sc.Spec.Invariants[i]
		if inv.Builtin == BuiltinJobSetInPlace {
			j.builtin = invariants.NewJobSetInPlace()
			j.recoverWithin = DefaultRecoverWithin
			if inv.RecoverWithin != nil {
				j.recoverWithin = inv.RecoverWithin.Duration
			}
		} else if inv.expr.program != nil {
			j.cel = append(j.cel, inv)
		}
	}
	return j
}

// active reports whether the run has any invariant to judge.
func (j *judge) active() bool { return j != nil && (j.builtin != nil || len(j.cel) > 0) }

// observe judges one change of a watched object (the built-in invariants).
func (j *judge) observe(variable, change string, u *unstructured.Unstructured, at time.Duration, trace func() []string) {
	if j.builtin == nil || variable == varEvents || variable == varServices {
		return
	}
	for _, v := range j.builtin.Observe(change, u) {
		j.add(Violation{Invariant: v.Invariant, At: at, Object: v.Object, Message: v.Message}, trace)
	}
}

// evaluate judges the CEL invariants against a view of the objects. An expression that cannot
// be evaluated on a view (a field not there yet) is not judged on it.
func (j *judge) evaluate(view activation, at time.Duration, trace func() []string) {
	for _, inv := range j.cel {
		if j.broken[inv.Name] {
			continue
		}
		if ok, err := evalBool(inv.expr.program, view); err == nil && !ok {
			j.add(Violation{Invariant: inv.Name, At: at, Message: "false: " + strings.TrimSpace(inv.Always) + " (" + inv.expr.at + ")"}, trace)
		}
	}
}

// finish judges what only the end of the run settles.
func (j *judge) finish(at time.Duration, trace func() []string) {
	if j.builtin == nil {
		return
	}
	for _, v := range j.builtin.Finish() {
		j.add(Violation{Invariant: v.Invariant, At: at, Object: v.Object, Message: v.Message + " (judged at the end of the run)"}, trace)
	}
}

func (j *judge) add(v Violation, trace func() []string) {
	if j.broken[v.Invariant] {
		return
	}
	j.broken[v.Invariant] = true
	v.Trace = trace()
	j.violations = append(j.violations, v)
	if len(j.violations) == 1 && j.onViolation != nil {
		j.onViolation()
	}
}

// awaitRecovery waits, on the cluster's clock, for the built-in set's JobSets to run again, and
// records invariants.Recovers broken if they do not within the bound. Nothing is awaited once an
// invariant has broken: the run stops there.
func (r *runner) awaitRecovery(ctx context.Context) {
	j := r.obs.judge
	if j == nil || j.builtin == nil || j.recoverWithin == 0 {
		return
	}
	unsettled := func() (string, bool) {
		r.obs.mu.Lock()
		defer r.obs.mu.Unlock()
		return j.builtin.Unsettled(), len(j.violations) > 0
	}
	clk := r.cluster.Clock
	deadline := clk.After(j.recoverWithin)
	tick := clk.NewTicker(reevaluateEvery)
	defer tick.Stop()
	for {
		why, broken := unsettled()
		if why == "" || broken {
			return
		}
		select {
		case <-tick.C():
		case <-ctx.Done():
			return
		case <-deadline:
			r.obs.mu.Lock()
			defer r.obs.mu.Unlock()
			j.add(Violation{Invariant: invariants.Recovers, At: r.obs.scenarioTimeLocked(),
				Message: fmt.Sprintf("not running again %s after the last step: %s", j.recoverWithin, why)}, r.obs.recentLocked)
			return
		}
	}
}
