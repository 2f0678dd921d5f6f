// Package kubeletconfig reads the KubeletConfiguration file a node's kubelet reads when it starts
// (the kubelet's --config) and says what of it restartbed's kubelet takes: the crash-loop backoff
// settings of the node, the only part of a kubelet's configuration that differs between
// restartbed's nodes. Every other field may restate what the kubelet is — what its /configz
// reports, so that a file written back from /configz, as upstream's node e2e specs write one, is
// accepted — and any other value is refused with the field's path and line, never ignored.
//
// It owns the file's decoding and checks, and the crash-loop backoff the settings give
// (newCrashLoopBackOff upstream). It must not touch nodes, pods or the API: the kubelet reads
// the file at each start of a node's kubelet and applies what Load returns.
package kubeletconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/restartbed/restartbed/internal/yamlpath"
	"github.com/restartbed/restartbed/timing"
)

// The kubelet's gates a node's file may set apart from the cluster's: the kubelet reads them
// for its own crash-loop backoff. KubeletCrashLoopBackOffMax is beta and on by default from 1.35;
// ReduceDefaultCrashLoopBackOffDecay alpha and off.
const (
	GateCrashLoopBackOffMax    = "KubeletCrashLoopBackOffMax"
	GateReduceCrashLoopBackOff = "ReduceDefaultCrashLoopBackOffDecay"
)

// NodeGates are the gates a node's file may set apart from the cluster's.
var NodeGates = []string{GateCrashLoopBackOffMax, GateReduceCrashLoopBackOff}

// The kubelet's crash-loop backoff (pkg/kubelet/kubelet.go, newCrashLoopBackOff): its first
// delay and its cap, reduced under ReduceDefaultCrashLoopBackOffDecay, and the default and bounds
// of crashLoopBackOff.maxContainerRestartPeriod (the configuration's defaults and validation).
const (
	initialBackOff          = 10 * time.Second
	maxBackOff              = 300 * time.Second
	reducedInitialBackOff   = time.Second
	reducedMaxBackOff       = 60 * time.Second
	defaultMaxRestartPeriod = 300 * time.Second
	minMaxRestartPeriod     = time.Second
	maxMaxRestartPeriod     = 300 * time.Second
)

// periodPath is the field of the crash-loop backoff's cap.
const periodPath = "crashLoopBackOff.maxContainerRestartPeriod"

// Settings are what a node's kubelet takes from its configuration.
type Settings struct {
	// Gates are the kubelet's feature gates: the cluster's, with the file's NodeGates over them.
	Gates map[string]bool
	// MaxContainerRestartPeriod is crashLoopBackOff.maxContainerRestartPeriod: the cap of the
	// crash-loop backoff, set when KubeletCrashLoopBackOffMax is on and zero when it is off.
	MaxContainerRestartPeriod time.Duration
}

// Defaults are the settings of a kubelet without a file, under the cluster's gates.
func Defaults(gates map[string]bool) Settings {
	s := Settings{Gates: maps.Clone(gates)}
	if s.Gates[GateCrashLoopBackOffMax] {
		s.MaxContainerRestartPeriod = defaultMaxRestartPeriod
	}
	return s
}

// CrashLoopBackOff is the first delay and the cap of the crash-loop backoff these settings give,
// as the kubelet computes them: 10 s doubling to 5 min, 1 s to 60 s under
// ReduceDefaultCrashLoopBackOffDecay, and under KubeletCrashLoopBackOffMax the cap is
// maxContainerRestartPeriod (which may be above the reduced cap) and the first delay no more than
// the cap. The profile's own, when shorter, bound both: a fast profile stays fast.
func (s Settings) CrashLoopBackOff(profile timing.Profile) (initial, maxDelay time.Duration) {
	initial, maxDelay = initialBackOff, maxBackOff
	if s.Gates[GateReduceCrashLoopBackOff] {
		initial, maxDelay = reducedInitialBackOff, reducedMaxBackOff
	}
	if s.Gates[GateCrashLoopBackOffMax] {
		maxDelay = s.MaxContainerRestartPeriod
		initial = min(initial, maxDelay)
	}
	return min(initial, profile.CrashLoopBackOff), min(maxDelay, profile.CrashLoopBackOffMax)
}

