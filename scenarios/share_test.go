package scenarios

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestShares: what keeps a scenario from running as a tenant of a shared control plane.
func TestShares(t *testing.T) {
	const head = `apiVersion: restartbed.dev/v1alpha1
kind: Scenario
metadata: {name: s}
spec:
`
	cases := []struct {
		name, spec, want string
	}{
		{"pods and expressions of its own", `  nodes: [{name: node, count: 2}]
  objects:
  - inline: {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: busybox}]}}
  steps:
  - waitFor: 'pods.size() == 1 && nodes.size() == 2'
  - failNode: {node: node-1}
`, ""},
		{"a control-plane fault", `  steps:
  - killComponent: {component: kube-apiserver}
`, "it kills or starts a control-plane process"},
		{"a control-plane fault in a trigger", `  triggers:
  - name: t
    when: 'true'
    steps:
    - startComponent: {component: kube-scheduler}
  steps:
  - expect: 'true'
`, "it kills or starts a control-plane process"},
		{"an object in another namespace", `  objects:
  - inline: {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: other}}
  steps:
  - expect: 'true'
`, "s.yaml:6: ConfigMap c is in namespace other, not its own"},
		{"its namespace by name", `  namespace: mine
  objects:
  - inline: {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: mine}}
  steps:
  - expect: 'true'
`, ""},
		{"a node named in an expression", `  nodes: [{name: node, count: 2}]
  steps:
  - waitFor: 'pods.all(p, p.spec.nodeName == "node-1")'
`, "an expression names its node node-1"},
		{"a node's name as part of a longer word is not its name", `  nodes: [{name: node, count: 2}]
  steps:
  - waitFor: 'pods.all(p, p.metadata.name != "node-10" && p.metadata.name != "my-node-1")'
`, ""},
		{"a node named in an object", `  nodes: [{name: pool, count: 1}, {name: other, count: 1}]
  objects:
  - inline: {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {nodeName: pool-0, containers: [{name: c, image: busybox}]}}
  steps:
  - expect: 'true'
`, "s.yaml:7: Pod p names one of its nodes"},
		{"its only node goes down", `  steps:
  - stopKubelet: {node: node-0}
`, "its one node can go down, which the node lifecycle controller treats otherwise in a cluster of that node alone"},
		{"its only node's kubelet restarts, and the node stays up", `  steps:
  - restartKubelet: {node: node-0}
`, ""},
		{"kubelet processes", `  nodes: [{name: node, count: 2}]
  kubelets: {processes: 2}
  steps:
  - expect: 'true'
`, "its nodes run in kubelet processes (spec.kubelets)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := Parse(filepath.Join(t.TempDir(), "s.yaml"), []byte(head+tc.spec))
			if err != nil {
				t.Fatal(err)
			}
			got := sc.Shares()
			if i := strings.Index(got, "s.yaml:"); i > 0 {
				got = got[i:] // the file's directory is the test's
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Shares (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNamespaceInNodeLabels: $(NAMESPACE) in a node label's value is the namespace the scenario
// runs in: spec.namespace on a cluster of its own, a tenant's own on a shared one.
func TestNamespaceInNodeLabels(t *testing.T) {
	sc, err := Parse(filepath.Join(t.TempDir(), "s.yaml"), []byte(`apiVersion: restartbed.dev/v1alpha1
kind: Scenario
metadata: {name: s}
spec:
  namespace: ml
  nodes:
  - name: pool
    labels: {alpha.jobset.sigs.k8s.io/namespaced-job: $(NAMESPACE)_trainer-workers-0, plain: value}
  - name: bare
  steps:
  - expect: 'true'
`))
	if err != nil {
		t.Fatal(err)
	}
	opts, err := sc.ClusterOptions()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"alpha.jobset.sigs.k8s.io/namespaced-job": "ml_trainer-workers-0", "plain": "value"}
	if diff := cmp.Diff(want, opts.Nodes[0].Labels); diff != "" {
		t.Errorf("labels on a cluster of its own (-want +got):\n%s", diff)
	}
	want["alpha.jobset.sigs.k8s.io/namespaced-job"] = "ml-x1y2z3_trainer-workers-0"
	if diff := cmp.Diff(want, sc.poolsIn("ml-x1y2z3")[0].Labels); diff != "" {
		t.Errorf("labels in a tenant's namespace (-want +got):\n%s", diff)
	}
	if sc.Pools[0].Labels["alpha.jobset.sigs.k8s.io/namespaced-job"] != "$(NAMESPACE)_trainer-workers-0" {
		t.Errorf("the scenario's own pools changed: %v", sc.Pools[0].Labels)
	}
	if ns := tenantNamespace(sc); !strings.HasPrefix(ns, "ml-") || len(ns) != len("ml-")+6 {
		t.Errorf("a tenant's namespace %q, want ml- and six characters", ns)
	}
}
