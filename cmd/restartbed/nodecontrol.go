package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/kubeletconfig"
	"github.com/restartbed/restartbed/nodectl"
)

// nodeControlFlags are the flags of the host's side of the nodes: their kubelets as systemd
// units (package nodectl), the kubelets' healthz ports and configuration file, and their
// container runtimes' CRI sockets.
type nodeControlFlags struct {
	// socket is where the nodes' kubelet units are served to restartbed systemctl.
	socket string
	// healthz is where the kubelets' healthz ports are on 127.0.0.1.
	healthz healthzPort
	// runtimeDir is where each node's CRI socket is (fakekubelet.Options.RuntimeSocketDir).
	runtimeDir string
	// kubeletConfig is the kubelets' configuration file (fakekubelet.Options.KubeletConfigFile).
	kubeletConfig string
}

// healthzPort is the value of --kubelet-healthz-port: the first node's port, "any" for a port
// the system picks for each node (several clusters started at once cannot race for them, as for
// ports chosen before the process starts), or 0 for none.
type healthzPort struct {
	first int // the first node's port; 0 with any or none
	any   bool
}

func (p *healthzPort) String() string {
	if p.any {
		return "any"
	}
	return strconv.Itoa(p.first)
}

func (p *healthzPort) Set(s string) error {
	if s == "any" {
		*p = healthzPort{any: true}
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q is not a port, any or 0", s)
	}
	*p = healthzPort{first: n}
	return nil
}

func (p *healthzPort) Type() string { return "port" }

// set reports whether the healthz ports are served.
func (p healthzPort) set() bool { return p.any || p.first != 0 }

// addNodeControlFlags adds the flags; without healthz, not --kubelet-healthz-port (a joined
// kubelet's nodes have no fixed order to number their ports by).
func addNodeControlFlags(flags *pflag.FlagSet, f *nodeControlFlags, healthz bool) {
	flags.StringVar(&f.socket, "control-socket", "",
		"serve the nodes' kubelets as systemd units (kubelet-NODE.service) on this Unix socket, for restartbed systemctl to stop, start and restart, "+
			"and their faults (a node's partition or reboot, a container's exit), for the scenarios and benchmarks that run these nodes (docs/fakekubelet.md)")
	if healthz {
		flags.Var(&f.healthz, "kubelet-healthz-port",
			"serve each node's kubelet healthz (/healthz, as the kubelet's port 10248) on 127.0.0.1: the first node's on this port, the next node's one more, ...; "+
				"any: each on a free port the system picks, as the banner says; 0: none")
	}
	flags.StringVar(&f.runtimeDir, "runtime-socket-dir", "",
		"serve each node's container runtime over the CRI on the Unix socket DIR/NODE.sock, as containerd's, for crictl --runtime-endpoint unix://DIR/NODE.sock; the directory must exist")
	flags.StringVar(&f.kubeletConfig, "kubelet-config", "",
		"a KubeletConfiguration file (kubelet.config.k8s.io/v1beta1, the kubelet's --config) each node's kubelet reads whenever it starts, "+
			"so that a file rewritten while a node's kubelet is stopped changes that node's: it sets crashLoopBackOff.maxContainerRestartPeriod "+
			"and the gates KubeletCrashLoopBackOffMax and ReduceDefaultCrashLoopBackOffDecay; other fields may only restate the kubelet's /configz")
}

// check refuses node-control flags that cannot work, before anything starts; nodes is how many
// nodes of its own the process registers.
func (f nodeControlFlags) check(nodes int) error {
	if f.healthz.set() && nodes == 0 {
		return errors.New("--kubelet-healthz-port needs nodes of this process's own (--nodes)")
	}
	if f.healthz.first < 0 || f.healthz.first+nodes-1 > 65535 {
		return fmt.Errorf("--kubelet-healthz-port %d: the %d nodes' ports from it must be ports (1..65535)", f.healthz.first, nodes)
	}
	if f.runtimeDir != "" {
		if fi, err := os.Stat(f.runtimeDir); err != nil || !fi.IsDir() {
			return fmt.Errorf("--runtime-socket-dir %s: not a directory", f.runtimeDir)
		}
	}
	if f.kubeletConfig != "" {
		if err := kubeletconfig.Check(f.kubeletConfig); err != nil {
			return fmt.Errorf("--kubelet-config: %w", err)
		}
	}
	if f.socket == "" {
		return nil
	}
	dir := filepath.Dir(f.socket)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("--control-socket %s: its directory %s does not exist", f.socket, dir)
	}
	if fi, err := os.Lstat(f.socket); err == nil && fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("--control-socket %s: the file exists and is not a socket", f.socket)
	}
	return nil
}

// The control socket serves the kubelets' faults and stats too.
var (
	_ nodectl.Faults  = (*fakekubelet.Kubelet)(nil)
	_ nodectl.Watcher = (*fakekubelet.Kubelet)(nil)
)

// nodeControl is what serveNodeControl serves, for the banner.
type nodeControl struct {
	socket     string
	healthz    map[string]string
	runtimeDir string
}

// serveNodeControl serves the control socket and the healthz ports of the kubelets until ctx
// ends; with neither flag it serves nothing. The CRI sockets are the kubelets' own
// (fakekubelet.Options.RuntimeSocketDir): it only names them.
func serveNodeControl(ctx context.Context, kubelets nodectl.Kubelets, f nodeControlFlags) (nodeControl, error) {
	c := nodeControl{socket: f.socket, runtimeDir: f.runtimeDir}
	if f.socket != "" {
		if _, err := nodectl.NewServer(kubelets).Serve(ctx, f.socket); err != nil {
			return c, err
		}
	}
	if f.healthz.set() {
		addrs, err := nodectl.Healthz(ctx, kubelets, f.healthz.first) // 0 with any: the system's ports
		if err != nil {
			return c, err
		}
		c.healthz = addrs
	}
	return c, nil
}

func (c nodeControl) print(out io.Writer) {
	if c.socket != "" {
		fmt.Fprintf(out, "\nnode control: restartbed systemctl --control-socket %s list-units   # stop, start, restart a node's kubelet\n", c.socket)
	}
	for _, node := range slices.Sorted(maps.Keys(c.healthz)) {
		fmt.Fprintf(out, "kubelet healthz of %s: %s\n", node, c.healthz[node])
	}
	if c.runtimeDir != "" {
		fmt.Fprintf(out, "container runtimes: crictl --runtime-endpoint unix://%s   # each node's CRI socket\n", fakekubelet.RuntimeSocket(c.runtimeDir, "NODE"))
	}
}
