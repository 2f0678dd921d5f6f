// Package netns runs the kubelet shards as separate hosts would: the control plane in one network
// namespace and each `restartbed kubelet` process in one of its own, joined by veth pairs to a
// bridge, each with its own address — so that nothing between the shards, or between the
// apiserver and the nodes' kubelet API, rides on a loopback interface they share. The test binary
// re-runs itself inside a namespace it creates (the control plane's), creates the shards'
// namespaces and links there, and removes all of them when it ends. It needs root and iproute2's
// ip; CI sets RESTARTBED_REQUIRE_HOST_BINARIES so that it never skips there.
package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet/shards"
	"github.com/restartbed/restartbed/test/restartbedbin"
	"github.com/restartbed/restartbed/timing"
)

// hubEnv names, in the re-run test binary, the network namespace it runs in.
const hubEnv = "RESTARTBED_NETNS_HUB"

// The bridge's network: the control plane's address on it, and shard i's.
var (
	hubAddr = netip.MustParseAddr("10.231.0.1")
	prefix  = 24
)

func shardAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 231, 0, byte(10 + i)}) }

// skipReason says why this host cannot run the test, or "".
func skipReason() string {
	if os.Geteuid() != 0 {
		return "network namespaces need root"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "iproute2's ip is not installed"
	}
	return ""
}

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	if os.Getenv(hubEnv) != "" || skipReason() != "" {
		code := m.Run()
		restartbedbin.Remove()
		os.Exit(code)
	}
	// Re-run the test binary inside the control plane's namespace, then remove it.
	hub := fmt.Sprintf("rb-hub-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", hub).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "creating network namespace %s: %v\n%s", hub, err, out)
		os.Exit(1)
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", hub}, os.Args...)...)
	cmd.Env = append(os.Environ(), hubEnv+"="+hub)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	code := 0
	if err := cmd.Run(); err != nil {
		code = 1
		if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
			code = exit.ExitCode()
		}
	}
	if out, err := exec.Command("ip", "netns", "del", hub).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "removing network namespace %s: %v\n%s", hub, err, out)
		code = 1
	}
	os.Exit(code)
}

// ip runs iproute2's ip and fails t if it fails.
func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// network builds the hosts' network: a bridge in the control plane's namespace (this one) with
// its address, and for each shard a namespace joined to the bridge by a veth pair, with the
// shard's address. Cleanup removes the shards' namespaces, and their links with them.
func network(t *testing.T, hub string, hosts int) []string {
	ip(t, "link", "set", "lo", "up")
	ip(t, "link", "add", "br0", "type", "bridge")
	ip(t, "addr", "add", fmt.Sprintf("%s/%d", hubAddr, prefix), "dev", "br0")
	ip(t, "link", "set", "br0", "up")
	var names []string
	for i := range hosts {
		ns := fmt.Sprintf("%s-shard-%d", hub, i)
		ip(t, "netns", "add", ns)
		t.Cleanup(func() {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				t.Errorf("removing network namespace %s: %v\n%s", ns, err, out)
			}
		})
		host, peer := fmt.Sprintf("veth%d", i), fmt.Sprintf("eth%d", i)
		ip(t, "link", "add", host, "type", "veth", "peer", "name", peer, "netns", ns)
		ip(t, "link", "set", host, "master", "br0", "up")
		ip(t, "-n", ns, "link", "set", "lo", "up")
		ip(t, "-n", ns, "addr", "add", fmt.Sprintf("%s/%d", shardAddr(i), prefix), "dev", peer)
		ip(t, "-n", ns, "link", "set", peer, "up")
		names = append(names, ns)
	}
	return names
}

