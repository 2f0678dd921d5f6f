package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/restartbed/restartbed/bench"
	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/timing"
)

type benchFlags struct {
	pods, podsPerJob int
	strategy         string
	output           string
	compare          string
	jitter           bool
	timing           string
	version          string
	timeout          time.Duration
	heartbeats       float64
	cpuProfile       string
	restartProfile   string
	memProfile       string
	apiProfile       string
	apiProfileFor    time.Duration
	agentBinary      string
	allowBinaries    bool
	kubelets         int
}

func newBenchCommand() *cobra.Command {
	f := benchFlags{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a JobSet's group restart at scale against the control plane's write bound",
		Long: `bench starts the embedded control plane with --pods emulated nodes and, in one process:

  bound     measures the control plane's write bound: pod creates/s and pod status patches/s at
            the client concurrency restartbed's kubelet uses (16), while the nodes heartbeat
  inplace   runs a JobSet of --pods workers, one per node, each pod JobSet's agent sidecar and a
            worker, with restartStrategy InPlaceRestart; makes one worker exit and times the
            group restart until every worker runs again
  recreate  the same JobSet with restartStrategy Recreate: every Job deleted and created anew
  herd      after each restart, every agent's watch broken at once (an apiserver rollout): the
            time until all agents watch again, their 429s and Retry-After waits, with the
            agents' backoff jittered or not (--agent-jitter)

For each restart it reports where the time went (milestones from the exit), the API writes per
pod as the apiserver counted them, the time those writes need at the measured bound, the CPU
restartbed, kube-apiserver and etcd used (on a small machine the restart waits for CPU), the 429s
API Priority and Fairness answered and what the agents lost to them; then the ratio of the
recreate restart to the in-place one and the peak memory of the three processes.

Every node renews its Lease as the timing profile says, unless all of them together would renew
more than --heartbeats-per-second times a second (5000 nodes in realistic timing: 500, this
2-core machine's whole write bound); then every node's renew interval, lease duration, status
report and grace periods are stretched by one whole factor, which the report states.

--agent-binary runs a host executable as every pod's agent instead of restartbed's builtin one
(upstream JobSet's in-place-restart agent, built from sigs.k8s.io/jobset v0.12.0); it needs
--allow-host-binaries and root (docs/host-binaries.md). The report then adds what the binaries'
processes cost, CPU and peak RSS, beside restartbed's own; the herd is not measured.

--kubelets K runs the nodes in K "restartbed kubelet" processes of one shard group instead of in
this process, as "restartbed up --kubelets" does (docs/join.md): the report then has each
process's nodes, CPU, peak RSS and the pod watch events the apiserver sent it, restartbed's own
CPU is the JobSet controller's alone, and the agents (restartbed's builtin, in the processes) and
the herd are not measured.

-o json writes the report as JSON; --compare FILE prints each figure beside a previous JSON
report's. Nothing is asserted about speed: docs/performance.md holds the figures and the goals.

Exit status: 0 measured; 1 a restart did not complete or the cluster failed; 2 bad flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := f.options()
			if err != nil {
				return exitError{code: exitInvalid, err: err}
			}
			var previous *bench.Report
			if f.compare != "" {
				if previous, err = bench.ReadReport(f.compare); err != nil {
					return exitError{code: exitInvalid, err: fmt.Errorf("--compare: %w", err)}
				}
			}
			opts.Progress = cmd.ErrOrStderr()
			opts.Cluster = envtest.Options{Assets: controlplane.Options{Progress: cmd.ErrOrStderr()}, Logger: &logger, KubernetesVersion: f.version}
			return runBench(cmd.Context(), cmd.OutOrStdout(), opts, f, previous)
		},
	}
	cmd.Flags().IntVar(&f.pods, "pods", 100, "workers, one pod per emulated node")
	addKubernetesVersionFlag(cmd.Flags(), &f.version)
	cmd.Flags().IntVar(&f.podsPerJob, "pods-per-job", bench.DefaultPodsPerJob, "pods per Job (parallelism); --pods must be a multiple")
	cmd.Flags().StringVar(&f.strategy, "strategy", "both", "inplace, recreate or both")
	cmd.Flags().StringVarP(&f.output, "output", "o", "table", "table or json")
	cmd.Flags().StringVar(&f.compare, "compare", "", "a previous JSON report (-o json) to print beside this run's figures")
	cmd.Flags().BoolVar(&f.jitter, "agent-jitter", true, "jitter the agents' retry backoff; false makes agents that fail together retry together")
	cmd.Flags().StringVar(&f.timing, "timing", timing.Realistic().Name,
		fmt.Sprintf("timing profile: %s (realistic's heartbeats load the apiserver as a real cluster's nodes do)", strings.Join(timing.Names(), " or ")))
	cmd.Flags().Float64Var(&f.heartbeats, "heartbeats-per-second", bench.DefaultHeartbeatBudget,
		"most Lease renewals a second all nodes may make; past it every node's heartbeat interval, lease and grace are stretched alike (0: the timing profile's own)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 0, "bound of each wait: the workers starting, the group restart, the clean-up (0: 10m, or 250ms a pod if longer)")
	cmd.Flags().StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of restartbed's process (pprof) to this file")
	cmd.Flags().StringVar(&f.restartProfile, "restart-cpuprofile", "",
		"write a CPU profile of restartbed's process (pprof) over the first restart only, from the worker's exit until every worker runs again (the window of the report's CPU figures), to this file")
	cmd.Flags().StringVar(&f.memProfile, "memprofile", "", "write a heap profile of restartbed's process (pprof) to this file when every worker runs again after the first restart")
	cmd.Flags().StringVar(&f.apiProfile, "apiserver-cpuprofile", "", "write a CPU profile of kube-apiserver (pprof), taken from the first restart's exit, to this file")
	cmd.Flags().StringVar(&f.agentBinary, "agent-binary", "", "run this host executable as every pod's agent (needs --allow-host-binaries)")
	cmd.Flags().BoolVar(&f.allowBinaries, "allow-host-binaries", false, "let --agent-binary run (needs root; docs/host-binaries.md)")
	cmd.Flags().IntVar(&f.kubelets, "kubelets", 0, "run the nodes in this many restartbed kubelet processes (shards) instead of in this process; 0: in this process")
	cmd.Flags().DurationVar(&f.apiProfileFor, "apiserver-cpuprofile-for", bench.DefaultAPIServerProfileFor, "how long --apiserver-cpuprofile profiles")
	return cmd
}

func (f benchFlags) options() (bench.Options, error) {
	opts := bench.Options{Pods: f.pods, PodsPerJob: f.podsPerJob, AgentJitter: &f.jitter, HeartbeatBudget: &f.heartbeats, Timeout: f.timeout}
	switch f.strategy {
	case "both":
		opts.Strategies = bench.Strategies()
	case string(bench.InPlace), string(bench.Recreate):
		opts.Strategies = []bench.Strategy{bench.Strategy(f.strategy)}
	default:
		return opts, fmt.Errorf("--strategy must be inplace, recreate or both, got %q", f.strategy)
	}
	if f.output != "table" && f.output != "json" {
		return opts, fmt.Errorf("-o must be table or json, got %q", f.output)
	}
	profile, err := timing.ByName(f.timing)
	if err != nil {
		return opts, fmt.Errorf("--timing: %w", err)
	}
	if _, err := controlplane.ResolveRelease(f.version); err != nil {
		return opts, fmt.Errorf("--kubernetes-version: %w", err)
	}
	if f.cpuProfile != "" && f.restartProfile != "" {
		return opts, errors.New("--cpuprofile and --restart-cpuprofile cannot be given together: a process has one CPU profile at a time")
	}
	if f.apiProfileFor < time.Second {
		return opts, fmt.Errorf("--apiserver-cpuprofile-for must be at least 1s, got %s", f.apiProfileFor)
	}
	opts.Timing = &profile
	if f.kubelets != 0 {
		self, err := os.Executable()
		if err != nil {
			return opts, fmt.Errorf("--kubelets: this binary's path: %w", err)
		}
		opts.KubeletProcesses, opts.KubeletCommand = f.kubelets, []string{self}
	}
	if f.agentBinary != "" {
		if opts.AgentBinary, err = hostBinaryFlag("--agent-binary", f.agentBinary, f.allowBinaries); err != nil {
			return opts, err
		}
	}
	return opts, bench.CheckOptions(opts)
}

func runBench(ctx context.Context, out io.Writer, opts bench.Options, f benchFlags, previous *bench.Report) error {
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return exitError{code: exitInvalid, err: fmt.Errorf("--cpuprofile: %w", err)}
		}
		defer stop()
	}
	if f.apiProfile != "" {
		file, err := os.Create(f.apiProfile)
		if err != nil {
			return exitError{code: exitInvalid, err: fmt.Errorf("--apiserver-cpuprofile: %w", err)}
		}
		defer file.Close()
		opts.APIServerProfile, opts.APIServerProfileFor = file, f.apiProfileFor
	}
	var restartProfile *restartCPUProfile
	if f.restartProfile != "" {
		var err error
		if restartProfile, err = newRestartCPUProfile(f.restartProfile); err != nil {
			return exitError{code: exitInvalid, err: fmt.Errorf("--restart-cpuprofile: %w", err)}
		}
		defer restartProfile.stop()
		opts.Restarting = restartProfile.start
	}
	var heapErr error
	var heapOnce sync.Once
	opts.Restarted = func(bench.Strategy) {
		if restartProfile != nil {
			restartProfile.stop() // before the heap profile's collection adds to it
		}
		if f.memProfile != "" {
			heapOnce.Do(func() { heapErr = writeHeapProfile(f.memProfile) })
		}
	}
	rep, runErr := bench.Run(ctx, opts)
	if heapErr != nil {
		runErr = errors.Join(runErr, fmt.Errorf("--memprofile: %w", heapErr))
	}
	if restartProfile != nil && restartProfile.err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("--restart-cpuprofile: %w", restartProfile.err))
	}
	if rep != nil {
		if f.output == "json" {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			if err := enc.Encode(rep); err != nil {
				return err
			}
		} else {
			rep.WriteTable(out, previous)
		}
	}
	if runErr != nil {
		return exitError{code: exitFailed, err: runErr}
	}
	return nil
}

// writeHeapProfile writes the live heap, as of the last garbage collection made now, to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	goruntime.GC()
	return errors.Join(pprof.WriteHeapProfile(f), f.Close())
}

// restartCPUProfile is --restart-cpuprofile: a CPU profile of this process over the first
// restart. Its file is created before the run, so that a path that cannot be written fails
// before the minutes a bench takes; the profile starts at the first restart's exit and stops
// when every worker runs again, or when the run ends.
type restartCPUProfile struct {
	file             *os.File
	started, stopped bool
	err              error
}

func newRestartCPUProfile(path string) (*restartCPUProfile, error) {
	file, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &restartCPUProfile{file: file}, nil
}

// start starts the profile, the first time only; bench.Options.Restarting.
func (p *restartCPUProfile) start(bench.Strategy) {
	if p.started {
		return
	}
	p.started = true
	p.err = pprof.StartCPUProfile(p.file)
}

// stop ends the profile and closes its file; later calls do nothing.
func (p *restartCPUProfile) stop() {
	if p.stopped {
		return
	}
	p.stopped = true
	if p.started && p.err == nil {
		pprof.StopCPUProfile()
	}
	if err := p.file.Close(); err != nil && p.err == nil {
		p.err = err
	}
}

// startCPUProfile profiles this process's CPU into path until the returned function is called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
