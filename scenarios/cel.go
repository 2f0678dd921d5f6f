package scenarios

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	k8scel "k8s.io/apiserver/pkg/cel/environment"

	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/timing"
)

// The variables every expression sees (SCENARIOS.md, "CEL").
const (
	varPods     = "pods"
	varJobs     = "jobs"
	varJobSets  = "jobsets"
	varServices = "services"
	varEvents   = "events"
	varNodes    = "nodes"
	varCaptured = "captured"
	varElapsed  = "elapsed"
	varTiming   = "timing"
	varKube     = "kubernetes"
)

// listVariables are the object lists, in the order docs/scenarios.md lists them.
var listVariables = []string{varPods, varJobs, varJobSets, varServices, varEvents, varNodes}

var (
	envOnce sync.Once
	celEnv  *cel.Env
	envErr  error
)

// environment is the CEL environment of every expression: Kubernetes' own, as the apiserver
// gives new ValidatingAdmissionPolicy expressions (k8s.io/apiserver/pkg/cel/environment), at
// the oldest supported release so that an expression means the same on every release a scenario
// runs on, with its libraries (strings, lists, sets, regex, URLs, quantities, IP and CIDR,
// format, semver, two-variable comprehensions, optional types), its runtime cost limit, and
// restartbed's variables and cel-go's math library (docs/scenarios.md lists them all).
func environment() (*cel.Env, error) {
	envOnce.Do(func() {
		oldest, err := version.ParseGeneric(controlplane.Releases()[0].Minor())
		if err != nil {
			envErr = fmt.Errorf("the oldest supported release: %w", err)
			return
		}
		opts := []cel.EnvOption{
			cel.Variable(varCaptured, cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable(varElapsed, cel.DurationType),
			cel.Variable(varTiming, cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable(varKube, cel.MapType(cel.StringType, cel.DynType)),
			ext.Math(),
		}
		for _, name := range listVariables {
			opts = append(opts, cel.Variable(name, cel.ListType(cel.DynType)))
		}
		compat := version.MajorMinor(oldest.Major(), oldest.Minor())
		set, err := k8scel.MustBaseEnvSet(compat).Extend(k8scel.VersionedOptions{IntroducedVersion: compat, EnvOptions: opts})
		if err != nil {
			envErr = fmt.Errorf("building the CEL environment: %w", err)
			return
		}
		celEnv, envErr = set.Env(k8scel.NewExpressions)
	})
	return celEnv, envErr
}

// ErrCostLimit is the error of an evaluation that went over the cost limit of the apiserver's
// CEL (k8s.io/apiserver/pkg/apis/cel.PerCallLimit, about a tenth of a second of work): the
// expression does too much for the objects it reads, whatever a waitFor waits for.
var ErrCostLimit = fmt.Errorf("the evaluation went over CEL's cost limit of %d, the apiserver's per-call limit: "+
	"make the expression do less (filter before nested comprehensions)", celconfig.PerCallLimit)

var (
	typeOfAnySlice = reflect.TypeFor[[]any]()
	typeOfAnyMap   = reflect.TypeFor[map[string]any]()
)

// expression is a compiled CEL expression of a scenario file, with where the file has it.
type expression struct {
	source  string
	program cel.Program
	// at is where the file has it, as "file:line (field path)", for errors found when it runs.
	at string
}

// compile parses and checks an expression; wantBool requires a boolean result (waitFor, expect).
func compile(source string, wantBool bool) (cel.Program, error) {
	env, err := environment()
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(source) == "" {
		return nil, errors.New("empty expression")
	}
	ast, iss := env.Compile(source)
	if iss.Err() != nil {
		return nil, fmt.Errorf("CEL does not compile: %s", strings.ReplaceAll(iss.Err().Error(), "\n", "\n    "))
	}
	if wantBool && !ast.OutputType().IsExactType(types.BoolType) && !ast.OutputType().IsExactType(types.DynType) {
		return nil, fmt.Errorf("CEL must be a boolean, this is a %s", ast.OutputType())
	}
	// The environment's program options: the apiserver's evaluation options, cost tracking and
	// cost limit.
	prg, err := env.Program(ast)
	if err != nil {
		return nil, fmt.Errorf("CEL: %w", err)
	}
	return prg, nil
}

// activation is what an expression reads.
type activation map[string]any

func newActivation(lists map[string][]any, captured map[string]any, elapsed time.Duration, fixed runVariables) activation {
	a := activation{varCaptured: captured, varElapsed: elapsed, varTiming: fixed.timing, varKube: fixed.kubernetes}
	for _, name := range listVariables {
		l := lists[name]
		if l == nil {
			l = []any{}
		}
		a[name] = l
	}
	return a
}

// runVariables are the variables fixed for a run.
type runVariables struct {
	timing, kubernetes map[string]any
}

// newRunVariables gives a run's fixed variables: its timing profile and its Kubernetes release
// (a version such as v1.37.2).
func newRunVariables(sc *Scenario, p timing.Profile, kubernetes string) runVariables {
	return runVariables{timing: timingVariable(sc, p), kubernetes: kubernetesVariable(kubernetes)}
}

// kubernetesVariable is the release as expressions read it: kubernetes.version ("v1.37.2") and
// kubernetes.minor (37), for steps whose outcome the release decides.
func kubernetesVariable(v string) map[string]any {
	out := map[string]any{"version": v, "minor": int64(0)}
	if parsed, err := version.ParseGeneric(v); err == nil {
		out["minor"] = int64(parsed.Minor())
	}
	return out
}

// timingVariable is the scenario's timing as expressions read it: the profile's name and each of
// its durations by name (timing.Profile.Durations), with the Kueue threshold the scenario set.
func timingVariable(sc *Scenario, p timing.Profile) map[string]any {
	v := map[string]any{"name": p.Name}
	for _, d := range p.Durations() {
		v[d.Name] = d.Value
	}
	if k := sc.Spec.Controllers.KueueFailureRecovery; k != nil && k.Threshold != nil {
		v["kueueFailureRecoveryThreshold"] = k.Threshold.Duration
	}
	return v
}

// evalBool evaluates a boolean expression; an evaluation error is returned, not counted as false.
func evalBool(prg cel.Program, a activation) (bool, error) {
	v, err := eval(prg, a)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("the expression gave %v (%T), not a boolean", v, v)
	}
	return b, nil
}

// eval evaluates an expression to a plain Go value (what a capture stores); an evaluation over
// the cost limit is ErrCostLimit.
func eval(prg cel.Program, a activation) (any, error) {
	out, _, err := prg.Eval(map[string]any(a))
	if err != nil {
		var cancelled interpreter.EvalCancelledError
		if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
			return nil, ErrCostLimit
		}
		return nil, err
	}
	return native(out)
}

// native converts a CEL value to plain Go values (lists, string-keyed maps, scalars) that a
// later expression reads back the same way.
func native(v ref.Val) (any, error) {
	switch v.Type() {
	case types.ListType:
		items, err := v.ConvertToNative(typeOfAnySlice)
		if err != nil {
			return nil, err
		}
		list := items.([]any)
		for i, item := range list {
			if rv, ok := item.(ref.Val); ok {
				if list[i], err = native(rv); err != nil {
					return nil, err
				}
			}
		}
		return list, nil
	case types.MapType:
		m, err := v.ConvertToNative(typeOfAnyMap)
		if err != nil {
			return nil, err
		}
		out := map[string]any{}
		for k, item := range m.(map[string]any) {
			if rv, ok := item.(ref.Val); ok {
				if item, err = native(rv); err != nil {
					return nil, err
				}
			}
			out[k] = item
		}
		return out, nil
	}
	return v.Value(), nil
}
