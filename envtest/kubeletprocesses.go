package envtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/restartbed/restartbed/fakekubelet/shards"
	"github.com/restartbed/restartbed/nodectl"
)

// This file runs the nodes in `restartbed kubelet` processes of one shard group on this machine
// (Options.KubeletProcesses) instead of in this process: each process is a shard, the group's
// nodes are declared by the first that starts and divided among them, and their pods share one
// network through the shards' relays (docs/join.md). The processes are the cluster's: they die
// with this process's thread that started them, and Stop stops them first.

// KubeletGroup is the shard group of the kubelet processes (Options.KubeletProcesses); the
// processes are named kubelet-0, kubelet-1, ...
const KubeletGroup = "restartbed"

// kubeletProcessesFile is the kubeconfig the kubelet processes reach the apiserver with.
const kubeletProcessesFile = "kubelets.kubeconfig"

// checkKubeletProcesses refuses what cannot cross into the kubelet processes: what the
// in-process kubelet takes as Go values, which the processes take from KubeletArgs.
func checkKubeletProcesses(opts Options) error {
	if opts.KubeletProcesses == 0 {
		return nil
	}
	var errs []error
	if opts.KubeletProcesses < 0 {
		errs = append(errs, fmt.Errorf("must not be negative, got %d", opts.KubeletProcesses))
	}
	if len(opts.KubeletCommand) == 0 {
		errs = append(errs, errors.New("KubeletCommand is required: the restartbed binary the processes run"))
	}
	if opts.ExistingCluster != nil {
		errs = append(errs, errors.New("not with ExistingCluster: run restartbed kubelet --shard-group against it yourself"))
	}
	if len(opts.Nodes) > 1 && !fromScenario(opts.KubeletArgs) {
		errs = append(errs, fmt.Errorf("%d node pools: the processes take one pool's flags; give more pools in a scenario (KubeletArgs --from)", len(opts.Nodes)))
	}
	for what, given := range map[string]bool{
		"Programs": len(opts.Programs) > 0, "Images": len(opts.Images) > 0, "Builtins": opts.Builtins != nil,
		"RuntimeSocketDir": opts.RuntimeSocketDir != "", "KubeletConfigFile": opts.KubeletConfigFile != "",
		"AllowHostBinaries": opts.AllowHostBinaries, "Clock": opts.Clock != nil,
	} {
		if given {
			errs = append(errs, fmt.Errorf("%s are the in-process kubelet's: say them to the processes in KubeletArgs (--from SCENARIO, --allow-host-binaries)", what))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("Options.KubeletProcesses: %w", err)
	}
	return nil
}

// kubeletProcessArgs are the arguments of kubelet process i: the cluster's release, timing and
// gates, the pool's flags, each node as its own identity, its kubelet API at 127.0.0.1, its
// control socket (Faults), then opts.KubeletArgs.
func (c *Cluster) kubeletProcessArgs(opts Options, kubeconfig string, i int) []string {
	name := KubeletProcessName(i)
	args := append(slices.Clone(opts.KubeletCommand[1:]), "kubelet",
		"--kubeconfig", kubeconfig, "--shard-group", KubeletGroup, "--shard-name", name, "--control-socket", c.KubeletControlSocket(name),
		"--kubernetes-version", c.Release.Kubernetes, "--node-ip", "127.0.0.1", "--node-identities",
		"--image-commands="+strconv.FormatBool(opts.ImageCommands))
	from := fromScenario(opts.KubeletArgs)
	if !from {
		args = append(args, "--timing", c.Timing.Name)
	}
	if len(opts.FeatureGates) > 0 {
		var gates []string
		for _, name := range slices.Sorted(maps.Keys(opts.FeatureGates)) {
			gates = append(gates, fmt.Sprintf("%s=%t", name, opts.FeatureGates[name]))
		}
		args = append(args, "--feature-gates", strings.Join(gates, ","))
	}
	for _, pool := range opts.Nodes {
		if from {
			break // the scenario's pools are the group's
		}
		args = append(args, "--nodes", strconv.Itoa(pool.Count), "--pool", pool.Name)
		if len(pool.Labels) > 0 {
			args = append(args, "--node-labels", labels.Set(pool.Labels).String()) // sorted, as the flag reads them
		}
		if len(pool.Capacity) > 0 {
			var capacity []string
			for _, name := range slices.Sorted(maps.Keys(pool.Capacity)) {
				q := pool.Capacity[name]
				capacity = append(capacity, string(name)+"="+q.String())
			}
			args = append(args, "--capacity", strings.Join(capacity, ","))
		}
		for _, t := range pool.Taints {
			args = append(args, "--register-with-taints", t.ToString())
		}
	}
	return append(args, opts.KubeletArgs...)
}

// KubeletProcessName is the name of kubelet process i (Options.KubeletProcesses), its shard's.
func KubeletProcessName(i int) string { return "kubelet-" + strconv.Itoa(i) }

// fromScenario reports whether the kubelet processes' arguments name a scenario (--from), whose
// nodes, timing and programs they then take.
func fromScenario(args []string) bool {
	return slices.ContainsFunc(args, func(a string) bool { return a == "--from" || strings.HasPrefix(a, "--from=") })
}

// startKubeletProcesses starts the processes and waits until the group's nodes are Ready.
func (c *Cluster) startKubeletProcesses(ctx context.Context, opts Options, out io.Writer) error {
	kubeconfig, err := c.Kubeconfig()
	if err != nil {
		return err
	}
	path := c.work.file(kubeletProcessesFile)
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("writing the kubelet processes' kubeconfig: %w", err)
	}
	for i := range opts.KubeletProcesses {
		name := KubeletProcessName(i)
		var proc *component
		c.launcher.do(func() {
			proc, err = startComponent(name, opts.KubeletCommand[0], c.kubeletProcessArgs(opts, path, i), prefixed(out, name))
		})
		if err != nil {
			return err
		}
		c.kubeletProcesses = append(c.kubeletProcesses, proc)
	}
	want := 0
	for _, p := range opts.Nodes {
		want += p.Count
	}
	if err := c.waitGroupNodes(ctx, want); err != nil {
		return err
	}
	c.groupNodes = want
	return nil
}

