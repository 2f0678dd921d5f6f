package scenarios

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/restartbed/restartbed/builtins"
	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/hostproc"
	"github.com/restartbed/restartbed/internal/yamlpath"
	"github.com/restartbed/restartbed/timing"
)

// Problem is one thing wrong with a scenario file.
type Problem struct {
	File string
	// Line is 0 when the problem concerns the whole file.
	Line int
	// Path is the field, such as spec.steps[2].waitFor; empty for the whole document.
	Path    string
	Message string
}

func (p Problem) String() string {
	where := p.File
	if p.Line > 0 {
		where = fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	if p.Path == "" {
		return where + ": " + p.Message
	}
	return where + ": " + p.Path + ": " + p.Message
}

// InvalidError lists every problem found in scenario files. Nothing has been started when it is
// returned.
type InvalidError struct {
	Problems []Problem
}

func (e *InvalidError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// LoadAll loads scenario files; a directory stands for its *.yaml and *.yml files (not its
// subdirectories), in name order. It reports every problem of every file at once, as an
// *InvalidError.
func LoadAll(paths []string) ([]*Scenario, error) {
	files, fileProblems := yamlpath.Files(paths)
	var problems []Problem
	for _, fp := range fileProblems {
		problems = append(problems, Problem{File: fp.Path, Message: fp.Message})
	}
	var out []*Scenario
	names := map[string]string{}
	for _, f := range files {
		sc, err := Load(f)
		var invalid *InvalidError
		if errors.As(err, &invalid) {
			problems = append(problems, invalid.Problems...)
			continue
		}
		if other, dup := names[sc.Metadata.Name]; dup {
			problems = append(problems, Problem{File: f, Path: "metadata.name",
				Message: fmt.Sprintf("%q is also the name of the scenario in %s; names must be unique", sc.Metadata.Name, other)})
			continue
		}
		names[sc.Metadata.Name] = f
		out = append(out, sc)
	}
	if len(problems) > 0 {
		return nil, &InvalidError{Problems: problems}
	}
	return out, nil
}

// Load reads one scenario file and checks all of it, the files it names and the CEL it holds.
// Every problem comes back at once, as an *InvalidError with file:line.
func Load(path string) (*Scenario, error) {
	l := &loader{file: path, dir: filepath.Dir(path)}
	sc := l.load()
	if len(l.problems) > 0 {
		return nil, &InvalidError{Problems: l.problems}
	}
	return sc, nil
}

// Parse checks a scenario given as bytes; file names the scenario in messages and anchors its
// relative object files.
func Parse(file string, data []byte) (*Scenario, error) {
	l := &loader{file: file, dir: filepath.Dir(file)}
	sc := l.parse(data)
	if len(l.problems) > 0 {
		return nil, &InvalidError{Problems: l.problems}
	}
	return sc, nil
}

type loader struct {
	file, dir string
	problems  []Problem
}

// binary resolves a program's host executable relative to the scenario file and checks that it
// is one; it returns the absolute path.
func (l *loader) binary(name string, line int, path string) string {
	if !filepath.IsAbs(name) {
		name = filepath.Join(l.dir, name)
	}
	abs, err := filepath.Abs(name)
	if err != nil {
		l.addf(line, path, "%v", err)
		return name
	}
	if _, err := os.Stat(abs); err != nil {
		l.addf(line, path, "cannot use %s: %s", abs, yamlpath.ReadError(err))
	} else if err := hostproc.CheckBinary(abs); err != nil {
		l.addf(line, path, "%v", err)
	}
	return abs
}

// HostBinaryProblems lists the programs that name a host binary, as problems of a run that does
// not allow them: such a scenario is refused before anything starts.
func (sc *Scenario) HostBinaryProblems() []Problem {
	var problems []Problem
	for i, p := range sc.Spec.Programs {
		if p.Binary != "" {
			problems = append(problems, Problem{File: sc.File, Line: p.binaryLine, Path: fmt.Sprintf("spec.programs[%d].binary", i),
				Message: fmt.Sprintf("names the host binary %s, and this run does not allow host binaries "+
					"(pass --allow-host-binaries, or set RunOptions.AllowHostBinaries in Go)", p.Binary)})
		}
	}
	return problems
}

func (l *loader) addf(line int, path, format string, args ...any) {
	l.problems = append(l.problems, Problem{File: l.file, Line: line, Path: path, Message: fmt.Sprintf(format, args...)})
}

func (l *loader) load() *Scenario {
	data, err := os.ReadFile(l.file)
	if err != nil {
		l.addf(0, "", "cannot read: %s", yamlpath.ReadError(err))
		return nil
	}
	return l.parse(data)
}

func (l *loader) parse(data []byte) *Scenario {
	doc, ok := l.document(data)
	if !ok {
		return nil
	}
	l.checkKnown(doc, reflect.TypeFor[Scenario](), "")
	var sc Scenario
	if err := doc.Decode(&sc); err != nil {
		l.decodeError(err, "")
		for i := range l.problems {
			if p := &l.problems[i]; p.Path == "" && p.Line > 0 {
				p.Path = yamlpath.PathAt(doc, p.Line, "")
			}
		}
	}
	if len(l.problems) > 0 {
		return nil // the fields are not what the checks below expect
	}
	sc.File = l.file
	l.validate(&sc, doc)
	return &sc
}

// document parses data as exactly one YAML document with a mapping at its top.
func (l *loader) document(data []byte) (*yaml.Node, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			l.addf(0, "", "the file is empty; a scenario is one YAML document with apiVersion %s and kind %s", APIVersion, Kind)
		} else {
			l.decodeError(err, "")
		}
		return nil, false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		l.addf(extra.Line, "", "a second YAML document: a scenario file holds one scenario (put manifests under spec.objects)")
		return nil, false
	} else if !errors.Is(err, io.EOF) {
		l.decodeError(err, "")
		return nil, false
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	if doc.Kind != yaml.MappingNode {
		l.addf(doc.Line, "", "a scenario must be a YAML mapping with apiVersion, kind, metadata and spec")
		return nil, false
	}
	return doc, true
}

// decodeError turns a YAML error into problems with lines.
func (l *loader) decodeError(err error, path string) {
	var lineErr *lineError
	if errors.As(err, &lineErr) {
		l.addf(lineErr.line, path, "%s", lineErr.msg)
		return
	}
	for _, m := range yamlpath.Messages(err) {
		l.addf(m.Line, path, "%s", m.Message)
	}
}

var (
	yamlNodeType    = reflect.TypeFor[yaml.Node]()
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
)

// checkKnown reports every mapping key that names no field of the type it decodes into, with the
// fields that would be accepted there. yaml.v3 checks only the top level when asked to.
func (l *loader) checkKnown(node *yaml.Node, t reflect.Type, path string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == yamlNodeType || reflect.PointerTo(t).Implements(unmarshalerType) || node.Kind == yaml.AliasNode {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if node.Kind != yaml.MappingNode {
			return // Decode reports the wrong kind
		}
		fields := map[string]reflect.Type{}
		var names []string
		for f := range t.Fields() {
			tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if tag == "" || tag == "-" || !f.IsExported() {
				continue
			}
			fields[tag] = f.Type
			names = append(names, tag)
		}
		for i := 0; i+1 < len(node.Content); i += 2 {
			key, value := node.Content[i], node.Content[i+1]
			ft, ok := fields[key.Value]
			if !ok {
				l.addf(key.Line, yamlpath.Join(path, key.Value), "unknown field%s; %s takes %s",
					yamlpath.CaseHint(key.Value, names), orTop(path), strings.Join(names, ", "))
				continue
			}
			l.checkKnown(value, ft, yamlpath.Join(path, key.Value))
		}
	case reflect.Slice:
		if node.Kind == yaml.SequenceNode {
			for i, item := range node.Content {
				l.checkKnown(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
			}
		}
	case reflect.Map:
		if node.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(node.Content); i += 2 {
				l.checkKnown(node.Content[i+1], t.Elem(), yamlpath.Join(path, node.Content[i].Value))
			}
		}
	}
}

func orTop(path string) string {
	if path == "" {
		return "the scenario"
	}
	return path
}

func (l *loader) validate(sc *Scenario, doc *yaml.Node) {
	line := func(path ...any) int { return yamlpath.At(doc, path...).Line }
	if sc.APIVersion != APIVersion {
		l.addf(line("apiVersion"), "apiVersion", "must be %s, got %q", APIVersion, sc.APIVersion)
	}
	if sc.Kind != Kind {
		l.addf(line("kind"), "kind", "must be %s, got %q", Kind, sc.Kind)
	}
	if sc.Metadata.Name == "" {
		l.addf(line("metadata"), "metadata.name", "required: name the scenario (a DNS-1123 name such as worker-crash-group-restart)")
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(sc.Metadata.Name) {
			l.addf(line("metadata", "name"), "metadata.name", "%q: %s", sc.Metadata.Name, msg)
		}
	}
	spec := &sc.Spec
	if spec.Namespace == "" {
		spec.Namespace = DefaultNamespace
	}
	for _, msg := range validation.IsDNS1123Label(spec.Namespace) {
		l.addf(line("spec", "namespace"), "spec.namespace", "%q: %s", spec.Namespace, msg)
	}
	if spec.Timing == "" {
		spec.Timing = "fast"
	}
	if _, err := timing.ByName(spec.Timing); err != nil {
		l.addf(line("spec", "timing"), "spec.timing", "%v", err)
	}
	if release, err := controlplane.ResolveRelease(spec.KubernetesVersion); err != nil {
		l.addf(line("spec", "kubernetesVersion"), "spec.kubernetesVersion", "%v", err)
	} else if _, err := envtest.ResolveFeatureGates(release, spec.FeatureGates); err != nil {
		l.addf(line("spec", "featureGates"), "spec.featureGates", "%v", err)
	}
	l.validateNodes(sc, doc)
	if k := spec.Kubelets; k != nil && k.Processes < 1 {
		l.addf(line("spec", "kubelets"), "spec.kubelets.processes", "must be at least 1, got %d: how many kubelet processes share the nodes", k.Processes)
	}
	if k := spec.Controllers.KueueFailureRecovery; k != nil && k.Threshold != nil && k.Threshold.Duration <= 0 {
		l.addf(line("spec", "controllers", "kueueFailureRecovery", "threshold"), "spec.controllers.kueueFailureRecovery.threshold",
			"must be positive, got %v: it is how long after a pod's deletionTimestamp the pod is failed", k.Threshold.Duration)
	}
	for i := range spec.Programs {
		p := &spec.Programs[i]
		path := fmt.Sprintf("spec.programs[%d]", i)
		if p.Container == "" && p.Image == "" {
			l.addf(line("spec", "programs", i), path, "set container, image or both: a rule must say which containers it is for")
		}
		if p.Binary != "" {
			p.binaryLine = line("spec", "programs", i, "binary")
			p.Binary = l.binary(p.Binary, p.binaryLine, path+".binary")
		}
		for _, problem := range p.rule().Problems(builtins.Programs()) {
			field, msg, _ := strings.Cut(problem, ": ")
			l.addf(line("spec", "programs", i), path+field, "%s", msg)
		}
	}
	for i := range spec.Images {
		img := &spec.Images[i]
		path := fmt.Sprintf("spec.images[%d]", i)
		if img.Size != "" {
			if q, err := resource.ParseQuantity(img.Size); err != nil {
				l.addf(line("spec", "images", i, "size"), path+".size", "bad quantity %q: %v", img.Size, err)
			} else {
				img.sizeBytes = q.Value()
			}
		}
		for _, problem := range img.rule().Problems() {
			field, msg, _ := strings.Cut(problem, ": ")
			l.addf(line("spec", "images", i, strings.TrimPrefix(field, ".")), path+field, "%s", msg)
		}
	}
	for i, src := range spec.Objects {
		sc.Objects = append(sc.Objects, l.objects(src, yamlpath.At(doc, "spec", "objects", i), fmt.Sprintf("spec.objects[%d]", i))...)
	}
	var problems []Problem
	sc.CRDs, problems = crdsOf(sc.Objects)
	l.problems = append(l.problems, problems...)
	steps := yamlpath.At(doc, "spec", "steps")
	for i := range spec.Steps {
		l.checkStep(sc, &spec.Steps[i], yamlpath.At(steps, i), fmt.Sprintf("spec.steps[%d]", i))
	}
	l.checkInvariants(sc, doc)
	l.checkTriggers(sc, doc)
}

func (l *loader) validateNodes(sc *Scenario, doc *yaml.Node) {
	if len(sc.Spec.Nodes) == 0 {
		sc.Pools = []fakekubelet.NodePool{{Name: DefaultPool, Count: 1}}
		return
	}
	for i, n := range sc.Spec.Nodes {
		path := fmt.Sprintf("spec.nodes[%d]", i)
		node := yamlpath.At(doc, "spec", "nodes", i)
		pool := fakekubelet.NodePool{Name: n.Name, Count: 1, Labels: n.Labels, Capacity: corev1.ResourceList{}}
		if n.Name == "" {
			l.addf(node.Line, path+".name", "required: nodes are named <name>-0, <name>-1, ...")
		}
		if n.Count != nil {
			pool.Count = *n.Count
		}
		for name, value := range n.Capacity {
			q, err := resource.ParseQuantity(value)
			if err != nil {
				l.addf(yamlpath.At(node, "capacity", name).Line, path+".capacity."+name, "bad quantity %q: %v", value, err)
				continue
			}
			pool.Capacity[corev1.ResourceName(name)] = q
		}
		if n.Taints.Kind != 0 {
			if err := decodeKubernetes(&n.Taints, &pool.Taints); err != nil {
				l.addf(n.Taints.Line, path+".taints", "%v", err)
			}
		}
		sc.Pools = append(sc.Pools, pool)
	}
	if err := fakekubelet.ValidatePools(sc.Pools); err != nil && len(l.problems) == 0 {
		for _, msg := range strings.Split(err.Error(), "\n") {
			index := 0
			if _, err := fmt.Sscanf(msg, "pools[%d]", &index); err != nil {
				index = 0
			}
			l.addf(yamlpath.At(doc, "spec", "nodes", index).Line, "spec.nodes", "%s", strings.TrimPrefix(msg, "pools"))
		}
	}
}

// shardTarget checks a shard step's target: the scenario runs kubelet processes, and the target
// names one of them, or a node or pod whose holder it is.
func (l *loader) shardTarget(sc *Scenario, t *ShardTarget, node *yaml.Node, path string) {
	k := sc.Spec.Kubelets
	if k == nil || k.Processes < 1 {
		l.addf(node.Line, path, "a shard step needs the nodes in kubelet processes: set spec.kubelets.processes")
		return
	}
	given := 0
	for _, set := range []bool{t.Shard != "", t.Node != "", t.NodeOf != nil} {
		if set {
			given++
		}
	}
	switch {
	case given != 1:
		l.addf(node.Line, path, "give exactly one of shard, node and nodeOf")
	case t.Shard != "":
		var names []string
		for i := range k.Processes {
			names = append(names, envtest.KubeletProcessName(i))
		}
		if !slices.Contains(names, t.Shard) {
			l.addf(yamlpath.At(node, "shard").Line, path+".shard", "no kubelet process %q in this scenario; they are %s", t.Shard, strings.Join(names, ", "))
		}
	default:
		l.nodeTarget(sc, &NodeTarget{Node: t.Node, NodeOf: t.NodeOf}, node, path)
	}
}

// nodeNames are the names of the scenario's nodes.
func (sc *Scenario) nodeNames() map[string]bool {
	names := map[string]bool{}
	for _, p := range sc.Pools {
		for i := range p.Count {
			names[p.NodeName(i)] = true
		}
	}
	return names
}

// objects reads one object source: a file of YAML documents, or one inline manifest.
func (l *loader) objects(src ObjectSource, node *yaml.Node, path string) []Object {
	hasInline := src.Inline.Kind != 0
	switch {
	case src.File == "" && !hasInline:
		l.addf(node.Line, path, "set file or inline")
		return nil
	case src.File != "" && hasInline:
		l.addf(node.Line, path, "set file or inline, not both")
		return nil
	case hasInline:
		obj, msg := toObject(&src.Inline)
		if msg != "" {
			l.addf(src.Inline.Line, path+".inline", "%s", msg)
			return nil
		}
		return []Object{{Unstructured: obj, File: l.file, Line: src.Inline.Line}}
	}
	file := src.File
	if !filepath.IsAbs(file) {
		file = filepath.Join(l.dir, file)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		l.addf(yamlpath.At(node, "file").Line, path+".file", "cannot read %s: %s", file, yamlpath.ReadError(err))
		return nil
	}
	objs, problems := ReadManifests(file, data)
	if len(objs) == 0 && len(problems) == 0 {
		l.addf(yamlpath.At(node, "file").Line, path+".file", "%s holds no manifest", file)
	}
	l.problems = append(l.problems, problems...)
	return objs
}

// ReadManifests decodes the YAML documents of a manifest file, each with its line; empty
// documents are skipped.
func ReadManifests(file string, data []byte) ([]Object, []Problem) {
	var objs []Object
	problems := eachDocument(file, data, func(content *yaml.Node) *Problem {
		obj, msg := toObject(content)
		if msg != "" {
			return &Problem{File: file, Line: content.Line, Message: msg}
		}
		objs = append(objs, Object{Unstructured: obj, File: file, Line: content.Line})
		return nil
	})
	return objs, problems
}

// eachDocument calls f with each non-empty YAML document of a file, in order, and returns the
// problems f reports, and the file's syntax error, after which it reads no further.
func eachDocument(file string, data []byte, f func(content *yaml.Node) *Problem) []Problem {
	var problems []Problem
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return problems
		}
		if err != nil {
			sub := &loader{file: file}
			sub.decodeError(err, "")
			return append(problems, sub.problems...)
		}
		content := &doc
		if doc.Kind == yaml.DocumentNode {
			if len(doc.Content) == 0 {
				continue
			}
			content = doc.Content[0]
		}
		if content.Kind == yaml.ScalarNode && content.Tag == "!!null" {
			continue
		}
		if p := f(content); p != nil {
			problems = append(problems, *p)
		}
	}
}