// Apply writes the settings into a configuration as /configz reports it.
func (s Settings) Apply(cfg *kubeletconfigv1beta1.KubeletConfiguration) {
	cfg.FeatureGates = maps.Clone(s.Gates)
	cfg.CrashLoopBackOff = kubeletconfigv1beta1.CrashLoopBackOffConfig{}
	if s.MaxContainerRestartPeriod != 0 {
		cfg.CrashLoopBackOff.MaxContainerRestartPeriod = durationOf(s.MaxContainerRestartPeriod)
	}
}

// Load reads the file at path and returns the settings it gives the kubelet whose configuration
// without a file is base (as /configz reports it, the cluster's gates in base.FeatureGates). Every
// problem of the file is reported at once, each with its line and field path; a file with any
// problem gives no settings.
func Load(path string, base *kubeletconfigv1beta1.KubeletConfiguration) (Settings, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Settings{}, fmt.Errorf("kubelet configuration %s: %s", path, yamlpath.ReadError(err))
	}
	s, problems := parse(data, base)
	if len(problems) == 0 {
		return s, nil
	}
	// One problem a line, each as FILE:LINE: FIELD: what is wrong.
	lines := make([]string, len(problems))
	for i, p := range problems {
		var le lineError
		if errors.As(p, &le) {
			lines[i] = fmt.Sprintf("%s:%d: %s", path, le.line, le.msg)
		} else {
			lines[i] = fmt.Sprintf("%s: %v", path, p)
		}
	}
	return Settings{}, fmt.Errorf("kubelet configuration refused: %s", strings.Join(lines, "\n"))
}

// lineError is a problem at a line of the file.
type lineError struct {
	line int
	msg  string
}

