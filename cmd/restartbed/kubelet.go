package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/restartbed/restartbed/agent"
	"github.com/restartbed/restartbed/builtins"
	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/program"
	"github.com/restartbed/restartbed/join"
	"github.com/restartbed/restartbed/scenarios"
	"github.com/restartbed/restartbed/timing"
)

// kubeletFlags are the settings of `restartbed kubelet`.
type kubeletFlags struct {
	kubeconfig string
	version    string
	timing     string
	// heartbeatScale stretches the timing profile's heartbeats (timing.WithHeartbeatScale); 0
	// and 1 leave them.
	heartbeatScale int
	featureGates   map[string]bool
	nodes          int
	pool           string
	labels         map[string]string
	capacity       map[string]string
	taints         []string
	// KWOK's flags.
	manageAll         bool
	manageSingle      string
	manageAnnotations string
	manageLabels      string
	nodeIP            string
	nodePort          int
	bindAddress       string
	clientCAFile      string
	from              string
	allowBinaries     bool
	nodeIdentities    bool
	imageCommands     bool
	// shardGroup, shardName and takeover make the process a shard (fakekubelet.ShardOptions).
	shardGroup string
	shardName  string
	takeover   bool
	relayPort  int
	// control is the host's side of the nodes.
	control nodeControlFlags
	set     func(name string) bool
}