// toObject converts a manifest to an unstructured object, or says why it is not one.
func toObject(node *yaml.Node) (*unstructured.Unstructured, string) {
	if node.Kind != yaml.MappingNode {
		return nil, "a manifest must be a mapping with apiVersion, kind and metadata"
	}
	obj, err := yamlpath.ToUnstructured(node)
	if err != nil {
		return nil, err.Error()
	}
	if obj.GetName() == "" && obj.GetGenerateName() == "" {
		return nil, fmt.Sprintf("%s has no metadata.name", obj.GetKind())
	}
	return obj, ""
}

// decodeKubernetes decodes a YAML node into a Kubernetes API type as the apiserver would read its
// JSON, refusing unknown fields.
func decodeKubernetes(node *yaml.Node, out any) error {
	var v any
	if err := node.Decode(&v); err != nil {
		return err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return sigsyaml.UnmarshalStrict(data, out)
}

func (l *loader) required(value string, node *yaml.Node, path string) {
	if value == "" {
		l.addf(node.Line, path, "required")
	}
}

// podRef checks a POD: {name} or {selector, index}.
func (l *loader) podRef(p PodRef, node *yaml.Node, path string) {
	switch {
	case p.Name == "" && p.Selector == "":
		l.addf(node.Line, path, "give name, or selector (and index)")
	case p.Name != "" && (p.Selector != "" || p.Index != nil):
		l.addf(node.Line, path, "give name, or selector (and index), not both")
	case p.Name != "":
		for _, msg := range validation.IsDNS1123Subdomain(p.Name) {
			l.addf(yamlpath.At(node, "name").Line, path+".name", "%q is not a pod name: %s", p.Name, msg)
		}
	default:
		if _, err := labels.Parse(p.Selector); err != nil {
			l.addf(yamlpath.At(node, "selector").Line, path+".selector", "bad label selector %q: %v", p.Selector, err)
		}
		if p.Index != nil && *p.Index < 0 {
			l.addf(yamlpath.At(node, "index").Line, path+".index", "must not be negative, got %d", *p.Index)
		}
	}
}

// nodeTarget checks {node} or {nodeOf}; a named node must be one of the scenario's.
func (l *loader) nodeTarget(sc *Scenario, t *NodeTarget, node *yaml.Node, path string) {
	switch {
	case t.Node == "" && t.NodeOf == nil:
		l.addf(node.Line, path, "give node or nodeOf")
	case t.Node != "" && t.NodeOf != nil:
		l.addf(node.Line, path, "give node or nodeOf, not both")
	case t.NodeOf != nil:
		l.podRef(*t.NodeOf, yamlpath.At(node, "nodeOf"), path+".nodeOf")
	default:
		names := sc.nodeNames()
		if !names[t.Node] {
			known := make([]string, 0, len(names))
			for n := range names {
				known = append(known, n)
			}
			slices.Sort(known)
			l.addf(yamlpath.At(node, "node").Line, path+".node", "no node %q in this scenario; its nodes are %s", t.Node, strings.Join(known, ", "))
		}
	}
}
