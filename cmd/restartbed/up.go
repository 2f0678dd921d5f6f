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
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/restartbed/restartbed/agent"
	"github.com/restartbed/restartbed/builtins"
	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/program"
	"github.com/restartbed/restartbed/scenarios"
	"github.com/restartbed/restartbed/timing"
)

// upFlags are the settings of `restartbed up`.
type upFlags struct {
	nodes       int
	expectNodes int
	// kubelets runs the nodes in that many restartbed kubelet processes (shards).
	kubelets int
	timing   string
	version  string
	jobSet   bool
	// imageCommands: containers without a command run their image's (known images).
	imageCommands bool
	featureGates  map[string]bool
	kubeconfig    string
	from          string
	// crds are --crds paths: files or directories of CustomResourceDefinitions.
	crds []string
	// allowBinaries lets the --from scenario's programs name host binaries.
	allowBinaries bool
	// control is the host's side of the nodes.
	control nodeControlFlags
	// set tells which flags the user gave, so that they override a --from scenario.
	set func(name string) bool
}

func newUpCommand() *cobra.Command {
	f := upFlags{featureGates: map[string]bool{}}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a cluster with emulated nodes until Ctrl-C, for kubectl and your own controllers",
		Long: `up starts the control plane of a Kubernetes release (etcd, kube-apiserver, kube-controller-manager
with all its default controllers, and kube-scheduler; --kubernetes-version, default the newest),
restartbed's JobSet controller and webhook, and an emulated kubelet with --nodes nodes, with the
gates in-place restart needs; writes a kubeconfig for the cluster admin and
prints how to use it; and runs until interrupted (Ctrl-C or SIGTERM), then stops everything and
removes the kubeconfig.

Containers named in-place-restart-agent, or whose image contains it, run restartbed's builtin
agent; every other container runs its command and args in the emulated runtime (busybox-like
shell and tools). One without a command runs its image's entrypoint and default command when
restartbed knows the image (busybox's sh exits at once, pause sleeps, agnhost's subcommands and
nginx serve; docs/images.md), else until stopped; --image-commands=false runs every one of them
until stopped, as a scenario does unless it sets spec.imageCommands. --from takes the nodes,
timing, Kubernetes version, feature gates, programs, images, objects and kubelet processes
(spec.kubelets) of a scenario file instead (its steps are not run); flags given as well override it. A --from scenario whose programs run host executables (spec.programs[].binary)
needs --allow-host-binaries (and root; docs/host-binaries.md), or nothing starts (exit 2).

kubectl logs [-p] [-f], exec [-it], attach and port-forward reach the emulated kubelets' API
through the apiserver, as on a cluster (docs/fakekubelet.md, "The kubelet API").
With --nodes 0 the cluster has no nodes of its own: join some with "restartbed kubelet" (or
KWOK) using the kubeconfig, and say how many with --expect-nodes (docs/join.md). With
--kubelets K the nodes run in K "restartbed kubelet" processes of one shard group on this
machine instead of in this one: they divide the nodes, their pods share one network, and they
stop with it (docs/join.md, "Shards").
Run your own controller instead of restartbed's JobSet controller with --jobset=false: nothing of
restartbed's JobSet is installed then (no CRD, no webhook), so install your own JobSet CRD; see
docs/control-plane.md.

--crds installs your project's CustomResourceDefinitions (a file, or a directory's .yaml, .yml and
.json files; repeatable), as a --from scenario's CRD objects are, before kube-controller-manager
starts: its garbage collector then knows their kinds from the start, so an owner reference to one of
your objects is honoured at once rather than after the collector's next resync (about 30 seconds).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.set = func(name string) bool { return cmd.Flags().Changed(name) }
			return runUp(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	cmd.Flags().IntVar(&f.nodes, "nodes", 3, "emulated nodes to register (named node-0, node-1, ...); 0: none, the cluster waits for nodes to join (restartbed kubelet, KWOK; docs/join.md)")
	cmd.Flags().IntVar(&f.kubelets, "kubelets", 0,
		"run the nodes in this many restartbed kubelet processes of one shard group on this machine, which divide the nodes and join their pods' networks (docs/join.md); 0: in this process (default: a --from scenario's spec.kubelets, else 0)")
	cmd.Flags().IntVar(&f.expectNodes, "expect-nodes", 0,
		"nodes other processes will join (restartbed kubelet, KWOK): the components' client limits are sized for them too (default with --nodes 0: 1)")
	cmd.Flags().StringVar(&f.timing, "timing", timing.Realistic().Name,
		fmt.Sprintf("timing profile of every component: %s", strings.Join(timing.Names(), " or ")))
	cmd.Flags().Var(cliflag.NewMapStringBool(&f.featureGates), "feature-gates",
		"feature gates of the apiserver and the kubelets, merged over restartbed's defaults: A=true,B=false")
	addKubernetesVersionFlag(cmd.Flags(), &f.version)
	cmd.Flags().BoolVar(&f.jobSet, "jobset", true, "install restartbed's JobSet CRD and run its controller and webhook; false installs none of them, leaving room for your own (docs/control-plane.md)")
	cmd.Flags().BoolVar(&f.imageCommands, "image-commands", true,
		"a container without a command runs its image's entrypoint and default command when restartbed knows the image (docs/images.md); false: it runs until stopped")
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "restartbed.kubeconfig",
		"where to write the kubeconfig; an existing file is replaced only if restartbed wrote it")
	cmd.Flags().StringVar(&f.from, "from", "", "a scenario file whose nodes, timing, feature gates, programs, images and objects to use")
	cmd.Flags().StringArrayVar(&f.crds, "crds", nil,
		"a file or directory of CustomResourceDefinition manifests to install before kube-controller-manager starts (repeatable)")
	addNodeControlFlags(cmd.Flags(), &f.control, true)
	cmd.Flags().BoolVar(&f.allowBinaries, "allow-host-binaries", false,
		"let the --from scenario's programs run host executables as containers' processes (spec.programs[].binary; needs root)")
	return cmd
}

// upOptions turns the flags (and the --from scenario) into cluster options and the objects to
// apply once the cluster is up.
func upOptions(f upFlags) (envtest.Options, *scenarios.Scenario, error) {
	var opts envtest.Options
	var sc *scenarios.Scenario
	if f.from != "" {
		var err error
		if sc, err = scenarios.Load(f.from); err != nil {
			return opts, nil, err
		}
		if problems := sc.HostBinaryProblems(); len(problems) > 0 && !f.allowBinaries {
			return opts, nil, &scenarios.InvalidError{Problems: problems}
		}
		if opts, err = sc.ClusterOptions(); err != nil {
			return opts, nil, err
		}
		opts.AllowHostBinaries = f.allowBinaries
	} else {
		opts = envtest.Options{JobSet: true, Programs: []program.Rule{
			{Container: agent.ContainerName, Builtin: builtins.Agent},
			{Image: "*" + agent.ContainerName + "*", Builtin: builtins.Agent},
		}}
	}
	if f.from == "" || f.set("nodes") {
		if f.nodes < 0 {
			return opts, nil, fmt.Errorf("--nodes must not be negative, got %d", f.nodes)
		}
		opts.Nodes = nil
		if f.nodes > 0 {
			opts.Nodes = []fakekubelet.NodePool{{Name: "node", Count: f.nodes}}
		}
	}
	if f.expectNodes < 0 {
		return opts, nil, fmt.Errorf("--expect-nodes must not be negative, got %d", f.expectNodes)
	}
	opts.ExternalNodes = f.expectNodes
	if len(opts.Nodes) == 0 && opts.ExternalNodes == 0 {
		// A cluster without nodes of its own waits for some to join; it needs a scheduler.
		opts.ExternalNodes = 1
	}
	if f.from == "" || f.set("timing") {
		profile, err := timing.ByName(f.timing)
		if err != nil {
			return opts, nil, fmt.Errorf("--timing: %w", err)
		}
		opts.Timing = &profile
	}
	if f.set("jobset") {
		opts.JobSet = f.jobSet
	}
	if f.from == "" || f.set("image-commands") {
		opts.ImageCommands = f.imageCommands
	}
	if f.from == "" || f.set("kubernetes-version") {
		if _, err := controlplane.ResolveRelease(f.version); err != nil {
			return opts, nil, fmt.Errorf("--kubernetes-version: %w", err)
		}
		opts.KubernetesVersion = f.version
	}
	nodes := 0
	for _, pool := range opts.Nodes {
		nodes += pool.Count
	}
	if err := f.control.check(nodes); err != nil {
		return opts, nil, err
	}
	opts.RuntimeSocketDir, opts.KubeletConfigFile = f.control.runtimeDir, f.control.kubeletConfig
	if err := kubeletProcesses(&opts, f, sc); err != nil {
		return opts, nil, err
	}
	var problems []scenarios.Problem
	for _, path := range f.crds {
		crds, err := scenarios.ReadCRDs(path)
		var invalid *scenarios.InvalidError
		if errors.As(err, &invalid) {
			problems = append(problems, invalid.Problems...)
			continue
		}
		opts.CRDs = append(opts.CRDs, crds...)
	}
	if len(problems) > 0 {
		return opts, nil, &crdsError{InvalidError: scenarios.InvalidError{Problems: problems}}
	}
	if len(f.featureGates) > 0 {
		gates := maps.Clone(opts.FeatureGates)
		if gates == nil {
			gates = map[string]bool{}
		}
		maps.Copy(gates, f.featureGates)
		opts.FeatureGates = gates
	}
	return opts, sc, nil
}

// kubeletProcesses moves the nodes into --kubelets processes of this binary, or into the --from
// scenario's spec.kubelets when --kubelets is not given: what the in-process kubelet takes as
// values, the processes take from the --from scenario or their defaults.
func kubeletProcesses(opts *envtest.Options, f upFlags, sc *scenarios.Scenario) error {
	processes, takeover := f.kubelets, false
	if sc != nil && sc.Spec.Kubelets != nil && !f.set("kubelets") {
		processes, takeover = sc.Spec.Kubelets.Processes, sc.Spec.Kubelets.Takeover
	}
	if processes == 0 {
		return nil
	}
	if processes < 0 {
		return fmt.Errorf("--kubelets must not be negative, got %d", processes)
	}
	if len(opts.Nodes) == 0 {
		return errors.New("--kubelets: no nodes to run in them (--nodes, or the --from scenario's)")
	}
	c := f.control
	if c.socket != "" || c.healthz.set() || c.runtimeDir != "" || c.kubeletConfig != "" {
		return errors.New("--kubelets: --control-socket, --kubelet-healthz-port, --runtime-socket-dir and --kubelet-config serve the in-process kubelets; run restartbed kubelet with them yourself")
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("--kubelets: this binary's path: %w", err)
	}
	opts.KubeletProcesses, opts.KubeletCommand = processes, []string{self}
	if f.from != "" {
		from, err := filepath.Abs(f.from)
		if err != nil {
			return err
		}
		opts.KubeletArgs = append(opts.KubeletArgs, "--from", from)
	}
	if takeover {
		opts.KubeletArgs = append(opts.KubeletArgs, "--takeover")
	}
	if opts.AllowHostBinaries {
		opts.KubeletArgs = append(opts.KubeletArgs, "--allow-host-binaries")
	}
	// The processes have the agent's programs by default, and the scenario's from --from.
	opts.Programs, opts.Images, opts.Builtins, opts.AllowHostBinaries = nil, nil, nil, false
	return nil
}

func runUp(ctx context.Context, out, progress io.Writer, f upFlags) error {
	opts, sc, err := upOptions(f)
	if err != nil {
		return invalidOptions(progress, err, f.from)
	}
	kubeconfig, err := filepath.Abs(f.kubeconfig)
	if err != nil {
		return err
	}
	if err := checkReplaceable(kubeconfig); err != nil {
		return exitError{code: exitInvalid, err: err}
	}
	opts.Assets = controlplane.Options{Progress: progress}
	opts.Logger = &logger
	start := time.Now()
	cluster, err := envtest.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(out, "stopping the cluster")
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(progress, "restartbed: stopping the cluster:", err)
		}
	}()
	data, err := cluster.Kubeconfig()
	if err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		return fmt.Errorf("writing the kubeconfig: %w", err)
	}
	defer func() {
		if err := os.Remove(kubeconfig); err != nil && !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintln(progress, "restartbed: removing the kubeconfig:", err)
		}
	}()
	if sc != nil {
		dyn, err := dynamic.NewForConfig(cluster.Config)
		if err != nil {
			return err
		}
		if err := scenarios.Apply(ctx, cluster, dyn, sc.Spec.Namespace, sc.Objects); err != nil {
			return err
		}
	}
	control, err := serveNodeControl(ctx, cluster.Kubelet, f.control)
	if err != nil {
		return err
	}
	printUp(out, cluster, kubeconfig, sc, len(opts.CRDs), time.Since(start))
	control.print(out)
	<-ctx.Done()
	fmt.Fprintln(out, "interrupted")
	return nil
}

// crdsError holds the problems of the --crds paths.
type crdsError struct{ scenarios.InvalidError }

// invalidOptions is the usage error (exit 2) of options that cannot run: a --from scenario's
// or the --crds files' problems are printed, one per line, and counted; any other error is said
// as it is.
func invalidOptions(progress io.Writer, err error, from string) error {
	var crds *crdsError
	if errors.As(err, &crds) {
		fmt.Fprintln(progress, err)
		return exitError{code: exitInvalid, err: fmt.Errorf("%d problem(s) in --crds; nothing was started", len(crds.Problems))}
	}
	var invalid *scenarios.InvalidError
	if errors.As(err, &invalid) {
		fmt.Fprintln(progress, err)
		return exitError{code: exitInvalid, err: fmt.Errorf("%d problem(s) in %s; nothing was started", len(invalid.Problems), from)}
	}
	return exitError{code: exitInvalid, err: err}
}

// checkReplaceable refuses to overwrite a file that is not a kubeconfig restartbed wrote, so that
// --kubeconfig ~/.kube/config cannot destroy a user's real configuration.
func checkReplaceable(path string) error {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil || cfg.CurrentContext != envtest.KubeconfigContext || len(cfg.Contexts) != 1 {
		return fmt.Errorf("--kubeconfig %s: the file exists and is not a kubeconfig restartbed wrote; choose another path or remove it", path)
	}
	return nil
}

func printUp(out io.Writer, cluster *envtest.Cluster, kubeconfig string, sc *scenarios.Scenario, crds int, took time.Duration) {
	fmt.Fprintf(out, "restartbed is up (%s): Kubernetes %s at %s\n", took.Round(100*time.Millisecond), cluster.Release.Kubernetes, cluster.Config.Host)
	if cluster.Kubelet != nil {
		fmt.Fprintf(out, "  nodes:         %s\n", strings.Join(cluster.Kubelet.NodeNames(), ", "))
	} else if n := cluster.KubeletProcesses(); n > 0 {
		fmt.Fprintf(out, "  nodes:         %d, run by %d restartbed kubelet processes (shard group %s)\n", cluster.GroupNodes(), n, envtest.KubeletGroup)
		for _, name := range cluster.KubeletProcessNames() {
			fmt.Fprintf(out, "  %-14s restartbed systemctl --control-socket %s list-units   # its nodes' kubelets\n", name+":", cluster.KubeletControlSocket(name))
		}
	} else {
		fmt.Fprintln(out, "  nodes:         none yet: join some with restartbed kubelet --kubeconfig KUBECONFIG (docs/join.md)")
	}
	fmt.Fprintf(out, "  timing:        %s\n", cluster.Timing.Name)
	fmt.Fprintf(out, "  feature gates: %s\n", describeGates(cluster))
	controllers := "kube-controller-manager and kube-scheduler (upstream)"
	if cluster.JobSetRunning() {
		controllers += "; JobSet controller and webhook (restartbed)"
	} else {
		controllers += "; no JobSet CRD or controller (--jobset=false): install and run your own with this kubeconfig"
	}
	fmt.Fprintf(out, "  controllers:   %s\n", controllers)
	if crds > 0 {
		fmt.Fprintf(out, "  CRDs:          %d installed before the controller-manager started\n", crds)
	}
	if sc != nil {
		fmt.Fprintf(out, "  objects:       %d applied from %s (namespace %s)\n", len(sc.Objects), sc.File, sc.Spec.Namespace)
	}
	fmt.Fprintf(out, "\nkubeconfig written to %s; in another shell:\n\n", kubeconfig)
	fmt.Fprintf(out, "  export KUBECONFIG=%s\n", kubeconfig)
	fmt.Fprintln(out, "  kubectl get nodes")
	fmt.Fprintln(out, "  kubectl apply -f config/agent/rbac.yaml   # the in-place restart agent's identity")
	fmt.Fprintln(out, "  kubectl apply -f config/samples/jobset-in-place-restart.yaml")
	fmt.Fprintln(out, "  kubectl get pods -w")
	fmt.Fprintln(out, "  kubectl logs -f POD   # and exec -it, attach, port-forward")
	fmt.Fprintln(out, "\nPress Ctrl-C to stop; the cluster and the kubeconfig are removed.")
}
