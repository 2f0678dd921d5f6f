package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/timing"
)

// TestKilledKubeletProcess kills one of two kubelet processes (envtest.Options.KubeletProcesses)
// under a JobSet that restarts in place, as a machine that loses power. Without --takeover its
// nodes are a dead kubelet's: NotReady, tainted unreachable, their pods evicted. With it, the
// live shard takes the nodes over once the dead one's Lease expires, they are Ready again and the
// JobSet's workers all run again.
func TestKilledKubeletProcess(t *testing.T) {
	k := kubectl(t)
	bin := buildCLI(t)
	for _, takeover := range []bool{false, true} {
		name := map[bool]string{false: "without takeover", true: "with takeover"}[takeover]
		t.Run(name, func(t *testing.T) {
			t.Parallel() // two small clusters that mostly wait for Leases and evictions
			profile := timing.Fast()
			opts := envtest.Options{JobSet: true, Timing: &profile, KubeletProcesses: 2, KubeletCommand: []string{bin},
				Nodes: []fakekubelet.NodePool{{Name: "node", Count: 4}}}
			if takeover {
				opts.KubeletArgs = []string{"--takeover"}
			}
			cluster, err := envtest.Start(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := cluster.Stop(); err != nil {
					t.Error(err)
				}
			})
			data, err := cluster.Kubeconfig()
			if err != nil {
				t.Fatal(err)
			}
			kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
			if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
				t.Fatal(err)
			}
			run, must, eventually := kubectlFuncs(t, k, kubeconfig)
			must("apply", "-f", "../../config/agent/rbac.yaml", "-f", "../../config/agent/policy.yaml", "-f", "../../config/samples/jobset-in-place-restart.yaml")
			workersReady := func() bool {
				s, _ := run("get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=kubectl-check",
					"-o", `jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}`)
				return s == "True True"
			}
			eventually("both workers ready", workersReady)

			// The shard of the first worker's node dies.
			pod := must("get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=kubectl-check", "-o", "jsonpath={.items[0].metadata.name}")
			node := must("get", "pod", pod, "-o", "jsonpath={.spec.nodeName}")
			shardOf := func() string {
				s, _ := run("get", "node", node, "-o", `jsonpath={.metadata.annotations.restartbed\.dev/shard}`)
				return s
			}
			dead := shardOf()
			if err := cluster.KillKubeletProcess(dead); err != nil {
				t.Fatal(err)
			}
			if !takeover {
				eventually("the dead shard's node is NotReady and tainted unreachable", func() bool {
					s, _ := run("get", "node", node, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.spec.taints[*].key}`)
					return strings.HasPrefix(s, "Unknown ") && strings.Contains(s, "node.kubernetes.io/unreachable")
				})
				eventually("its pod evicted", func() bool {
					s, err := run("get", "pod", pod, "-o", "jsonpath={.metadata.deletionTimestamp}")
					return err != nil || s != ""
				})
				return
			}
			eventually("the node Ready again under the live shard", func() bool {
				s, _ := run("get", "node", node, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
				return s == "True" && shardOf() != dead && shardOf() != ""
			})
			eventually("both workers ready again", workersReady)
			if s := must("get", "jobset", "kubectl-check", "-o", `jsonpath={.status.conditions[?(@.type=="Failed")].status}`); s == "True" {
				t.Error("the JobSet failed")
			}
		})
	}
}
