package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/restartbed/restartbed/nodectl"
)

// controlSocketEnv names the control socket when --control-socket does not.
const controlSocketEnv = "RESTARTBED_CONTROL_SOCKET"

// systemctl's exit statuses (systemctl(1), "Exit status"; LSB's for is-active and status).
const (
	systemctlInactive    = 3
	systemctlNoSuchUnit  = 4
	systemctlUnitUnknown = 5
)

type systemctlFlags struct {
	socket   string
	state    []string
	unitType string
	all      bool
	noLegend bool
	quiet    bool
	noPager  bool
}

func newSystemctlCommand() *cobra.Command {
	var f systemctlFlags
	cmd := &cobra.Command{
		Use:   "systemctl COMMAND [UNIT...]",
		Short: "Stop, start and restart the emulated nodes' kubelets as systemctl does a node's",
		Long: `systemctl drives the kubelets of a running "restartbed up --control-socket PATH" (or
"restartbed kubelet --control-socket PATH") with systemctl's commands, so that tools and test
suites written for real nodes (upstream's node e2e framework runs "sudo systemctl restart
kubelet-...") stop and restart restartbed's kubelets unchanged. Each node's kubelet is the unit
kubelet-NODE.service (the node's name with every character but letters, digits and _ as _).

Commands:
  list-units [PATTERN...]   the kubelet units, as systemctl lists them (--state=running: only running ones)
  start UNIT...             start a stopped kubelet: it posts its node status and syncs every pod again,
                            with none of the in-memory state it had
  stop UNIT..., kill UNIT...  stop the kubelet process: the node's containers run on; no heartbeats,
                            syncs, status, events, probes or kubelet API until it starts
  restart UNIT...           stop the kubelet if it runs, and start it
  reset-failed [UNIT...]    nothing to reset; fails for a unit that does not exist
  is-active UNIT...         print active or inactive; exit 3 unless every unit is active
  status [UNIT...]          the units' state; exit 3 unless every unit is active

The socket is --control-socket, else $` + controlSocketEnv + `. See docs/fakekubelet.md, "Kubelet restarts".`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSystemctl(cmd.Context(), cmd.OutOrStdout(), f, args[0], args[1:])
		},
	}
	cmd.Flags().StringVar(&f.socket, "control-socket", os.Getenv(controlSocketEnv), "the control socket of restartbed up or restartbed kubelet (default: $"+controlSocketEnv+")")
	cmd.Flags().StringSliceVar(&f.state, "state", nil, "list-units: only units in these states (active, inactive, running, dead)")
	cmd.Flags().StringVarP(&f.unitType, "type", "t", "", "list-units: only units of this type (every kubelet unit is a service)")
	cmd.Flags().BoolVarP(&f.all, "all", "a", false, "list-units: also inactive units")
	cmd.Flags().BoolVar(&f.noLegend, "no-legend", false, "list-units: no header and footer")
	cmd.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "is-active: print nothing, only exit with the status")
	cmd.Flags().BoolVar(&f.noPager, "no-pager", false, "accepted, as systemctl's; nothing is paged")
	return cmd
}

func runSystemctl(ctx context.Context, out io.Writer, f systemctlFlags, command string, units []string) error {
	if f.socket == "" {
		return fmt.Errorf("systemctl: no control socket: --control-socket or $%s names the one restartbed up --control-socket serves", controlSocketEnv)
	}
	c := nodectl.NewClient(f.socket)
	switch command {
	case "list-units":
		return listUnits(ctx, out, c, f, units)
	case nodectl.OpStart, nodectl.OpStop, nodectl.OpRestart, nodectl.OpKill, nodectl.OpResetFailed:
		if len(units) == 0 && command != nodectl.OpResetFailed {
			return fmt.Errorf("systemctl %s: name a unit", command)
		}
		for _, u := range units {
			if _, err := c.Do(ctx, u, command); err != nil {
				if errors.Is(err, nodectl.ErrNotFound) {
					return exitError{systemctlUnitUnknown, fmt.Errorf("systemctl %s: unit %s not found", command, u)}
				}
				return fmt.Errorf("systemctl %s %s: %w", command, u, err)
			}
		}
		return nil
	case "is-active", "status":
		return unitStates(ctx, out, c, f, command, units)
	default:
		return fmt.Errorf("systemctl: unknown command %q: one of list-units, start, stop, kill, restart, reset-failed, is-active, status", command)
	}
}

