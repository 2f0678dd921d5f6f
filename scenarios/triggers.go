package scenarios

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"go.yaml.in/yaml/v3"

	"github.com/restartbed/restartbed/internal/yamlpath"
)

// Trigger is one entry of spec.triggers: steps that run once, alongside spec.steps, as soon as
// a CEL expression holds on an observed state. It is how a fault lands at a point of a run that
// no step boundary marks: `restartbed explore` writes what it finds in this form.
type Trigger struct {
	Name  string `yaml:"name"`
	When  string `yaml:"when"`
	Steps []Step `yaml:"steps"`

	when expression
}

// TriggerResult is what became of a trigger.
type TriggerResult struct {
	Name string
	// Fired reports whether its expression held; At is the scenario time it did.
	Fired bool
	At    time.Duration
	Steps []StepResult
}

// checkTriggers checks spec.triggers: a name, a boolean expression, steps that act (a trigger
// cannot waitFor: the run has one pending wait, spec.steps').
func (l *loader) checkTriggers(sc *Scenario, doc *yaml.Node) {
	list := yamlpath.At(doc, "spec", "triggers")
	for i := range sc.Spec.Triggers {
		t := &sc.Spec.Triggers[i]
		node := yamlpath.At(list, i)
		path := fmt.Sprintf("spec.triggers[%d]", i)
		if t.Name == "" {
			l.addf(node.Line, path+".name", "required: say what the trigger does")
		}
		if t.When == "" {
			l.addf(node.Line, path+".when", "required: the CEL expression whose first holding fires the trigger")
		} else {
			at := yamlpath.At(node, "when")
			prg, err := compile(t.When, true)
			if err != nil {
				l.addf(at.Line, path+".when", "%v", err)
			}
			t.when = expression{source: t.When, program: prg, at: fmt.Sprintf("%s:%d (%s.when)", l.file, at.Line, path)}
		}
		if len(t.Steps) == 0 {
			l.addf(node.Line, path+".steps", "required: the steps to run when the trigger fires")
		}
		steps := yamlpath.At(node, "steps")
		for j := range t.Steps {
			step := &t.Steps[j]
			stepPath := fmt.Sprintf("%s.steps[%d]", path, j)
			if step.WaitFor != nil {
				l.addf(yamlpath.At(steps, j).Line, stepPath+".waitFor", "a trigger's steps cannot waitFor (spec.steps own the run's one wait): use sleep, or a second trigger")
				continue
			}
			l.checkStep(sc, step, yamlpath.At(steps, j), stepPath)
		}
	}
}

// armedTrigger is a trigger waiting for its expression.
type armedTrigger struct {
	prg   cel.Program
	fired chan struct{}
	at    time.Duration
}

// arm makes the observer evaluate the triggers' expressions on every change from now on.
func (o *observer) arm(triggers []Trigger) []*armedTrigger {
	o.mu.Lock()
	defer o.mu.Unlock()
	armed := make([]*armedTrigger, len(triggers))
	for i, t := range triggers {
		armed[i] = &armedTrigger{prg: t.when.program, fired: make(chan struct{})}
	}
	o.triggers = append(o.triggers, armed...)
	o.fireLocked(o.activationLocked)
	return armed
}

// fireLocked fires the armed triggers whose expression holds on the view, and disarms them;
// o.mu is held. An expression that cannot be evaluated on a view does not hold on it.
func (o *observer) fireLocked(view func() activation) {
	keep := o.triggers[:0]
	for _, t := range o.triggers {
		if ok, err := evalBool(t.prg, view()); err == nil && ok {
			t.at = o.scenarioTimeLocked()
			close(t.fired)
			continue
		}
		keep = append(keep, t)
	}
	clear(o.triggers[len(keep):])
	o.triggers = keep
}

// runTriggers runs each trigger's steps, under ctx, once it fires; a trigger that has not fired
// when armCtx ends never does. wait returns their results once every fired trigger's steps are
// done. A failed step ends its trigger.
func (r *runner) runTriggers(ctx, armCtx context.Context, triggers []Trigger) (wait func() []TriggerResult) {
	armed := r.obs.arm(triggers)
	results := make([]TriggerResult, len(triggers))
	var wg sync.WaitGroup
	for i := range triggers {
		t, a := &triggers[i], armed[i]
		results[i].Name = t.Name
		wg.Go(func() {
			select {
			case <-a.fired:
			case <-armCtx.Done():
				return
			}
			res := &results[i]
			res.Fired, res.At = true, a.at
			r.rep.printf("TRIGGER %s fired at %s", t.Name, round(a.at))
			for j := range t.Steps {
				step := &t.Steps[j]
				began := r.cluster.Clock.Now()
				failure := step.run(ctx, r)
				sr := StepResult{Index: j + 1, Title: step.title(), Status: Passed, Took: r.cluster.Clock.Since(began),
					At: r.cluster.Clock.Since(r.obs.start), Failure: failure}
				if failure != "" {
					sr.Status = Failed
				}
				res.Steps = append(res.Steps, sr)
				r.rep.step(sr)
				if sr.Status == Failed {
					return
				}
			}
		})
	}
	return func() []TriggerResult {
		wg.Wait()
		return results
	}
}
