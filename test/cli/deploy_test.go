package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/hostproc"
	"github.com/restartbed/restartbed/fakekubelet/program"
	"github.com/restartbed/restartbed/timing"
)

// shardImage is the image config/kubelet/shards.yaml names; the cluster below runs this
// checkout's binary for it.
const shardImage = "restartbed/restartbed:dev"

// TestShardsDeployedOnKubernetes deploys config/kubelet's manifests as a user would — the RBAC,
// the node identities, the StatefulSet of shards — onto a restartbed cluster whose kubelet runs
// the image's containers as this checkout's restartbed binary (host binaries: each shard is a
// real process in a pod sandbox of its own, with its pod IP and service account). The shards
// register the group's nodes into the same cluster, through its apiserver's in-cluster address
// and their ServiceAccount, and divide them; a JobSet on those nodes, one worker per node, then
// restarts its group in place across both shards after one worker fails. It needs root.
func TestShardsDeployedOnKubernetes(t *testing.T) {
	if err := hostproc.Check(); err != nil {
		if os.Getenv("RESTARTBED_REQUIRE_HOST_BINARIES") != "" {
			t.Fatalf("RESTARTBED_REQUIRE_HOST_BINARIES is set and this host cannot run host binaries: %v", err)
		}
		t.Skipf("this host cannot run host binaries: %v", err)
	}
	k := kubectl(t)
	bin := buildCLI(t)
	profile := timing.Fast()
	cluster, err := envtest.Start(context.Background(), envtest.Options{JobSet: true, Timing: &profile,
		Nodes: []fakekubelet.NodePool{{Name: "host", Count: 2}},
		// The shards' nodes join: the apiserver reaches their kubelet API without knowing the
		// CA the shards sign its certificates with, as a kubeadm cluster's does.
		ExternalNodes:     4,
		AllowHostBinaries: true,
		Programs:          []program.Rule{{Image: shardImage, Binary: bin}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
	})
	dir := t.TempDir()
	data, err := cluster.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		t.Fatal(err)
	}
	run, must, eventually := kubectlFuncs(t, k, kubeconfig)

	// The shipped StatefulSet, with a test's group: 4 nodes, fast timing, requests the host
	// nodes hold.
	shards, err := os.ReadFile("../../config/kubelet/shards.yaml")
	if err != nil {
		t.Fatal(err)
	}
	manifest := string(shards)
	for from, to := range map[string]string{"--nodes=1000": "--nodes=4", "--timing=realistic": "--timing=fast", "cpu: 500m": "cpu: 100m", "memory: 512Mi": "memory: 128Mi"} {
		if !strings.Contains(manifest, from) {
			t.Fatalf("config/kubelet/shards.yaml no longer says %q: update this test", from)
		}
		manifest = strings.Replace(manifest, from, to, 1)
	}
	shardsFile := filepath.Join(dir, "shards.yaml")
	if err := os.WriteFile(shardsFile, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	must("apply", "-f", "../../config/kubelet/rbac.yaml", "-f", "../../config/kubelet/node-identities.yaml")
	must("apply", "-f", shardsFile)
	group := "restartbed.dev/shard-group=restartbed"
	eventually("the group's 4 nodes Ready, held by both shards", func() bool {
		s, _ := run("get", "nodes", "-l", group, "-o",
			`jsonpath={range .items[*]}{.metadata.annotations.restartbed\.dev/shard} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		lines := strings.Fields(strings.ReplaceAll(s, " ", "/"))
		held := map[string]bool{}
		for _, l := range lines {
			shard, ready, _ := strings.Cut(l, "/")
			if ready != "True" {
				return false
			}
			held[shard] = true
		}
		return len(lines) == 4 && held["restartbed-kubelet-0"] && held["restartbed-kubelet-1"]
	})

	// A JobSet on the group's nodes whose worker 0 fails once, at attempt 0 (a file in an
	// emptyDir, which the group's in-place restart keeps, says it did).
	must("apply", "-f", "../../config/agent/rbac.yaml", "-f", "../../config/agent/policy.yaml", "-f", "testdata/jobset-on-shards.yaml")
	workers := "jobset.sigs.k8s.io/jobset-name=on-shards"
	eventually("the group restarted in place to attempt 1 and every worker runs again", func() bool {
		s, _ := run("get", "jobset", "on-shards", "-o", "jsonpath={.status.currentInPlaceRestartAttempt}")
		if s != "1" {
			return false
		}
		s, _ = run("get", "pods", "-l", workers, "-o",
			`jsonpath={range .items[*]}{.status.containerStatuses[?(@.name=="worker")].restartCount}/{.status.containerStatuses[?(@.name=="worker")].state.running.startedAt}{"\n"}{end}`)
		lines := strings.Fields(s)
		for _, l := range lines {
			count, started, _ := strings.Cut(l, "/")
			if count != "1" || started == "" {
				return false
			}
		}
		return len(lines) == 4
	})
	nodes := must("get", "pods", "-l", workers, "-o", "jsonpath={.items[*].spec.nodeName}")
	held := must("get", "nodes", "-l", group, "-o", `jsonpath={range .items[*]}{.metadata.name}={.metadata.annotations.restartbed\.dev/shard}{"\n"}{end}`)
	shardOf := map[string]string{}
	for _, l := range strings.Fields(held) {
		node, shard, _ := strings.Cut(l, "=")
		shardOf[node] = shard
	}
	across := map[string]bool{}
	for _, n := range strings.Fields(nodes) {
		across[shardOf[n]] = true
	}
	if len(across) != 2 {
		t.Errorf("the workers ran on nodes %s, held by %v: want both shards", nodes, across)
	}
	// The nodes' kubelet API is the shards', at their pod IPs: the apiserver reaches it.
	pod := must("get", "pods", "-l", workers+",batch.kubernetes.io/job-completion-index=1", "-o", "jsonpath={.items[0].metadata.name}")
	if out := must("exec", pod, "-c", "worker", "--", "sh", "-c", "echo $JOB_COMPLETION_INDEX"); out != "1" {
		t.Errorf("kubectl exec in %s printed %q, want its index 1", pod, out)
	}
	if _, err := run("logs", pod, "-c", "in-place-restart-agent"); err != nil {
		t.Errorf("kubectl logs of a pod on a shard's node: %v", err)
	}
	if s := must("get", "jobset", "on-shards", "-o", "jsonpath={.status.restarts}"); s != "0" && s != "" {
		t.Errorf("the JobSet recreated its Jobs (restarts %s): want the group restarted in place only", s)
	}
}