func (e lineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

// Check reads the file at path and reports what is wrong with it whatever the kubelet: YAML,
// type, unknown fields and values out of range, each with its line and field path. Load checks
// the rest, against the kubelet that reads it; Check lets a command refuse a bad file before it
// starts anything.
func Check(path string) error {
	_, err := Load(path, nil)
	return err
}

// parse checks a file's content against base and returns its settings, or its problems; with a
// nil base, only what Check checks.
func parse(data []byte, base *kubeletconfigv1beta1.KubeletConfiguration) (Settings, []error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Settings{}, lineErrors(err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return Settings{}, []error{errors.New("not a KubeletConfiguration: the file must hold one YAML (or JSON) mapping")}
	}
	root := doc.Content[0]
	var problems []error
	problem := func(n *yaml.Node, path, format string, args ...any) {
		problems = append(problems, lineError{n.Line, path + ": " + fmt.Sprintf(format, args...)})
	}
	for _, field := range []struct{ name, want string }{
		{"apiVersion", kubeletconfigv1beta1.SchemeGroupVersion.String()}, {"kind", "KubeletConfiguration"},
	} {
		switch v := yamlpath.Value(root, field.name); {
		case v == nil:
			problem(root, field.name, "missing: a kubelet configuration file says %s: %s", field.name, field.want)
		case v.Value != field.want:
			problem(v, field.name, "%q: restartbed's kubelets read %s %s", v.Value, field.name, field.want)
		}
	}
	refused := false
	c := checker{problem: problem, refused: &refused, compare: base != nil}
	if base == nil {
		base = &kubeletconfigv1beta1.KubeletConfiguration{}
	}
	c.walk(root, reflect.TypeFor[kubeletconfigv1beta1.KubeletConfiguration](), reflect.ValueOf(base), "")
	if refused {
		problems = append(problems, fmt.Errorf("a file may change only %s; any other field may only restate what the kubelet is (its /configz)",
			strings.Join(takenFields(), ", ")))
	}
	if len(problems) > 0 {
		return Settings{}, problems
	}
	var cfg kubeletconfigv1beta1.KubeletConfiguration
	if err := sigsyaml.Unmarshal(data, &cfg); err != nil { // every value decoded alone above
		return Settings{}, []error{err}
	}
	period := yamlpath.Find(root, periodPath)
	set := cfg.CrashLoopBackOff.MaxContainerRestartPeriod
	if !c.compare {
		return Settings{}, nil
	}
	s := Defaults(base.FeatureGates)
	for _, gate := range NodeGates {
		if v, ok := cfg.FeatureGates[gate]; ok {
			s.Gates[gate] = v
		}
	}
	switch {
	case !s.Gates[GateCrashLoopBackOffMax] && set != nil:
		problem(period, periodPath, "must not be set while the feature gate %s is off", GateCrashLoopBackOffMax)
	case !s.Gates[GateCrashLoopBackOffMax]:
		s.MaxContainerRestartPeriod = 0
	case set != nil:
		s.MaxContainerRestartPeriod = set.Duration
	}
	return s, problems
}

// taken are the fields whose values the kubelet takes from the file rather than compares with
// its own: the document's type, and what Settings holds.
func taken(path string) bool {
	if path == "apiVersion" || path == "kind" || path == periodPath {
		return true
	}
	gate, ok := strings.CutPrefix(path, "featureGates.")
	return ok && slices.Contains(NodeGates, gate)
}

// checker walks a file's YAML beside the configuration's type and the kubelet's own
// configuration, and reports each field the file names that the configuration has not, each value
// that is not of its field's type, and each value that differs from the kubelet's in a field the
// kubelet does not take.
type checker struct {
	problem func(n *yaml.Node, path, format string, args ...any)
	// refused is set when a value differs in a field the kubelet does not take.
	refused *bool
	// compare: the kubelet's configuration is known, and values and gates are checked against it.
	compare bool
}

func (c checker) walk(n *yaml.Node, t reflect.Type, base reflect.Value, path string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	given := base
	base = deref(base)
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode && !decodesItself(t):
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			at := yamlpath.Join(path, key.Value)
			index, ok := fieldIndex(t, key.Value)
			if !ok {
				c.problem(key, at, "unknown field%s", yamlpath.CaseHint(key.Value, fieldNames(t)))
				continue
			}
			c.walk(value, t.FieldByIndex(index).Type, fieldAt(base, index), at)
		}
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			at := yamlpath.Join(path, key.Value)
			k := reflect.ValueOf(key.Value).Convert(t.Key())
			if c.compare && path == "featureGates" && !base.MapIndex(k).IsValid() {
				c.problem(key, at, "unrecognized feature gate")
				continue
			}
			c.walk(value, t.Elem(), mapIndex(base, k), at)
		}
	default:
		file, err := decode(n, t)
		if err != nil {
			c.problem(n, path, "%s", err)
			return
		}
		if d, ok := file.Interface().(metav1.Duration); ok && path == periodPath && (d.Duration < minMaxRestartPeriod || d.Duration > maxMaxRestartPeriod) {
			c.problem(n, path, "%s: must be between %s and %s", d.Duration, minMaxRestartPeriod, maxMaxRestartPeriod)
			return
		}
		if !c.compare || taken(path) || sameValue(file, base) {
			return
		}
		c.problem(n, path, "%s: restartbed's kubelet does not take this field from a file (it is %s)", show(file), show(given))
		*c.refused = true
	}
}

// decode reads one value of the file as its field's type, as the kubelet reads the whole file
// (JSON tags, durations as "30s").
func decode(n *yaml.Node, t reflect.Type) (reflect.Value, error) {
	v := reflect.New(t)
	data, err := yaml.Marshal(n)
	if err == nil {
		err = sigsyaml.Unmarshal(data, v.Interface())
	}
	if err != nil {
		msg := err.Error()
		for _, prefix := range []string{"json: ", "while decoding JSON: "} {
			if i := strings.LastIndex(msg, prefix); i >= 0 {
				msg = msg[i+len(prefix):]
			}
		}
		return v, fmt.Errorf("%s, want %s", yamlpath.Friendly(msg), typeName(t))
	}
	return v.Elem(), nil
}

