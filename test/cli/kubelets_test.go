package cli

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUpRunsItsNodesInKubeletProcesses starts `restartbed up --kubelets 3`: thirty nodes divided
// among three restartbed kubelet processes of one shard group. A 300-worker JobSet restarts its
// group in place across them, its pods ping each other by hostname from shard to shard, and
// kubectl logs and exec reach a pod on every shard through the apiserver.
func TestUpRunsItsNodesInKubeletProcesses(t *testing.T) {
	k := kubectl(t)
	bin := buildCLI(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	up := startProcess(t, exec.Command(bin, "up", "--kubelets", "3", "--nodes", "30", "--timing", "fast", "--kubeconfig", kubeconfig))
	if !strings.Contains(up.out.String(), "30, run by 3 restartbed kubelet processes") {
		t.Errorf("up does not say who runs its nodes:\n%s", up.out.String())
	}
	run, must, _ := kubectlFuncs(t, k, kubeconfig)
	waitFor := func(what string, timeout time.Duration, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(timeout); !ok(); time.Sleep(time.Second) {
			if time.Now().After(end) {
				s, _ := run("get", "jobset", "big", "-o", "jsonpath={.status}")
				t.Fatalf("%s: not after %s; the JobSet's status: %s", what, timeout, s)
			}
		}
	}

	// Which shard runs each node: every process runs some.
	shardOf := map[string]string{}
	for _, line := range strings.Split(must("get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name}={.metadata.annotations.restartbed\.dev/shard}{"\n"}{end}`), "\n") {
		node, shard, _ := strings.Cut(line, "=")
		shardOf[node] = shard
	}
	var shards []string
	for _, s := range shardOf {
		if !slices.Contains(shards, s) {
			shards = append(shards, s)
		}
	}
	if len(shardOf) != 30 || len(shards) != 3 || slices.Contains(shards, "") {
		t.Fatalf("the nodes and their shards: %v", shardOf)
	}

	must("apply", "-f", "../../config/agent/rbac.yaml", "-f", "../../config/agent/policy.yaml", "-f", "testdata/jobset-300.yaml")
	waitFor("the group restarted in place once, every worker running again", 5*time.Minute, func() bool {
		attempt, _ := run("get", "jobset", "big", "-o", "jsonpath={.status.currentInPlaceRestartAttempt}")
		if attempt != "1" {
			return false
		}
		counts, _ := run("get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=big", "-o",
			`jsonpath={range .items[*]}{.status.containerStatuses[?(@.name=="worker")].restartCount}{" "}{.status.containerStatuses[?(@.name=="worker")].state.running.startedAt}{"\n"}{end}`)
		lines := strings.Split(counts, "\n")
		if len(lines) != 300 {
			return false
		}
		for _, l := range lines {
			count, started, _ := strings.Cut(l, " ")
			if count != "1" || started == "" {
				return false
			}
		}
		return true
	})
	if got := must("get", "jobset", "big", "-o", "jsonpath={.status.restarts}"); got != "0" {
		t.Errorf("the JobSet recreated its group (restarts %s); it should have restarted in place", got)
	}

	// One pod on each shard: its name, hostname and shard.
	type pod struct{ name, host, shard string }
	var onEach []pod
	for _, line := range strings.Split(must("get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=big", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.spec.hostname} {.spec.nodeName}{"\n"}{end}`), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("a pod without a hostname or node: %q", line)
		}
		if !slices.ContainsFunc(onEach, func(p pod) bool { return p.shard == shardOf[f[2]] }) {
			onEach = append(onEach, pod{name: f[0], host: f[1], shard: shardOf[f[2]]})
		}
	}
	if len(onEach) != 3 {
		t.Fatalf("the workers are on %d shards: %v", len(onEach), onEach)
	}
	for _, from := range onEach {
		if logs := must("logs", from.name, "-c", "in-place-restart-agent"); !strings.Contains(logs, "lifting the barrier") {
			t.Errorf("kubectl logs of %s (shard %s): %q", from.name, from.shard, logs)
		}
		for _, to := range onEach {
			if from == to {
				continue
			}
			if out, err := run("exec", from.name, "-c", "worker", "--", "ping", "-c", "1", "-W", "2", to.host+".big"); err != nil {
				t.Errorf("%s (shard %s) pings %s.big (shard %s): %v\n%s", from.name, from.shard, to.host, to.shard, err, out)
			}
		}
	}
	up.interrupt(t, syscall.SIGINT)
}