// listUnits prints the units as systemctl list-units does: UNIT LOAD ACTIVE SUB DESCRIPTION.
func listUnits(ctx context.Context, out io.Writer, c *nodectl.Client, f systemctlFlags, patterns []string) error {
	units, err := c.Units(ctx)
	if err != nil {
		return err
	}
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("systemctl list-units: pattern %q: %w", p, err)
		}
	}
	if f.unitType != "" && f.unitType != "service" {
		units = nil
	}
	shown := units[:0:0]
	for _, u := range units {
		if !matchesAny(u.Name, patterns) || !inStates(u, f) {
			continue
		}
		shown = append(shown, u)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 1, ' ', 0)
	if !f.noLegend {
		fmt.Fprintln(tw, "  UNIT\tLOAD\tACTIVE\tSUB\tDESCRIPTION")
	}
	for _, u := range shown {
		fmt.Fprintf(tw, "  %s\tloaded\t%s\t%s\trestartbed's kubelet of node %s\n", u.Name, u.Active, u.Sub, u.Node)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !f.noLegend {
		fmt.Fprintf(out, "\n%d loaded units listed.\n", len(shown))
	}
	return nil
}

func matchesAny(name string, patterns []string) bool {
	if len(patterns) == 0 {
		return true
	}
	return slices.ContainsFunc(patterns, func(p string) bool {
		ok, _ := path.Match(p, name) // checked before
		okBare, _ := path.Match(p, nodectl.TrimService(name))
		return ok || okBare
	})
}

// inStates: by default list-units shows active units; --all every one; --state those in a state.
func inStates(u nodectl.Unit, f systemctlFlags) bool {
	if len(f.state) > 0 {
		return slices.ContainsFunc(f.state, func(s string) bool { return s == u.Active || s == u.Sub })
	}
	return f.all || u.Running()
}

// unitStates prints is-active's or status's report of the units and exits as systemctl does.
func unitStates(ctx context.Context, out io.Writer, c *nodectl.Client, f systemctlFlags, command string, names []string) error {
	var units []nodectl.Unit
	if len(names) == 0 {
		if command == "is-active" {
			return errors.New("systemctl is-active: name a unit")
		}
		all, err := c.Units(ctx)
		if err != nil {
			return err
		}
		units = all
	}
	code := 0
	for _, name := range names {
		u, err := c.Unit(ctx, name)
		switch {
		case errors.Is(err, nodectl.ErrNotFound) && command == "is-active":
			if !f.quiet {
				fmt.Fprintln(out, "inactive")
			}
			code = systemctlInactive
			continue
		case errors.Is(err, nodectl.ErrNotFound):
			fmt.Fprintf(out, "Unit %s could not be found.\n", name)
			code = systemctlNoSuchUnit
			continue
		case err != nil:
			return err
		}
		units = append(units, u)
	}
	for _, u := range units {
		if !u.Running() && code == 0 {
			code = systemctlInactive
		}
		if command == "is-active" {
			if !f.quiet {
				fmt.Fprintln(out, u.Active)
			}
			continue
		}
		fmt.Fprintf(out, "● %s - restartbed's kubelet of node %s\n     Loaded: loaded\n     Active: %s (%s)\n", u.Name, u.Node, u.Active, u.Sub)
	}
	if code != 0 {
		return exitError{code: code}
	}
	return nil
}
