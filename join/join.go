// Package join runs restartbed's emulated kubelets against a cluster that restartbed did not
// start — kind, a cloud test cluster, a scale-test control plane, or `restartbed up --nodes 0` —
// as `restartbed kubelet` does (docs/join.md): it learns the release from the apiserver, trusts
// the client CA the apiserver publishes, gives each node's kubelet API a listener and a serving
// certificate of its own on an address the apiserver reaches, and starts a fakekubelet.Kubelet
// that registers its node pools and takes over the existing nodes chosen with KWOK's rules.
//
// It owns that set-up only: the kubelets' behaviour is package fakekubelet's, the control plane
// is someone else's. It never writes to the cluster beyond what the kubelets write.
package join

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/hostproc"
	"github.com/restartbed/restartbed/fakekubelet/images"
	"github.com/restartbed/restartbed/fakekubelet/program"
	"github.com/restartbed/restartbed/timing"
)

// Options configure the joined kubelets.
type Options struct {
	// Config reaches the cluster's apiserver. Required.
	Config *rest.Config
	// KubernetesVersion is the release the kubelets emulate: a supported minor ("1.36") or
	// version. Default: the apiserver's minor, which must be a supported one.
	KubernetesVersion string
	// FeatureGates are the kubelets' gates, merged over the release's defaults and what
	// in-place restart needs (envtest.RequiredFeatureGates).
	FeatureGates map[string]bool
	// Timing is the kubelets' timing profile. Default: timing.Realistic(), as a real node's.
	Timing *timing.Profile
	// Pools are the nodes to register.
	Pools []fakekubelet.NodePool
	// Manage chooses the existing nodes to take over.
	Manage fakekubelet.ManagedNodes
	// Shard shares the nodes taken over, or the group's nodes of Pools, with the other
	// processes of a group (fakekubelet.Options.Shard).
	Shard *fakekubelet.ShardOptions
	// Programs and Builtins as in fakekubelet.Options; AllowHostBinaries lets Programs name host
	// executables (root only).
	Programs          []program.Rule
	Builtins          program.Builtins
	AllowHostBinaries bool
	// Images say which images the registry has and how their pulls go (fakekubelet.Options).
	Images []images.Rule
	// ImageCommands as in fakekubelet.Options: containers without a command run their image's.
	ImageCommands bool
	// NodeIP is the address the nodes advertise as their InternalIP: where the apiserver reaches
	// their kubelet API. Required.
	NodeIP netip.Addr
	// BindAddress is where the kubelet API listeners listen. Default: NodeIP.
	BindAddress netip.Addr
	// NodePort is the port of the first node's kubelet API, the next node's is one more, ...;
	// 0: ports the system picks.
	NodePort uint16
	// ClientCA is PEM CA certificates whose client certificates the kubelet API accepts, beside
	// the client CA the apiserver publishes.
	ClientCA []byte
	// NodeIdentities makes each node's kubelet act as system:node:NAME by impersonation
	// (fakekubelet.Options.NodeIdentities; config/kubelet/node-identities.yaml).
	NodeIdentities bool
	// RuntimeSocketDir: each node serves its container runtime over the CRI on DIR/NODE.sock
	// (fakekubelet.Options.RuntimeSocketDir).
	RuntimeSocketDir string
	// KubeletConfigFile is the KubeletConfiguration file each node's kubelet reads whenever it
	// starts (fakekubelet.Options.KubeletConfigFile).
	KubeletConfigFile string
	// Assets find or build the host-binary sandbox helper (with AllowHostBinaries).
	Assets controlplane.Options
	// Logger receives the kubelets' logs. Default: discarded.
	Logger *logr.Logger
}

// Kubelets are the running joined kubelets.
type Kubelets struct {
	// Kubelet is the emulated kubelet of every node.
	Kubelet *fakekubelet.Kubelet
	// Release is the release they emulate; KubeletVersion the version their nodes report.
	Release        controlplane.Release
	KubeletVersion string
	// FeatureGates are the kubelets' gates, defaults included.
	FeatureGates map[string]bool
	// Timing is their profile.
	Timing timing.Profile

	host   *hostproc.Host
	tmpDir string
}

