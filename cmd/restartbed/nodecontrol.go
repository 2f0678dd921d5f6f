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

	"github.com/spf13/pflag"

	"github.com/restartbed/restartbed/nodectl"
)

// addNodeControlFlags adds the flags of the host's side of the nodes (package nodectl); without
// healthzPort, only the control socket's.
func addNodeControlFlags(flags *pflag.FlagSet, socket *string, healthzPort *int) {
	flags.StringVar(socket, "control-socket", "",
		"serve the nodes' kubelets as systemd units (kubelet-NODE.service) on this Unix socket, for restartbed systemctl to stop, start and restart")
	if healthzPort != nil {
		flags.IntVar(healthzPort, "kubelet-healthz-port", 0,
			"serve each node's kubelet healthz (/healthz, as the kubelet's port 10248) on 127.0.0.1: the first node's on this port, the next node's one more, ...; 0: none")
	}
}

// checkNodeControl refuses node-control flags that cannot work, before anything starts.
func checkNodeControl(socket string, healthzPort, nodes int) error {
	if healthzPort != 0 && nodes == 0 {
		return errors.New("--kubelet-healthz-port needs nodes of this process's own (--nodes)")
	}
	if healthzPort < 0 || healthzPort+nodes-1 > 65535 {
		return fmt.Errorf("--kubelet-healthz-port %d: the %d nodes' ports from it must be ports (1..65535)", healthzPort, nodes)
	}
	if socket == "" {
		return nil
	}
	dir := filepath.Dir(socket)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("--control-socket %s: its directory %s does not exist", socket, dir)
	}
	if fi, err := os.Lstat(socket); err == nil && fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("--control-socket %s: the file exists and is not a socket", socket)
	}
	return nil
}

// nodeControl is what serveNodeControl serves, for the banner.
type nodeControl struct {
	socket  string
	healthz map[string]string
}

// serveNodeControl serves the control socket and the healthz ports of the kubelets until ctx
// ends; with neither flag it serves nothing.
func serveNodeControl(ctx context.Context, kubelets nodectl.Kubelets, socket string, healthzPort int) (nodeControl, error) {
	c := nodeControl{socket: socket}
	if socket != "" {
		if _, err := nodectl.NewServer(kubelets).Serve(ctx, socket); err != nil {
			return c, err
		}
	}
	if healthzPort != 0 {
		addrs, err := nodectl.Healthz(ctx, kubelets, healthzPort)
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
}
