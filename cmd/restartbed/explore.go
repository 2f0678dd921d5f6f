package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/explore"
	"github.com/restartbed/restartbed/scenarios"
)

type exploreFlags struct {
	faults                    []string
	budget                    time.Duration
	pairs                     bool
	maxSchedules, parallel    int
	confirm                   int
	seed                      uint64
	shard, output, junit, out string
	pointMatch                string
	user                      userController
	allowBinaries             bool
}

func newExploreCommand() *cobra.Command {
	var f exploreFlags
	cmd := &cobra.Command{
		Use:   "explore SCENARIO",
		Short: "Replay a scenario with one fault at each point of it, checking invariants, and write every violation as a scenario",
		Long: `explore replays the scenario once as a reference run, with the built-in JobSet in-place
invariants on (spec.invariants builtin: jobset-in-place) beside the scenario's own, and reads from
its trace the points it passed: each container's state, each pod's attempt, each JobSet attempt and
restart count, each node's readiness. It then replays the scenario once per schedule, one fault at
one point (a spec.triggers entry whose when is the point), on a fresh cluster each time. With
--pairs, once every single fault has had its turn, it replays pairs: one fault at a point and a
second at a later point (unreached if the first changed the run so that the second never came).

A schedule ends as violated (an invariant broke), held, diverged (invariants held but a step of
the scenario failed, which a fault may cause), unreached (the replay never reached the point) or
error. Each violation is written to --out as a scenario file that ` + "`restartbed run`" + ` replays, with
the violating replay's trace beside it (NAME.trace.jsonl, as run --trace writes it), and replayed
--confirm times to say how often it reproduces.

Faults (--faults, default all but restart-controller; with --controller, all but
restart-jobset-controller):
` + faultHelp() + `

--controller runs your controller instead of restartbed's JobSet controller: a command (sh -c)
started for each replay with the cluster's kubeconfig in $KUBECONFIG, stopped (SIGTERM to its
process group) when the replay's steps end; --crds installs its CustomResourceDefinitions (your
JobSet CRD, say) in each replay's cluster.

Schedules are shuffled by --seed; --shard i/n takes every n-th from the i-th, so that a CI matrix
or an Indexed Job splits them; --budget and --max-schedules stop starting new ones.

Exit status: 0 no invariant broke; 1 a violation, a failed reference run or an error; 2 bad
input. docs/explore.md has the invariants and a worked example.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExplore(cmd, args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.faults, "faults", nil, "the faults to inject, comma-separated (default: "+strings.Join(explore.DefaultFaults(false), ", ")+"; with --controller, restart-controller for restart-jobset-controller)")
	fl.BoolVar(&f.pairs, "pairs", false, "after the single faults, replay pairs of faults: one at a point, another at a later one")
	fl.DurationVar(&f.budget, "budget", 0, "stop starting schedules after this long (0: run them all)")
	fl.IntVar(&f.maxSchedules, "max-schedules", 0, "stop after this many schedules (0: no limit)")
	fl.IntVarP(&f.parallel, "parallel", "p", 1, "replays to run at once, each with its own control plane")
	fl.Uint64Var(&f.seed, "seed", 1, "the order of the schedules")
	fl.StringVar(&f.pointMatch, "point-match", "", "only the points whose description contains this text (such as \"attempt\" or \"worker\")")
	fl.StringVar(&f.shard, "shard", "", "i/n: take only the schedules whose index is i modulo n")
	fl.StringVar(&f.out, "out", "explore-violations", "write a scenario file for each violation into this directory")
	fl.IntVar(&f.confirm, "confirm", 1, "replay each violation's scenario file this many times to see it reproduce")
	fl.StringVarP(&f.output, "output", "o", "text", "text or json")
	fl.StringVar(&f.junit, "junit", "", "write JUnit XML to this file (one testcase per schedule)")
	f.user.addFlags(fl, "each replay's")
	fl.BoolVar(&f.allowBinaries, "allow-host-binaries", false, "let the scenario run host executables as containers' processes (needs root)")
	return cmd
}

func faultHelp() string {
	var b strings.Builder
	for _, f := range explore.Faults {
		fmt.Fprintf(&b, "  %-26s %s\n", f.Name, f.Does)
	}
	return strings.TrimRight(b.String(), "\n")
}

func runExplore(cmd *cobra.Command, file string, f exploreFlags) error {
	opts := explore.Options{Faults: f.faults, Pairs: f.pairs, Budget: f.budget, MaxSchedules: f.maxSchedules, Parallel: f.parallel, Seed: f.seed,
		OutDir: f.out, Confirm: f.confirm, Progress: cmd.ErrOrStderr()}
	if f.pointMatch != "" {
		opts.PointFilter = func(p explore.Point) bool { return strings.Contains(p.Description, f.pointMatch) }
	}
	switch {
	case f.parallel < 1:
		return exitError{code: exitInvalid, err: fmt.Errorf("-p must be at least 1, got %d", f.parallel)}
	case f.confirm < 0 || f.maxSchedules < 0 || f.budget < 0:
		return exitError{code: exitInvalid, err: errors.New("--confirm, --max-schedules and --budget must not be negative")}
	case f.output != "text" && f.output != "json":
		return exitError{code: exitInvalid, err: fmt.Errorf("-o %q: use text or json", f.output)}
	}
	if f.shard != "" {
		i, n, ok := strings.Cut(f.shard, "/")
		var err1, err2 error
		opts.Shard, err1 = strconv.Atoi(i)
		opts.Shards, err2 = strconv.Atoi(n)
		if !ok || err1 != nil || err2 != nil || opts.Shards < 1 || opts.Shard < 0 || opts.Shard >= opts.Shards {
			return exitError{code: exitInvalid, err: fmt.Errorf("--shard %q: give i/n with 0 <= i < n, such as 0/4", f.shard)}
		}
	}
	if _, err := explore.FaultsNamed(f.faults); err != nil {
		return exitError{code: exitInvalid, err: fmt.Errorf("--faults: %w", err)}
	}
	sc, err := scenarios.Load(file)
	if err != nil {
		var invalid *scenarios.InvalidError
		if errors.As(err, &invalid) {
			fmt.Fprintln(cmd.ErrOrStderr(), err)
			return exitError{code: exitInvalid, err: fmt.Errorf("%d problem(s) in %s; nothing was started", len(invalid.Problems), file)}
		}
		return exitError{code: exitInvalid, err: err}
	}
	if problems := sc.HostBinaryProblems(); len(problems) > 0 && !f.allowBinaries {
		fmt.Fprintln(cmd.ErrOrStderr(), &scenarios.InvalidError{Problems: problems})
		return exitError{code: exitInvalid, err: errors.New("the scenario names a host binary and --allow-host-binaries was not given; nothing was started")}
	}
	r, err := controlplane.ResolveRelease(sc.Spec.KubernetesVersion)
	if err != nil {
		return exitError{code: exitInvalid, err: fmt.Errorf("%s: %w", file, err)}
	}
	if _, err := controlplane.Ensure(r, controlplane.Options{Progress: cmd.ErrOrStderr()}); err != nil {
		return exitError{code: exitFailed, err: err}
	}
	self, err := os.Executable()
	if err != nil {
		return exitError{code: exitFailed, err: fmt.Errorf("this binary's path: %w", err)}
	}
	crds, err := f.user.readCRDs()
	if err != nil {
		return exitError{code: exitInvalid, err: err}
	}
	opts.Run = scenarios.RunOptions{AllowHostBinaries: f.allowBinaries, KubeletCommand: []string{self},
		Configure: func(o *envtest.Options) { o.Logger = &logger }}
	defer f.user.apply(&opts.Run, crds, cmd.ErrOrStderr())()
	if f.user.command != "" && len(f.faults) == 0 {
		// Your controller restarts instead of restartbed's JobSet controller, which does not run.
		opts.Faults = explore.DefaultFaults(true)
	}
	// A violation's scenario replays with the same controller and permissions.
	replay := append([]string{"restartbed", "run"}, f.user.flags()...)
	if f.allowBinaries {
		replay = append(replay, "--allow-host-binaries")
	}
	opts.ReplayCommand = shellWords(replay)
	rep, err := explore.Explore(cmd.Context(), file, opts)
	if rep == nil {
		return exitError{code: exitFailed, err: err}
	}
	if f.junit != "" {
		if werr := writeFile(f.junit, rep.WriteJUnit); werr != nil {
			return exitError{code: exitFailed, err: fmt.Errorf("--junit: %w", werr)}
		}
	}
	out := cmd.OutOrStdout()
	if f.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if werr := enc.Encode(rep); werr != nil {
			return werr
		}
	} else if werr := rep.WriteText(out); werr != nil {
		return werr
	}
	switch {
	case err != nil:
		return exitError{code: exitFailed, err: err}
	case rep.Reference.Verdict != explore.Held:
		return exitError{code: exitFailed, err: fmt.Errorf("the reference run did not hold (%s)", rep.Reference.Verdict)}
	case rep.Violations() > 0:
		return exitError{code: exitFailed, err: fmt.Errorf("%d schedule(s) broke an invariant", rep.Violations())}
	}
	return nil
}

// writeFile creates path and writes it with write.
func writeFile(path string, write func(w io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