// Start checks the options, joins the kubelets to the cluster and returns once their nodes are
// registered and their informers synced. Adopted nodes are taken over as they appear.
func Start(ctx context.Context, opts Options) (*Kubelets, error) {
	if opts.Config == nil {
		return nil, errors.New("join: Options.Config is required")
	}
	if !opts.NodeIP.IsValid() || opts.NodeIP.IsUnspecified() {
		return nil, errors.New("join: Options.NodeIP: the address the apiserver reaches the nodes at is required")
	}
	if err := fakekubelet.ValidatePools(opts.Pools); err != nil {
		return nil, fmt.Errorf("join: node pools: %w", err)
	}
	if err := opts.Manage.Validate(); err != nil {
		return nil, err
	}
	if len(opts.Pools) == 0 && opts.Manage.IsZero() {
		return nil, errors.New("join: no nodes: register a pool or choose existing nodes to take over")
	}
	builtins := opts.Builtins
	if _, err := program.NewRegistry(opts.Programs, builtins, opts.AllowHostBinaries); err != nil {
		return nil, err
	}
	profile := timing.Realistic()
	if opts.Timing != nil {
		profile = *opts.Timing
	}
	if err := profile.Validate(); err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	release, kubeletVersion, err := resolveRelease(client, opts.KubernetesVersion)
	if err != nil {
		return nil, err
	}
	gates, err := envtest.ResolveFeatureGates(release, opts.FeatureGates)
	if err != nil {
		return nil, err
	}
	bind := opts.BindAddress
	if !bind.IsValid() {
		bind = opts.NodeIP
	}
	api := &fakekubelet.APIOptions{ClientCAs: opts.ClientCA, Listen: bind, Port: opts.NodePort, Advertise: opts.NodeIP}
	if err := fakekubelet.JoinAPI(ctx, client, api, clock.RealClock{}.Now); err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	k := &Kubelets{Release: release, KubeletVersion: kubeletVersion, FeatureGates: gates, Timing: profile}
	if program.NamesBinaries(opts.Programs) {
		if err := k.startHostBinaries(opts); err != nil {
			return nil, errors.Join(err, k.Stop())
		}
	}
	k.Kubelet, err = fakekubelet.New(fakekubelet.Options{
		Config: opts.Config, Pools: opts.Pools, Manage: opts.Manage, Shard: opts.Shard, FeatureGates: gates, Timing: profile,
		Logger: opts.Logger, Programs: opts.Programs, Images: opts.Images, ImageCommands: opts.ImageCommands, Builtins: builtins, HostBinaries: k.host, NodeIdentities: opts.NodeIdentities,
		KubeletVersion: kubeletVersion, DeclaredFeatures: release.DeclaredFeatures(gates),
		API: api, RuntimeSocketDir: opts.RuntimeSocketDir, KubeletConfigFile: opts.KubeletConfigFile,
	})
	if err != nil {
		return nil, errors.Join(err, k.Stop())
	}
	if err := k.Kubelet.Start(ctx); err != nil {
		return nil, errors.Join(err, k.Stop())
	}
	return k, nil
}

// Stop stops the kubelets and kills every container, leaving their Nodes and pods in the API
// as a power loss would; then it removes the host binaries' sandboxes.
func (k *Kubelets) Stop() error {
	if k.Kubelet != nil {
		k.Kubelet.Stop()
	}
	if k.host != nil {
		k.host.Close()
	}
	if k.tmpDir != "" {
		return os.RemoveAll(k.tmpDir)
	}
	return nil
}

// resolveRelease is the release to emulate and the version the nodes report: the option's, or
// the apiserver's own.
func resolveRelease(client kubernetes.Interface, want string) (controlplane.Release, string, error) {
	if want != "" {
		r, err := controlplane.ResolveRelease(want)
		if err != nil {
			return r, "", fmt.Errorf("join: Options.KubernetesVersion: %w", err)
		}
		return r, r.Kubernetes, nil
	}
	info, err := client.Discovery().ServerVersion()
	if err != nil {
		return controlplane.Release{}, "", fmt.Errorf("join: asking the apiserver its version: %w", err)
	}
	r, reported, err := controlplane.ServerRelease(info.GitVersion)
	if err != nil {
		return r, "", fmt.Errorf("join: %w; say which supported release to emulate with the Kubernetes version option", err)
	}
	return r, reported, nil
}

// startHostBinaries builds the sandbox helper (once, into the cache) and runs host binaries in
// sandboxes under a directory of this process's, their apiserver connections forwarded to the
// cluster's.
func (k *Kubelets) startHostBinaries(opts Options) error {
	if !opts.AllowHostBinaries {
		return errors.New("join: the programs name host binaries, and host binaries are not allowed")
	}
	if err := hostproc.Check(); err != nil {
		return err
	}
	helper, err := controlplane.EnsureTool(opts.Assets, hostproc.HelperName, "the pod sandbox helper", hostproc.HelperSource)
	if err != nil {
		return err
	}
	if k.tmpDir, err = os.MkdirTemp("", "restartbed-kubelet-"); err != nil {
		return fmt.Errorf("join: the sandboxes' directory: %w", err)
	}
	u, err := url.Parse(opts.Config.Host)
	if err != nil {
		return fmt.Errorf("join: the apiserver's address %q: %w", opts.Config.Host, err)
	}
	host := u.Host
	if u.Port() == "" {
		host += ":443"
	}
	k.host, err = hostproc.New(hostproc.Options{Helper: helper, Dir: k.tmpDir, APIServer: host})
	return err
}

// NodeIPFromEnvironment is the address a kubelet in a pod advertises: the POD_IP the downward
// API gives it (config/kubelet's manifests set it), else loopback, for a process beside a
// control plane on the same machine.
func NodeIPFromEnvironment() netip.Addr {
	if ip, err := netip.ParseAddr(os.Getenv("POD_IP")); err == nil {
		return ip
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1})
}