// waitGroupNodes waits until want nodes of the kubelet processes' group are Ready, or one of the
// processes has exited.
func (c *Cluster) waitGroupNodes(ctx context.Context, want int) error {
	selector := metav1.ListOptions{LabelSelector: shards.GroupLabel + "=" + KubeletGroup}
	var ready int
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, p := range c.kubeletProcesses {
			if err := p.exited(); err != nil {
				return false, err
			}
		}
		list, err := c.Clientset.CoreV1().Nodes().List(ctx, selector)
		if err != nil {
			return false, nil //nolint:nilerr // the apiserver may be busy; ask again
		}
		ready = 0
		for _, n := range list.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= want, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the kubelet processes' %d nodes (%d Ready): %w", want, ready, err)
	}
	return nil
}

// KubeletProcesses is how many kubelet processes run the nodes (Options.KubeletProcesses).
func (c *Cluster) KubeletProcesses() int { return len(c.kubeletProcesses) }

// GroupNodes is how many nodes the kubelet processes' group had when they started.
func (c *Cluster) GroupNodes() int { return c.groupNodes }

// KubeletProcessNames names the kubelet processes (Options.KubeletProcesses): kubelet-0, ...
func (c *Cluster) KubeletProcessNames() []string {
	names := make([]string, len(c.kubeletProcesses))
	for i, p := range c.kubeletProcesses {
		names[i] = p.name
	}
	return names
}

// kubeletProcess is the kubelet process of that name, or nil.
func (c *Cluster) kubeletProcess(name string) *component {
	for _, p := range c.kubeletProcesses {
		if p.name == name {
			return p
		}
	}
	return nil
}

// KubeletControlSocket is where the named kubelet process serves its nodes' units and faults
// (package nodectl; restartbed systemctl --control-socket).
func (c *Cluster) KubeletControlSocket(name string) string { return c.work.file(name + ".sock") }

// KubeletProcessPID is the process ID of the named kubelet process, or 0 if there is none.
func (c *Cluster) KubeletProcessPID(name string) int {
	if p := c.kubeletProcess(name); p != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

// KubeletProcessStats reads what the named kubelet process says of its load through its control
// socket: its nodes and its pod watches' events.
func (c *Cluster) KubeletProcessStats(ctx context.Context, name string) (nodectl.Stats, error) {
	if c.kubeletProcess(name) == nil {
		return nodectl.Stats{}, fmt.Errorf("no kubelet process is named %q; they are %v", name, c.KubeletProcessNames())
	}
	return nodectl.NewClient(c.KubeletControlSocket(name)).Stats(ctx)
}

// KillKubeletProcess kills the named kubelet process at once, as a machine that loses power:
// its nodes stop renewing their Leases and its pods' containers are gone with it; the group's
// other shards take its nodes over once its Lease expires if they run with --takeover
// (Options.KubeletArgs), else the node lifecycle controller handles them as nodes whose kubelet
// died (docs/join.md).
func (c *Cluster) KillKubeletProcess(name string) error {
	p := c.kubeletProcess(name)
	if p == nil {
		return fmt.Errorf("no kubelet process is named %q; they are %v", name, c.KubeletProcessNames())
	}
	p.kill()
	return nil
}

// stopKubeletProcesses stops the processes, as SIGTERM stops a kubelet: their nodes and pods
// stay in the API, as after a power loss.
func (c *Cluster) stopKubeletProcesses() error {
	var errs []error
	for _, p := range c.kubeletProcesses {
		errs = append(errs, p.stop())
	}
	return errors.Join(errs...)
}

// prefixed writes each line to out with the name in front.
func prefixed(out io.Writer, name string) io.Writer {
	return &prefixWriter{out: out, prefix: []byte(name + ": "), start: true}
}

type prefixWriter struct {
	out    io.Writer
	prefix []byte
	start  bool
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	var buf []byte
	for _, b := range p {
		if w.start {
			buf = append(buf, w.prefix...)
			w.start = false
		}
		buf = append(buf, b)
		if b == '\n' {
			w.start = true
		}
	}
	if _, err := w.out.Write(buf); err != nil {
		return 0, err
	}
	return len(p), nil
}