// typeName names a field's type for messages.
func typeName(t reflect.Type) string {
	switch {
	case isDuration(t):
		return "a duration such as 30s"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Float64:
		return "a number"
	case t.Kind() == reflect.Slice:
		return "a list"
	default:
		return "a mapping"
	}
}

// takenFields names the fields a file may change, for messages.
func takenFields() []string {
	out := []string{periodPath}
	for _, g := range NodeGates {
		out = append(out, "featureGates."+g)
	}
	return out
}

// inlined reports whether JSON reads the field's own fields as its struct's: an embedded
// struct without a JSON name (encoding/json's rule), or one tagged inline.
func inlined(f reflect.StructField) bool {
	tag, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
	return tag == "" && f.Type.Kind() == reflect.Struct && (f.Anonymous || strings.Contains(","+opts+",", ",inline,"))
}

// fieldIndex finds the field a JSON name names, in inlined structs too.
func fieldIndex(t reflect.Type, name string) ([]int, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if inlined(f) {
			if inner, ok := fieldIndex(f.Type, name); ok {
				return append([]int{i}, inner...), true
			}
			continue
		}
		if tag == name {
			return []int{i}, true
		}
	}
	return nil, false
}

// fieldNames are a struct's JSON names, inlined structs' included.
func fieldNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case inlined(f):
			out = append(out, fieldNames(f.Type)...)
		case tag != "" && tag != "-":
			out = append(out, tag)
		}
	}
	return out
}

// deref follows pointers; a nil one gives the zero value of what it points to, which is what an
// absent field means here.
func deref(v reflect.Value) reflect.Value {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.Zero(v.Type().Elem())
		}
		v = v.Elem()
	}
	return v
}

func fieldAt(v reflect.Value, index []int) reflect.Value {
	for _, i := range index {
		v = deref(v).Field(i)
	}
	return v
}

func mapIndex(m, k reflect.Value) reflect.Value {
	if v := m.MapIndex(k); v.IsValid() {
		return v
	}
	return reflect.Zero(m.Type().Elem())
}

// sameValue compares two values of a field, a zero value alike however it is written (absent,
// null, false, 0, "", an empty list or map, a zero quantity): a configuration written back from
// the kubelet's own states every field it did not set as its type's zero.
func sameValue(a, b reflect.Value) bool {
	za, zb := isZero(a), isZero(b)
	if za || zb {
		return za && zb
	}
	return equality.Semantic.DeepEqual(a.Interface(), b.Interface())
}

func isZero(v reflect.Value) bool {
	v = deref(v)
	switch v.Kind() {
	case reflect.Map, reflect.Slice:
		return v.Len() == 0
	case reflect.Struct:
		p := reflect.New(v.Type())
		p.Elem().Set(v)
		if z, ok := p.Interface().(interface{ IsZero() bool }); ok {
			return z.IsZero()
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() && !isZero(v.Field(i)) {
				return false
			}
		}
		return true
	default:
		return v.IsZero()
	}
}

// isDuration tells a metav1.Duration.
func isDuration(t reflect.Type) bool { return t == reflect.TypeFor[metav1.Duration]() }

// decodesItself tells a type with a JSON form of its own (durations, quantities): its value is
// one field, compared whole.
func decodesItself(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]())
}

// show writes a value for a message, as JSON would; a nil one is "unset".
func show(v reflect.Value) string {
	if v.Kind() == reflect.Pointer && v.IsNil() {
		return "unset"
	}
	out, err := json.Marshal(v.Interface())
	if err != nil || string(out) == "null" {
		return "unset"
	}
	return string(out)
}

// lineErrors turns yaml.v3's errors into line-numbered ones.
func lineErrors(err error) []error {
	var out []error
	for _, m := range yamlpath.Messages(err) {
		out = append(out, lineError{m.Line, m.Message})
	}
	if len(out) == 0 {
		out = append(out, err)
	}
	return out
}

func durationOf(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