func newKubeletCommand() *cobra.Command {
	f := kubeletFlags{featureGates: map[string]bool{}, labels: map[string]string{}, capacity: map[string]string{}}
	cmd := &cobra.Command{
		Use:   "kubelet",
		Short: "Run emulated kubelets against an existing cluster's apiserver, registering nodes or taking over KWOK's",
		Long: `kubelet runs only restartbed's emulated kubelets, against the apiserver of --kubeconfig (or, in a
pod, the in-cluster configuration): kind, a test cluster, a scale-test control plane, or
"restartbed up --nodes 0". Its nodes run pods as the in-process kubelets of restartbed up do —
programs and the shell, probes, restart rules, RestartAllContainers, crash-loop backoff,
volumes, tokens, logs, the pod network and DNS, images that pull or fail to, and the entrypoint
and default command of the images restartbed knows (--image-commands, docs/images.md) — and
serve the kubelet API on --node-ip, so that kubectl logs, exec, attach and port-forward reach
them through the cluster's apiserver.

Nodes: --nodes N registers N nodes named POOL-0, POOL-1, ... (--pool, --node-labels, --capacity,
--register-with-taints); and, with KWOK's flags, it takes over existing Node objects:
--manage-all-nodes, --manage-single-node NAME, or --manage-nodes-with-annotation-selector and/or
--manage-nodes-with-label-selector (KWOK's convention: kwok.x-k8s.io/node=fake). A node taken
over keeps its labels, taints, capacity and allocatable; its addresses, kubelet endpoint, node
info, conditions and Lease become this process's. Nodes it does not own are never touched.

Many processes share the nodes taken over: each with --shard-group NAME (and a --shard-name of
its own, stable across its restarts: default the host's name, as a StatefulSet pod's) holds a
Lease in kube-node-lease and runs the nodes the group's rule gives it; a shard that stops keeps
its nodes, which go NotReady, unless the others run with --takeover and adopt them once its
Lease expires. With --nodes instead of --manage-..., the nodes POOL-0 ... are the group's: each
shard creates those that do not exist yet and the group shares them. The shards' pods are on one
network: each shard relays the others' connections to its pods on --relay-port, at
--bind-address.

Its nodes write as this process's identity (config/kubelet/rbac.yaml), or with --node-identities
each as system:node:NAME, as the cluster's Node authorizer and NodeRestriction expect of kubelets
(config/kubelet/node-identities.yaml).

The release follows the apiserver's version unless --kubernetes-version says otherwise. On
SIGINT or SIGTERM it stops and kills every container, leaving its Nodes and pods in the API as a
node losing power would. See docs/join.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.set = func(name string) bool { return cmd.Flags().Changed(name) }
			return runKubelet(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to join (default: $KUBECONFIG, ~/.kube/config, or the in-cluster configuration in a pod)")
	fs.StringVar(&f.version, "kubernetes-version", "", fmt.Sprintf(
		"release the kubelets emulate: a minor (1.36) or its supported version; supported: %s (default: the apiserver's)", controlplane.SupportedVersions()))
	fs.StringVar(&f.timing, "timing", timing.Realistic().Name,
		fmt.Sprintf("timing profile of the kubelets: %s", strings.Join(timing.Names(), " or ")))
	fs.IntVar(&f.heartbeatScale, "heartbeat-scale", 1,
		"stretch the timing profile's heartbeats (Lease renewal, Lease duration, status reports) this many times, "+
			"as restartbed bench does to fit many nodes on a small control plane; its node lifecycle controller's grace periods must be stretched alike")
	fs.Var(cliflag.NewMapStringBool(&f.featureGates), "feature-gates",
		"the kubelets' feature gates, merged over the release's defaults and what in-place restart needs: A=true,B=false")
	fs.IntVar(&f.nodes, "nodes", 0, "nodes to register, named POOL-0, POOL-1, ...")
	fs.StringVar(&f.pool, "pool", "node", "name of the registered nodes' pool: their names' prefix and their restartbed.dev/pool label")
	fs.Var(cliflag.NewMapStringString(&f.labels), "node-labels", "labels of the registered nodes: key=value,...")
	fs.Var(cliflag.NewMapStringString(&f.capacity), "capacity",
		"capacity (and allocatable) of the registered nodes, over the defaults cpu=8,memory=32Gi,pods=110,google.com/tpu=4: name=quantity,...")
	fs.StringSliceVar(&f.taints, "register-with-taints", nil, "taints of the registered nodes: key[=value]:Effect,...")
	fs.BoolVar(&f.manageAll, "manage-all-nodes", false, "take over every node of the cluster (KWOK's flag); excludes the other --manage flags")
	fs.StringVar(&f.manageSingle, "manage-single-node", "", "take over the node of this name (KWOK's flag); excludes the other --manage flags")
	fs.StringVar(&f.manageAnnotations, "manage-nodes-with-annotation-selector", "",
		"take over the nodes whose annotations match this selector, e.g. kwok.x-k8s.io/node=fake (KWOK's flag)")
	fs.StringVar(&f.manageLabels, "manage-nodes-with-label-selector", "", "take over the nodes whose labels match this selector (KWOK's flag)")
	fs.StringVar(&f.nodeIP, "node-ip", "", "address the nodes advertise (InternalIP), where the apiserver reaches their kubelet API (default: $POD_IP, else 127.0.0.1)")
	fs.IntVar(&f.nodePort, "node-port", 0, "port of the first node's kubelet API, the next node's one more, ... (default: ports the system picks)")
	fs.StringVar(&f.bindAddress, "bind-address", "", "address the kubelet API listens on (default: --node-ip)")
	fs.StringVar(&f.clientCAFile, "client-ca-file", "",
		"CA certificates (PEM) whose client certificates the kubelet API accepts, beside the apiserver's published client CA")
	fs.BoolVar(&f.nodeIdentities, "node-identities", false,
		"each node's kubelet acts as system:node:NAME (impersonated), limited by the cluster's Node authorizer and NodeRestriction; needs config/kubelet/node-identities.yaml")
	fs.BoolVar(&f.imageCommands, "image-commands", true,
		"a container without a command runs its image's entrypoint and default command when restartbed knows the image (docs/images.md); false: it runs until stopped")
	fs.StringVar(&f.from, "from", "", "a scenario file whose nodes, timing, feature gates, programs and images to use (its objects and steps are not)")
	fs.StringVar(&f.shardGroup, "shard-group", "",
		"share the nodes taken over (--manage-...) or the group's nodes (--nodes) with the other processes of this group: each runs the nodes the group's rule gives it (docs/join.md)")
	fs.StringVar(&f.shardName, "shard-name", "", "this process's name in its --shard-group, stable across its restarts (default: the host's name)")
	fs.BoolVar(&f.takeover, "takeover", false,
		"with --shard-group: adopt the nodes of a shard whose Lease expired, until it comes back; without, they stay its and go NotReady")
	fs.IntVar(&f.relayPort, "relay-port", 0,
		"with --shard-group: port at --bind-address where the other shards' pods reach this shard's; it publishes --node-ip:PORT on its Lease (default: a port the system picks)")
	addNodeControlFlags(fs, &f.control, false)
	fs.BoolVar(&f.allowBinaries, "allow-host-binaries", false,
		"let the --from scenario's programs run host executables as containers' processes (needs root)")
	return cmd
}

// joinOptions turns the flags into the joined kubelets' options, every problem reported at once.
func joinOptions(f kubeletFlags) (join.Options, error) {
	opts := join.Options{KubernetesVersion: f.version, Programs: []program.Rule{
		{Container: agent.ContainerName, Builtin: builtins.Agent},
		{Image: "*" + agent.ContainerName + "*", Builtin: builtins.Agent},
	}, Builtins: builtins.Programs(), AllowHostBinaries: f.allowBinaries, NodeIdentities: f.nodeIdentities}
	var errs []error
	errs = append(errs, f.control.check(0))
	opts.RuntimeSocketDir, opts.KubeletConfigFile = f.control.runtimeDir, f.control.kubeletConfig
	if f.from != "" {
		sc, err := scenarios.Load(f.from)
		if err != nil {
			return opts, err
		}
		if problems := sc.HostBinaryProblems(); len(problems) > 0 && !f.allowBinaries {
			return opts, &scenarios.InvalidError{Problems: problems}
		}
		co, err := sc.ClusterOptions()
		if err != nil {
			return opts, err
		}
		opts.Pools, opts.Programs, opts.Images, opts.Timing, opts.FeatureGates = co.Nodes, co.Programs, co.Images, co.Timing, co.FeatureGates
		opts.ImageCommands = co.ImageCommands
		if !f.set("kubernetes-version") {
			opts.KubernetesVersion = co.KubernetesVersion
		}
		if co.Builtins != nil {
			opts.Builtins = co.Builtins
		}
	}
	if f.from == "" || f.set("image-commands") {
		opts.ImageCommands = f.imageCommands
	}
	if f.from == "" || f.set("timing") {
		profile, err := timing.ByName(f.timing)
		if err != nil {
			errs = append(errs, fmt.Errorf("--timing: %w", err))
		}
		opts.Timing = &profile
	}
	if f.heartbeatScale < 0 {
		errs = append(errs, fmt.Errorf("--heartbeat-scale must not be negative, got %d", f.heartbeatScale))
	} else if opts.Timing != nil && f.heartbeatScale > 1 {
		profile := opts.Timing.WithHeartbeatScale(f.heartbeatScale)
		opts.Timing = &profile
	}
	if len(f.featureGates) > 0 {
		gates := maps.Clone(opts.FeatureGates)
		if gates == nil {
			gates = map[string]bool{}
		}
		maps.Copy(gates, f.featureGates)
		opts.FeatureGates = gates
	}
	if f.version != "" {
		if _, err := controlplane.ResolveRelease(f.version); err != nil {
			errs = append(errs, fmt.Errorf("--kubernetes-version: %w", err))
		}
	}
	if f.nodes < 0 {
		errs = append(errs, fmt.Errorf("--nodes must not be negative, got %d", f.nodes))
	}
	pool, err := poolFromFlags(f)
	errs = append(errs, err)
	if f.nodes > 0 {
		opts.Pools = append(opts.Pools, pool)
	} else if len(f.capacity) > 0 || len(f.labels) > 0 || len(f.taints) > 0 || f.set("pool") {
		errs = append(errs, errors.New("--pool, --node-labels, --capacity and --register-with-taints describe the nodes --nodes registers; give --nodes"))
	}
	opts.Manage, err = manageFromFlags(f)
	errs = append(errs, err)
	opts.Shard, err = shardFromFlags(f)
	errs = append(errs, err)
	if opts.Shard != nil && (len(opts.Pools) > 0) == !opts.Manage.IsZero() {
		errs = append(errs, errors.New("--shard-group: a shard runs its share of the group's nodes (--nodes or --from's, created by the first shard that starts) or of the nodes it takes over (--manage-...): give one of them"))
	}
	ip := join.NodeIPFromEnvironment()
	if f.nodeIP != "" {
		if ip, err = netip.ParseAddr(f.nodeIP); err != nil {
			errs = append(errs, fmt.Errorf("--node-ip %q: not an IP address", f.nodeIP))
		} else if ip.IsUnspecified() {
			errs = append(errs, fmt.Errorf("--node-ip %s: say the address the apiserver reaches the nodes at; listen on every address with --bind-address", ip))
		}
	}
	opts.NodeIP = ip
	if f.bindAddress != "" {
		if opts.BindAddress, err = netip.ParseAddr(f.bindAddress); err != nil {
			errs = append(errs, fmt.Errorf("--bind-address %q: not an IP address", f.bindAddress))
		}
	}
	if f.nodePort < 0 || f.nodePort > 65535 {
		errs = append(errs, fmt.Errorf("--node-port must be a port number, got %d", f.nodePort))
	}
	opts.NodePort = uint16(min(max(f.nodePort, 0), 65535))
	if len(opts.Pools) == 0 && opts.Manage.IsZero() && errors.Join(errs...) == nil {
		errs = append(errs, errors.New("no nodes: give --nodes N to register nodes, or a --manage flag to take over existing ones (see --help)"))
	}
	return opts, errors.Join(errs...)
}

// poolFromFlags is the pool --nodes registers.
func poolFromFlags(f kubeletFlags) (fakekubelet.NodePool, error) {
	pool := fakekubelet.NodePool{Name: f.pool, Count: max(f.nodes, 0), Labels: f.labels, Capacity: corev1.ResourceList{}}
	var errs []error
	for name, v := range f.capacity {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("--capacity %s=%s: %w", name, v, err))
			continue
		}
		pool.Capacity[corev1.ResourceName(name)] = q
	}
	for k, v := range f.labels {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Errorf("--node-labels: key %q: %s", k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, fmt.Errorf("--node-labels: value %q of %s: %s", v, k, msg))
		}
	}
	for _, s := range f.taints {
		t, err := parseTaint(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("--register-with-taints %q: %w", s, err))
			continue
		}
		pool.Taints = append(pool.Taints, t)
	}
	if err := fakekubelet.ValidatePools([]fakekubelet.NodePool{pool}); err != nil {
		errs = append(errs, fmt.Errorf("--pool/--nodes: %w", err))
	}
	return pool, errors.Join(errs...)
}

// parseTaint reads key[=value]:Effect, the kubelet's --register-with-taints form.
func parseTaint(s string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return corev1.Taint{}, errors.New("want key[=value]:Effect")
	}
	key, value, _ := strings.Cut(kv, "=")
	t := corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)}
	var errs []error
	for _, msg := range validation.IsQualifiedName(key) {
		errs = append(errs, fmt.Errorf("key %q: %s", key, msg))
	}
	for _, msg := range validation.IsValidLabelValue(value) {
		errs = append(errs, fmt.Errorf("value %q: %s", value, msg))
	}
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		errs = append(errs, fmt.Errorf("effect %q: want NoSchedule, PreferNoSchedule or NoExecute", effect))
	}
	return t, errors.Join(errs...)
}

// manageFromFlags reads KWOK's node-selection flags.
func manageFromFlags(f kubeletFlags) (fakekubelet.ManagedNodes, error) {
	m := fakekubelet.ManagedNodes{All: f.manageAll, Name: f.manageSingle}
	var errs []error
	var err error
	if f.manageAnnotations != "" {
		if m.Annotations, err = labels.Parse(f.manageAnnotations); err != nil {
			errs = append(errs, fmt.Errorf("--manage-nodes-with-annotation-selector: %w", err))
		}
	}
	if f.manageLabels != "" {
		if m.Labels, err = labels.Parse(f.manageLabels); err != nil {
			errs = append(errs, fmt.Errorf("--manage-nodes-with-label-selector: %w", err))
		}
	}
	if m.Validate() != nil {
		errs = append(errs, errors.New("--manage-all-nodes, --manage-single-node and the --manage-nodes-with-* selectors exclude each other"))
	}
	return m, errors.Join(errs...)
}

func runKubelet(ctx context.Context, out, progress io.Writer, f kubeletFlags) error {
	opts, err := joinOptions(f)
	if err != nil {
		return invalidOptions(progress, err, f.from)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	if opts.Config, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig(); err != nil {
		return exitError{code: exitInvalid, err: fmt.Errorf("--kubeconfig: %w", err)}
	}
	opts.Assets = controlplane.Options{Progress: progress}
	opts.Logger = &logger
	start := time.Now()
	k, err := join.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(out, "stopping the kubelets")
		if err := k.Stop(); err != nil {
			fmt.Fprintln(progress, "restartbed: stopping the kubelets:", err)
		}
	}()
	fmt.Fprintf(out, "restartbed kubelet is up (%s): Kubernetes %s nodes against %s\n",
		time.Since(start).Round(100*time.Millisecond), k.KubeletVersion, opts.Config.Host)
	if names := k.Kubelet.NodeNames(); len(names) > 0 {
		fmt.Fprintf(out, "  registered:  %s\n", summarize(names))
	}
	if !opts.Manage.IsZero() {
		fmt.Fprintf(out, "  taking over: %s\n", describeManage(opts.Manage))
	}
	if sh := opts.Shard; sh != nil {
		fmt.Fprintf(out, "  shard:       %s of group %s, relay at %s (docs/join.md)\n", sh.Identity, sh.Group, k.Kubelet.Relay())
	}
	fmt.Fprintf(out, "  kubelet API: %s, a port per node\n", opts.NodeIP)
	identity := "this process's"
	if opts.NodeIdentities {
		identity = "system:node:NAME for each node"
	}
	fmt.Fprintf(out, "  identity:    %s\n", identity)
	fmt.Fprintf(out, "  timing:      %s\n", k.Timing.Name)
	control, err := serveNodeControl(ctx, k.Kubelet, f.control)
	if err != nil {
		return err
	}
	control.print(out)
	fmt.Fprintln(out, "\nPress Ctrl-C to stop; the nodes and their pods stay in the API, as after a power loss.")
	<-ctx.Done()
	fmt.Fprintln(out, "interrupted")
	return nil
}

// summarize lists names, shortened past a few.
func summarize(names []string) string {
	const shown = 4
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, ... %s (%d nodes)", strings.Join(names[:shown-1], ", "), names[len(names)-1], len(names))
}

// describeManage says which existing nodes are taken over.
func describeManage(m fakekubelet.ManagedNodes) string {
	switch {
	case m.All:
		return "every node"
	case m.Name != "":
		return "node " + m.Name
	}
	var parts []string
	if m.Annotations != nil {
		parts = append(parts, "annotations "+m.Annotations.String())
	}
	if m.Labels != nil {
		parts = append(parts, "labels "+m.Labels.String())
	}
	return "nodes with " + strings.Join(parts, " and ")
}

// shardFromFlags reads --shard-group, --shard-name, --takeover and --relay-port.
func shardFromFlags(f kubeletFlags) (*fakekubelet.ShardOptions, error) {
	if f.shardGroup == "" {
		if f.shardName != "" || f.takeover || f.set("relay-port") {
			return nil, errors.New("--shard-name, --takeover and --relay-port are a shard's: give --shard-group")
		}
		return nil, nil
	}
	if f.relayPort < 0 || f.relayPort > 65535 {
		return nil, fmt.Errorf("--relay-port must be a port number, got %d", f.relayPort)
	}
	name := f.shardName
	if name == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("--shard-name: the host's name: %w", err)
		}
		name = host
	}
	for flag, v := range map[string]string{"--shard-group": f.shardGroup, "--shard-name": name} {
		if msgs := validation.IsDNS1123Label(v); len(msgs) > 0 {
			return nil, fmt.Errorf("%s %q: %s", flag, v, strings.Join(msgs, "; "))
		}
	}
	// The relay listens where the kubelet API does (--bind-address) and is published at --node-ip.
	return &fakekubelet.ShardOptions{Group: f.shardGroup, Identity: name, Takeover: f.takeover,
		Relay: netip.AddrPortFrom(netip.Addr{}, uint16(f.relayPort))}, nil
}