// TestShardsOnSeparateHosts runs three kubelet shards of one group, each in a network namespace
// of its own, against a control plane in another: their nodes advertise their own hosts'
// addresses, the apiserver reaches the nodes' kubelet API there, the shards reach each other's
// relays there, and a JobSet across them restarts its group in place while its pods ping each
// other by hostname from shard to shard.
func TestShardsOnSeparateHosts(t *testing.T) {
	hub := os.Getenv(hubEnv)
	if hub == "" {
		why := skipReason()
		switch {
		case why == "":
			t.Fatal("the test binary did not re-run itself in a network namespace of its own")
		case os.Getenv("RESTARTBED_REQUIRE_HOST_BINARIES") != "":
			t.Fatalf("RESTARTBED_REQUIRE_HOST_BINARIES is set and this host cannot run the test: %s (install iproute2, run as root)", why)
		}
		t.Skip(why)
	}
	const hosts, nodes = 3, 6
	netnses := network(t, hub, hosts)
	bin := restartbedbin.Path(t)
	k := kubectl(t)

	// The control plane listens on every address of its namespace: loopback, for this test,
	// and the bridge, for the shards; it advertises the bridge's (the namespace has no default
	// route to pick one from).
	profile := timing.Fast()
	cluster, err := envtest.Start(context.Background(), envtest.Options{JobSet: true, Timing: &profile, ExternalNodes: nodes,
		APIServerFlags: map[string][]string{"bind-address": {"0.0.0.0"}, "advertise-address": {hubAddr.String()}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
	})
	dir := t.TempDir()
	admin := filepath.Join(dir, "admin.kubeconfig")
	shardsKubeconfig := filepath.Join(dir, "shards.kubeconfig")
	writeKubeconfigs(t, cluster, admin, shardsKubeconfig)

	// The shards, each a host of its own.
	for i, ns := range netnses {
		cmd := exec.Command("ip", "netns", "exec", ns, bin, "kubelet", "--kubeconfig", shardsKubeconfig,
			"--shard-group", "hosts", "--shard-name", "host-"+strconv.Itoa(i), "--nodes", strconv.Itoa(nodes),
			"--node-ip", shardAddr(i).String(), "--relay-port", "10260", "--timing", "fast", "--node-identities")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM) // fails only if it has exited, which Wait reports
			if err := cmd.Wait(); err != nil && !strings.Contains(err.Error(), "signal") {
				t.Errorf("shard host-%d: %v\n%s", i, err, out.String())
			}
		})
	}

	// Every node Ready, advertising its shard's host's address; every shard's relay there.
	ctx := context.Background()
	cs := cluster.Clientset
	var list *corev1.NodeList
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err = cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: shards.GroupLabel + "=hosts"})
		if err != nil || len(list.Items) != nodes {
			return false, nil //nolint:nilerr // not yet: ask again
		}
		for _, n := range list.Items {
			if !ready(n) || n.Annotations[shards.NodeAnnotation] == "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the group's %d nodes did not all come up Ready: %v", nodes, err)
	}
	held := map[string]bool{}
	for _, n := range list.Items {
		shard := n.Annotations[shards.NodeAnnotation]
		held[shard] = true
		i, _ := strconv.Atoi(strings.TrimPrefix(shard, "host-"))
		if got := internalIP(n); got != shardAddr(i).String() {
			t.Errorf("node %s of %s advertises %q, want its host's address %s", n.Name, shard, got, shardAddr(i))
		}
	}
	if len(held) < 2 {
		t.Fatalf("the nodes are held by %v: want them divided", held)
	}
	leases, err := cs.CoordinationV1().Leases(shards.DefaultNamespace).List(ctx, metav1.ListOptions{LabelSelector: shards.GroupLabel + "=hosts"})
	if err != nil {
		t.Fatal(err)
	}
	relays := 0
	for _, l := range leases.Items {
		if l.Name != shards.LeaseName("hosts", strings.TrimPrefix(l.Name, "hosts-")) {
			continue // the address plan's block Leases
		}
		relays++
		i, _ := strconv.Atoi(strings.TrimPrefix(l.Name, "hosts-host-"))
		if relay, want := l.Annotations[shards.RelayAnnotation], shardAddr(i).String()+":10260"; relay != want {
			t.Errorf("shard Lease %s publishes its relay at %q, want its host's address %s", l.Name, relay, want)
		}
	}
	if relays != hosts {
		t.Errorf("%d shard Leases publish a relay, want %d", relays, hosts)
	}

	// The JobSet across the hosts restarts its group in place.
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, k, append([]string{"--kubeconfig", admin}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
		}
		return strings.TrimSpace(stdout.String()), err
	}
	if out, err := run("apply", "-f", "../../config/agent/rbac.yaml", "-f", "../../config/agent/policy.yaml", "-f", "testdata/jobset.yaml"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		attempt, _ := run("get", "jobset", "hosts", "-o", "jsonpath={.status.currentInPlaceRestartAttempt}")
		counts, _ := run("get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=hosts", "-o",
			`jsonpath={range .items[*]}{.status.containerStatuses[?(@.name=="worker")].restartCount}/{.status.containerStatuses[?(@.name=="worker")].state.running.startedAt}{"\n"}{end}`)
		lines := strings.Fields(counts)
		return attempt == "1" && len(lines) == nodes && !slices.ContainsFunc(lines, func(l string) bool {
			count, started, _ := strings.Cut(l, "/")
			return count != "1" || started == ""
		}), nil
	})
	if err != nil {
		out, _ := run("get", "pods", "-o", "wide")
		t.Fatalf("the group did not restart in place once with every worker running again: %v\n%s", err, out)
	}

	// One pod on each host pings one on every other by hostname; logs come through the
	// apiserver from every host.
	type pod struct{ name, host, shard string }
	var onEach []pod
	shardOf := map[string]string{}
	for _, n := range list.Items {
		shardOf[n.Name] = n.Annotations[shards.NodeAnnotation]
	}
	pods, err := run("get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=hosts", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.spec.hostname} {.spec.nodeName}{"\n"}{end}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(pods, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && !slices.ContainsFunc(onEach, func(p pod) bool { return p.shard == shardOf[f[2]] }) {
			onEach = append(onEach, pod{name: f[0], host: f[1], shard: shardOf[f[2]]})
		}
	}
	if len(onEach) < 2 {
		t.Fatalf("the workers run on %d hosts: %v", len(onEach), onEach)
	}
	for _, from := range onEach {
		if logs, err := run("logs", from.name, "-c", "in-place-restart-agent"); err != nil || !strings.Contains(logs, "lifting the barrier") {
			t.Errorf("kubectl logs of %s (%s): %v %q", from.name, from.shard, err, logs)
		}
		for _, to := range onEach {
			if from == to {
				continue
			}
			if out, err := run("exec", from.name, "-c", "worker", "--", "ping", "-c", "1", "-W", "2", to.host+".hosts"); err != nil {
				t.Errorf("%s (%s) pings %s.hosts (%s): %v\n%s", from.name, from.shard, to.host, to.shard, err, out)
			}
		}
	}
}

func ready(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func internalIP(n corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// writeKubeconfigs writes the cluster's kubeconfig for this namespace (the apiserver on
// loopback) and for the shards' hosts (on the bridge, verifying the serving certificate by its
// name localhost, which it has, rather than the bridge's address, which it has not).
func writeKubeconfigs(t *testing.T, cluster *envtest.Cluster, admin, shards string) {
	data, err := cluster.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(admin, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		_, port, found := strings.Cut(strings.TrimPrefix(c.Server, "https://"), ":")
		if !found {
			t.Fatalf("the apiserver's address %s has no port", c.Server)
		}
		c.Server = "https://" + hubAddr.String() + ":" + port
		c.TLSServerName = "localhost"
	}
	if err := clientcmd.WriteToFile(*cfg, shards); err != nil {
		t.Fatal(err)
	}
}

// kubectl is Debian's kubectl, fetched once (hack/debian-kubectl.sh).
func kubectl(t *testing.T) string {
	out, err := exec.Command("../../hack/debian-kubectl.sh").Output()
	if err != nil {
		t.Fatalf("getting Debian's kubectl: %v", err)
	}
	return strings.TrimSpace(string(out))
}
