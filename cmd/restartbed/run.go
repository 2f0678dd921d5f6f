package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/scenarios"
	"github.com/restartbed/restartbed/timing"
)

// Exit statuses of run (SCENARIOS.md, "Output").
const (
	exitFailed  = 1
	exitInvalid = 2
)

func newRunCommand() *cobra.Command {
	var parallel int
	var junit, trace, timingName, version string
	var allowBinaries, share bool
	var user userController
	cmd := &cobra.Command{
		Use:   "run FILE|DIR...",
		Short: "Replay scenarios, each on a fresh cluster, and report every step",
		Long: `run loads every scenario first (a directory stands for its *.yaml and *.yml files) and starts
nothing if any is invalid. Each scenario then gets its own control plane, controllers and emulated
nodes; its objects are applied and its steps run in order, one report line per step.

--timing replays every scenario in another timing profile than its spec.timing, to check that
it holds in both; expressions that read the timing variable (timing.defaultTolerationSeconds,
...) follow the profile.

A program rule may run a host executable as a container's process (spec.programs[].binary), in
namespaces of its own; such a scenario runs only with --allow-host-binaries, which needs root
(docs/host-binaries.md). Without it the scenario is refused and nothing starts.

--share runs the scenarios that can as tenants of shared control planes, one for each release,
timing profile and set of feature gates that two or more of them ask for, as upstream's e2e
suites share one cluster among their specs: each gets a namespace (spec.namespace with a suffix)
and nodes (named <pool>-<tenant>-<i>) of its own, which its steps and expressions see as its
own. A scenario that kills a control-plane process, runs kubelet processes or host binaries,
installs CRDs, names one of its nodes in a manifest or an expression, or has a lone node that can
go down runs on a cluster of its own (docs/scenarios.md, "Sharing a control plane").

--controller runs your controller instead of restartbed's JobSet controller: a command (sh -c)
started for each scenario once its cluster is up and before its objects are applied, the
cluster's kubeconfig in $KUBECONFIG; it gets SIGTERM (its process group) when the steps end, and
a killComponent step of component controller kills it. --crds installs CustomResourceDefinitions
(your JobSet CRD, say) before the controllers start. A scenario restartbed explore wrote for your
controller replays with the same flags (its report prints them).

Exit status: 0 every step of every scenario passed; 1 a step failed or a cluster could not run;
2 a scenario file is invalid, or names a host binary without --allow-host-binaries (each problem
is shown as FILE:LINE: FIELD: message).

The format is documented in docs/scenarios.md.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if parallel < 1 {
				return exitError{code: exitInvalid, err: fmt.Errorf("-p must be at least 1, got %d", parallel)}
			}
			if timingName != "" {
				if _, err := timing.ByName(timingName); err != nil {
					return exitError{code: exitInvalid, err: fmt.Errorf("--timing: %w", err)}
				}
			}
			if share && (user.command != "" || len(user.crds) > 0) {
				return exitError{code: exitInvalid, err: errors.New("--share: a shared control plane runs restartbed's JobSet controller and the CRDs of none of its tenants; not with --controller or --crds")}
			}
			return runScenarios(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args,
				runFlags{parallel: parallel, junit: junit, trace: trace, timing: timingName, version: version, allowBinaries: allowBinaries, user: user, share: share})
		},
	}
	cmd.Flags().IntVarP(&parallel, "parallel", "p", 1, "scenarios to run at once, each with its own control plane (with --share, tenants of a shared one)")
	cmd.Flags().BoolVar(&share, "share", false, "run the scenarios that can as tenants of shared control planes, a namespace and nodes each")
	cmd.Flags().StringVar(&junit, "junit", "", "write JUnit XML to this file (one testcase per step)")
	addKubernetesVersionFlag(cmd.Flags(), &version)
	cmd.Flags().Lookup("kubernetes-version").Usage = "run every scenario on this Kubernetes release instead of its spec.kubernetesVersion; " + cmd.Flags().Lookup("kubernetes-version").Usage
	cmd.Flags().StringVar(&timingName, "timing", "", "run every scenario in this timing profile ("+strings.Join(timing.Names(), ", ")+") instead of its spec.timing")
	cmd.Flags().BoolVar(&allowBinaries, "allow-host-binaries", false, "let scenarios run host executables as containers' processes (spec.programs[].binary; needs root)")
	user.addFlags(cmd.Flags(), "each scenario's")
	cmd.Flags().StringVar(&trace, "trace", "", "write every observed object change to this file as JSON lines; with several scenarios, FILE gets each scenario's name before its extension")
	return cmd
}

type runFlags struct {
	parallel                      int
	junit, trace, timing, version string
	allowBinaries, share          bool
	user                          userController
}

func runScenarios(ctx context.Context, out, errOut io.Writer, paths []string, flags runFlags) error {
	all, err := scenarios.LoadAll(paths)
	if err != nil {
		var invalid *scenarios.InvalidError
		if errors.As(err, &invalid) {
			fmt.Fprintln(errOut, err)
			return exitError{code: exitInvalid, err: fmt.Errorf("%d problem(s) in the scenario files; nothing was started", len(invalid.Problems))}
		}
		return exitError{code: exitInvalid, err: err}
	}
	if !flags.allowBinaries {
		var refused []scenarios.Problem
		for _, sc := range all {
			refused = append(refused, sc.HostBinaryProblems()...)
		}
		if len(refused) > 0 {
			fmt.Fprintln(errOut, &scenarios.InvalidError{Problems: refused})
			return exitError{code: exitInvalid, err: fmt.Errorf("%d program(s) name a host binary and --allow-host-binaries was not given; nothing was started", len(refused))}
		}
	}
	crds, err := flags.user.readCRDs()
	if err != nil {
		return exitError{code: exitInvalid, err: err}
	}
	if flags.timing != "" {
		for _, sc := range all {
			sc.Spec.Timing = flags.timing
		}
	}
	// Build or find each release's control plane once, before any scenario starts its own.
	built := map[string]bool{}
	for _, sc := range all {
		if flags.version != "" {
			sc.Spec.KubernetesVersion = flags.version
		}
		r, err := controlplane.ResolveRelease(sc.Spec.KubernetesVersion)
		if err == nil {
			_, err = envtest.ResolveFeatureGates(r, sc.Spec.FeatureGates)
		}
		if err != nil {
			return exitError{code: exitInvalid, err: fmt.Errorf("%s: %w", sc.File, err)}
		}
		if built[r.Kubernetes] {
			continue
		}
		if _, err := controlplane.Ensure(r, controlplane.Options{Progress: errOut}); err != nil {
			return exitError{code: exitFailed, err: err}
		}
		built[r.Kubernetes] = true
	}
	progress := scenarios.SyncWriter(out)
	results := make([]*scenarios.Result, len(all))
	var traceFiles []*os.File
	defer func() {
		for _, f := range traceFiles {
			_ = f.Close()
		}
	}()
	traces := make([]io.Writer, len(all))
	if flags.trace != "" {
		for i, sc := range all {
			name := flags.trace
			if len(all) > 1 {
				name = withSuffix(flags.trace, sc.Metadata.Name)
			}
			f, err := os.Create(name)
			if err != nil {
				return exitError{code: exitFailed, err: fmt.Errorf("--trace: %w", err)}
			}
			traceFiles = append(traceFiles, f)
			traces[i] = f
		}
	}
	// A scenario with spec.kubelets runs its kubelet processes with this binary.
	self, err := os.Executable()
	if err != nil {
		return exitError{code: exitFailed, err: fmt.Errorf("this binary's path: %w", err)}
	}
	var hosts *scenarios.Hosts
	if flags.share {
		if hosts, err = scenarios.NewHosts(all, func(o *envtest.Options) { o.Logger = &logger }); err != nil {
			return exitError{code: exitInvalid, err: err}
		}
		defer func() {
			if err := hosts.Stop(); err != nil {
				fmt.Fprintln(errOut, err)
			}
		}()
	}
	sem := make(chan struct{}, flags.parallel)
	var wg sync.WaitGroup
	for i := range all {
		sem <- struct{}{}
		opts := scenarios.RunOptions{Progress: progress, Trace: traces[i], AllowHostBinaries: flags.allowBinaries,
			KubeletCommand: []string{self}, Configure: func(o *envtest.Options) { o.Logger = &logger }}
		wait := flags.user.apply(&opts, crds, errOut)
		wg.Go(func() {
			defer func() { <-sem }()
			defer wait()
			if host := hosts.For(all[i]); host != nil {
				var err error
				if opts.Host, err = hosts.Cluster(ctx, host); err != nil {
					fmt.Fprintf(progress, "%s | ERROR %v\n", all[i].Metadata.Name, err)
					results[i] = &scenarios.Result{Scenario: all[i], Err: err}
					return
				}
			}
			results[i] = scenarios.Run(ctx, all[i], opts)
		})
	}
	wg.Wait()
	if flags.junit != "" {
		if err := writeJUnit(flags.junit, results); err != nil {
			return exitError{code: exitFailed, err: err}
		}
	}
	failed := 0
	for _, r := range results {
		if r == nil || !r.Passed() {
			failed++
		}
	}
	if failed > 0 {
		return exitError{code: exitFailed, err: fmt.Errorf("%d of %d scenario(s) failed", failed, len(all))}
	}
	fmt.Fprintf(out, "all %d scenario(s) passed\n", len(all))
	return nil
}

func writeJUnit(path string, results []*scenarios.Result) error {
	var done []*scenarios.Result
	for _, r := range results {
		if r != nil {
			done = append(done, r)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--junit: %w", err)
	}
	if err := scenarios.WriteJUnit(f, done); err != nil {
		_ = f.Close()
		return fmt.Errorf("--junit: %w", err)
	}
	return f.Close()
}

// withSuffix inserts -suffix before the file's extension: trace.jsonl → trace-name.jsonl.
func withSuffix(path, suffix string) string {
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "-" + suffix + ext
}
