package scenarios

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/images"
	"github.com/restartbed/restartbed/fakekubelet/program"
)

// The scenario format's identity.
const (
	APIVersion = "restartbed.dev/v1alpha1"
	Kind       = "Scenario"
)

// Defaults of the format (docs/scenarios.md).
const (
	DefaultNamespace   = "default"
	DefaultPool        = "node"
	DefaultWaitTimeout = 60 * time.Second
	// DefaultKueueThreshold is how long after deletionTimestamp Kueue's failure recovery waits.
	DefaultKueueThreshold = 60 * time.Second
)

// Scenario is one scenario file, decoded and checked by Load.
type Scenario struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Metadata   Metadata `yaml:"metadata"`
	Spec       Spec     `yaml:"spec"`

	// File is the path the scenario was loaded from.
	File string `yaml:"-"`
	// Objects are spec.objects, read and decoded, in order.
	Objects []Object `yaml:"-"`
	// CRDs are the CustomResourceDefinitions among Objects, which the cluster installs before
	// kube-controller-manager starts (ClusterOptions).
	CRDs []*apiextensionsv1.CustomResourceDefinition `yaml:"-"`
	// Pools are spec.nodes as the fake kubelet takes them (the default pool when none is given).
	Pools []fakekubelet.NodePool `yaml:"-"`
}

// Metadata names the scenario.
type Metadata struct {
	Name string `yaml:"name"`
}

// Spec is what the scenario sets up and does.
type Spec struct {
	Description string `yaml:"description"`
	Namespace   string `yaml:"namespace"`
	Timing      string `yaml:"timing"`
	// KubernetesVersion is the release the scenario runs on ("1.36" or "1.36.4"); empty means
	// the newest supported.
	KubernetesVersion string          `yaml:"kubernetesVersion"`
	FeatureGates      map[string]bool `yaml:"featureGates"`
	Nodes             []NodePool      `yaml:"nodes"`
	// Kubelets runs the nodes in kubelet processes instead of in restartbed's own (optional).
	Kubelets    *Kubelets   `yaml:"kubelets"`
	Controllers Controllers `yaml:"controllers"`
	Programs    []Program   `yaml:"programs"`
	Images      []Image     `yaml:"images"`
	// ImageCommands: containers without a command run their image's entrypoint and default
	// command (known images, docs/images.md) instead of running until stopped.
	ImageCommands bool           `yaml:"imageCommands"`
	Objects       []ObjectSource `yaml:"objects"`
	Steps         []Step         `yaml:"steps"`
	// Invariants must hold on every state the run observes; the first broken ends the run.
	Invariants []Invariant `yaml:"invariants"`
	// Triggers run steps alongside spec.steps when an expression first holds.
	Triggers []Trigger `yaml:"triggers"`
}

// NodePool is one entry of spec.nodes.
type NodePool struct {
	Name     string            `yaml:"name"`
	Count    *int              `yaml:"count"`
	Labels   map[string]string `yaml:"labels"`
	Capacity map[string]string `yaml:"capacity"`
	// Taints is a corev1.Taint list, decoded as Kubernetes decodes it.
	Taints yaml.Node `yaml:"taints"`
}

// Kubelets is spec.kubelets: the scenario's nodes run in `restartbed kubelet` processes of one
// shard group, kubelet-0 ... kubelet-(processes-1), which divide the nodes among themselves, as
// `restartbed up --kubelets` runs them (docs/join.md); the shard steps fail one of them.
type Kubelets struct {
	Processes int `yaml:"processes"`
	// Takeover: once a process's shard Lease expires (killShard), the live processes take its
	// nodes over and start their pods' containers anew; without it, the nodes stay NotReady.
	Takeover bool `yaml:"takeover"`
}

// Controllers are the optional controllers a scenario turns on.
type Controllers struct {
	KueueFailureRecovery *KueueFailureRecovery `yaml:"kueueFailureRecovery"`
}

// KueueFailureRecovery configures Kueue's failure-recovery (pod termination) controller.
type KueueFailureRecovery struct {
	Enabled   bool      `yaml:"enabled"`
	Threshold *Duration `yaml:"threshold"`
}

// Program assigns what containers run.
type Program struct {
	Container string `yaml:"container"`
	Image     string `yaml:"image"`
	Builtin   string `yaml:"builtin"`
	Run       string `yaml:"run"`
	// Binary is a host executable, relative to the scenario file; Load makes it absolute. It
	// runs only in runs that allow host binaries (RunOptions.AllowHostBinaries).
	Binary string `yaml:"binary"`
	// binaryLine is the line of binary in the scenario file.
	binaryLine int
}

// rule is the fake kubelet's form of the program assignment.
func (p Program) rule() program.Rule {
	return program.Rule{Container: p.Container, Image: p.Image, Builtin: p.Builtin, Script: p.Run, Binary: p.Binary}
}

// Image is one entry of spec.images: how the registry treats the images it matches
// (fakekubelet/images.Rule).
type Image struct {
	Image       string    `yaml:"image"`
	Missing     bool      `yaml:"missing"`
	Unreachable bool      `yaml:"unreachable"`
	FailPulls   int       `yaml:"failPulls"`
	PullTime    *Duration `yaml:"pullTime"`
	// Size is a quantity ("40Gi"); Load reads it into sizeBytes.
	Size      string `yaml:"size"`
	sizeBytes int64
}

// rule is the fake kubelet's form of the entry.
func (i Image) rule() images.Rule {
	r := images.Rule{Image: i.Image, Missing: i.Missing, Unreachable: i.Unreachable, FailPulls: i.FailPulls, SizeBytes: i.sizeBytes}
	if i.PullTime != nil {
		r.PullTime = &i.PullTime.Duration
	}
	return r
}

// ObjectSource is a manifest file (multi-document YAML, relative to the scenario file) or one
// inline manifest.
type ObjectSource struct {
	File   string    `yaml:"file"`
	Inline yaml.Node `yaml:"inline"`
}

// Object is one manifest to apply, with where it came from.
type Object struct {
	*unstructured.Unstructured
	// File and Line are where the manifest starts; File may instead say in words where an
	// object made by a tool came from, Line then 0.
	File string
	Line int
}

// Origin is "FILE:LINE" of the manifest, or its File alone when it has no line.
func (o Object) Origin() string {
	if o.Line > 0 {
		return fmt.Sprintf("%s:%d", o.File, o.Line)
	}
	return o.File
}

// NodeTarget names a node directly or as the node a pod is bound to.
type NodeTarget struct {
	Node   string  `yaml:"node"`
	NodeOf *PodRef `yaml:"nodeOf"`
}

// ComponentTarget names one of the control plane's processes (envtest.ComponentNames).
type ComponentTarget struct {
	Component string `yaml:"component"`
}

// ShardTarget names one of the kubelet processes (spec.kubelets): by name (kubelet-1), or as
// the one that holds a node, or a pod's node, when the step runs.
type ShardTarget struct {
	Shard  string  `yaml:"shard"`
	Node   string  `yaml:"node"`
	NodeOf *PodRef `yaml:"nodeOf"`
}

func (t *ShardTarget) String() string {
	if t.Shard != "" {
		return t.Shard
	}
	return "holding " + (&NodeTarget{Node: t.Node, NodeOf: t.NodeOf}).String()
}

// PodRef is {name} or {selector, index}: the index-th of the matching pods sorted by name.
type PodRef struct {
	Name     string `yaml:"name"`
	Selector string `yaml:"selector"`
	Index    *int   `yaml:"index"`
}

func (p PodRef) String() string {
	if p.Name != "" {
		return p.Name
	}
	index := 0
	if p.Index != nil {
		index = *p.Index
	}
	return fmt.Sprintf("%s[%d]", p.Selector, index)
}

// Duration is a Go duration string ("500ms", "30s", "5m").
type Duration struct {
	time.Duration
}

// UnmarshalYAML reads a duration string, reporting the line of a bad one.
func (d *Duration) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind != yaml.ScalarNode || node.Tag == "!!null" {
		return &lineError{line: node.Line, msg: "a duration must be a string such as 500ms, 30s or 5m"}
	}
	v, err := time.ParseDuration(node.Value)
	if err != nil {
		return &lineError{line: node.Line, msg: fmt.Sprintf("bad duration %q: use a Go duration such as 500ms, 30s or 5m", node.Value)}
	}
	if v < 0 {
		return &lineError{line: node.Line, msg: fmt.Sprintf("bad duration %q: must not be negative", node.Value)}
	}
	d.Duration = v
	return nil
}

// lineError is a decoding error at a line of the file being decoded.
type lineError struct {
	line int
	msg  string
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }
