package envtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
	"github.com/restartbed/restartbed/builtins"
	"github.com/restartbed/restartbed/config/crd"
	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/hostproc"
	"github.com/restartbed/restartbed/fakekubelet/images"
	"github.com/restartbed/restartbed/fakekubelet/program"
	"github.com/restartbed/restartbed/internal/pki"
	"github.com/restartbed/restartbed/timing"
)

// Options configure a Cluster. The zero value is a working cluster of the newest supported
// Kubernetes release in the fast timing profile.
type Options struct {
	// KubernetesVersion is the release the control plane and the emulated kubelets run: a minor
	// ("1.36") or a whole supported version ("1.36.4"). Default: the newest supported release.
	// controlplane.SupportedVersions lists them.
	KubernetesVersion string
	// FeatureGates are merged over RequiredFeatureGates and passed to every component.
	FeatureGates map[string]bool
	// APIServerFlags are extra kube-apiserver flags, name without dashes to values; they replace
	// restartbed's and envtest's value for the same flag.
	APIServerFlags map[string][]string
	// ControllerManagerFlags and SchedulerFlags are extra kube-controller-manager and
	// kube-scheduler flags, in the same form; they replace restartbed's value for the same flag.
	ControllerManagerFlags, SchedulerFlags map[string][]string
	// Timing is the timing profile of every component. Default: timing.Fast().
	Timing *timing.Profile
	// Clock drives the in-process components. Default: the real clock.
	Clock clock.WithTicker
	// CRDDirectoryPaths are directories (or files) of CRD manifests to install, beside
	// restartbed's JobSet CRD when JobSet is on, and CRDs are more, already read. All are
	// installed and established before kube-controller-manager starts, so that its garbage
	// collector and quota controllers know their kinds from the start (a kind they learn of
	// later waits for their next resync, about 30 seconds).
	CRDDirectoryPaths []string
	CRDs              []*apiextensionsv1.CustomResourceDefinition
	// Scheme is the scheme of the returned controller-runtime client. Default: client-go's types
	// plus restartbed's.
	Scheme *runtime.Scheme
	// DisableControllerManager starts no kube-controller-manager. Nothing then creates service
	// accounts, so the apiserver's ServiceAccount admission is off too, as in controller-runtime's
	// envtest.
	DisableControllerManager bool
	// Nodes are the node pools the emulated kubelet registers and serves; with none (and no
	// ExternalNodes), no kubelet and no kube-scheduler run, and pods stay unbound unless the
	// caller binds them.
	Nodes []fakekubelet.NodePool
	// KubeletProcesses runs the Nodes in that many `restartbed kubelet` processes on this
	// machine, the shards of the group KubeletGroup, instead of in this process: the group's
	// nodes are divided among them and their pods share one network (docs/join.md, "Shards"),
	// as a test of the distribution, and to keep the kubelets' CPU apart from this process's.
	// Cluster.Kubelet is then nil. What the in-process kubelet takes as Go values (Programs,
	// Images, Builtins, ...) is refused: the processes take a scenario (KubeletArgs --from).
	// 0: the nodes run in this process.
	KubeletProcesses int
	// KubeletCommand is the restartbed binary, and any arguments before its "kubelet" command,
	// that the KubeletProcesses run. Required with them.
	KubeletCommand []string
	// KubeletArgs are more arguments of the KubeletProcesses' kubelet command: a scenario's
	// --from FILE (whose nodes, programs and timing they then take), --allow-host-binaries,
	// --takeover.
	KubeletArgs []string
	// ExternalNodes is how many nodes other processes will join to the cluster (restartbed
	// kubelet, KWOK; docs/join.md). With any, kube-scheduler runs even without Nodes, the
	// components' client limits are sized for Nodes plus these, and the apiserver reaches
	// kubelets at the addresses their nodes advertise without verifying their serving
	// certificates, as kubeadm's does.
	ExternalNodes int
	// Programs assign in-process programs or scripts to containers (see fakekubelet.Options).
	Programs []program.Rule
	// Images say which images the registry has and how their pulls go (fakekubelet.Options.Images).
	Images []images.Rule
	// ImageCommands: a container without a command runs its image's entrypoint and default
	// command, for the images restartbed knows (fakekubelet.Options.ImageCommands); off, it runs
	// until stopped, as a scenario's containers do.
	ImageCommands bool
	// RuntimeSocketDir: each node serves its container runtime over the CRI on DIR/NODE.sock
	// (fakekubelet.Options.RuntimeSocketDir).
	RuntimeSocketDir string
	// KubeletConfigFile is the KubeletConfiguration file each node's kubelet reads whenever it
	// starts (fakekubelet.Options.KubeletConfigFile).
	KubeletConfigFile string
	// Builtins are the programs a rule's Builtin may name. Default: restartbed's
	// (builtins.Programs(): JobSet's agent as "agent").
	Builtins program.Builtins
	// AllowHostBinaries lets Programs name host executables (Rule.Binary), which run as their
	// containers' processes in namespaces of their own (docs/host-binaries.md). Without it, a
	// rule that names one is refused and nothing starts. It needs root (hostproc.Check).
	AllowHostBinaries bool
	// KueueFailureRecovery runs Kueue's failure-recovery controller (KEP-6757), as a cluster with
	// Kueue's FailureRecoveryPolicy gate on has it; nil leaves it off, as Kueue does by default.
	KueueFailureRecovery *KueueFailureRecovery
	// JobSet installs restartbed's JobSet CRD (config/crd, wire-compatible with JobSet v0.12),
	// runs its JobSet controller (with the InPlaceRestart gate on) and serves its admission
	// webhook to the apiserver, as a cluster with JobSet installed has them. Off, nothing of
	// restartbed's JobSet is installed, so that your own JobSet (upstream's CRD, controller and
	// webhooks, of any version) can be: create its CRD with a client, or name its directory in
	// CRDDirectoryPaths.
	JobSet bool
	// Webhooks are your own admission webhooks: their configurations (or Paths to manifests of
	// them), which Start registers with the apiserver pointing at a loopback port with a
	// certificate of its own; serve them there (Cluster.WebhookServerOptions). Not with JobSet,
	// whose webhook takes that port.
	Webhooks crenvtest.WebhookInstallOptions
	// ControlPlaneOutput receives the logs of etcd, kube-apiserver, kube-controller-manager and
	// kube-scheduler. Default: discarded.
	ControlPlaneOutput io.Writer
	// Logger receives the in-process controllers' logs. Default: discarded.
	Logger *logr.Logger
	// Assets tune how the control-plane binaries are found or built.
	Assets controlplane.Options
	// ExistingCluster reaches the apiserver of a cluster restartbed did not start — kind, a test
	// cluster, `restartbed up --nodes 0` — as its administrator. Start then starts no control
	// plane: it installs the CRDs (and removes them on Stop), runs what is asked of it in
	// process (JobSet, Kueue's controller), and joins the Nodes to the cluster as `restartbed
	// kubelet` does, with node identities, each serving its kubelet API at JoinAddress; Stop
	// deletes the nodes it registered. The release follows the apiserver's version unless
	// KubernetesVersion names one. The options of the control plane's own processes
	// (APIServerFlags, ControllerManagerFlags, SchedulerFlags, DisableControllerManager,
	// ExternalNodes, ControlPlaneOutput, Webhooks) do not apply and are refused (docs/join.md).
	ExistingCluster *rest.Config
	// JoinAddress is where ExistingCluster's apiserver reaches the nodes' kubelet API (their
	// InternalIP). Default: 127.0.0.1, for a cluster on this machine.
	JoinAddress netip.Addr
	// Tenants makes the control plane one that tenants share (Cluster.Tenant), each with a
	// namespace and nodes of its own, as upstream's e2e suites share a cluster among specs: its
	// apiserver admits pods through PodNodeSelector, which keeps each tenant's pods on the
	// tenant's nodes, and kube-scheduler waits for the tenants' nodes to join. Its JobSet
	// controller (JobSet) and storage serve every tenant. Not with Nodes, KubeletProcesses or
	// ExistingCluster: a shared control plane's nodes are its tenants'.
	Tenants bool
}

// Cluster is a running control plane with its in-process controllers.
type Cluster struct {
	// Config reaches the apiserver as the cluster admin (group system:masters).
	Config *rest.Config
	// Clientset is a client-go clientset on Config.
	Clientset kubernetes.Interface
	// Client is a controller-runtime client on Config with Scheme.
	Client client.Client
	// Scheme knows every type Client reads and writes.
	Scheme *runtime.Scheme
	// Release is the Kubernetes release the cluster runs.
	Release controlplane.Release
	// FeatureGates are the gates in force on every component, the release's defaults included.
	FeatureGates map[string]bool
	// Timing is the profile every component runs with.
	Timing timing.Profile
	// Clock is the clock every in-process component reads.
	Clock clock.WithTicker
	// Assets are the binaries the control plane runs.
	Assets controlplane.Assets
	// Kubelet is the emulated kubelet of every node, or nil when Options.Nodes is empty or runs
	// in Options.KubeletProcesses.
	Kubelet *fakekubelet.Kubelet

	env      *crenvtest.Environment
	launcher *launcher
	// componentsMu guards components and downComponents against the faults that kill and start
	// them (KillComponent).
	componentsMu sync.Mutex
	components   []*component // kube-controller-manager and kube-scheduler, in start order
	// downComponents are etcd or kube-apiserver, killed and not started again.
	downComponents map[string]bool
	// controllerManager: kube-controller-manager runs, so namespaces get service accounts.
	controllerManager bool
	jobSet            *runningManager
	// jobSetLogger is the JobSet controller's logger, kept to start it again; nil when the
	// cluster runs no JobSet controller.
	jobSetLogger *logr.Logger
	// userStart starts the caller's controller (RunController); userKill kills the one that
	// runs, nil while it is down.
	userStart StartFunc
	userKill  func() error
	kueue     *runningManager
	storage   *runningManager
	// kubeletAPI is the way from the apiserver to the kubelets' API (with nodes only).
	kubeletAPI *kubeletAPI
	// kubeletProcesses are the shards that run the nodes (Options.KubeletProcesses), and
	// groupNodes their nodes.
	kubeletProcesses []*component
	groupNodes       int
	// joined: the kubelets joined an existing cluster (Options.ExistingCluster); Stop deletes
	// their nodes.
	joined bool
	// hostBinaries runs the programs' host binaries (Options.AllowHostBinaries, with nodes).
	hostBinaries *hostproc.Host
	work         *workDir
	// tenants records the tenants of a shared control plane (Options.Tenants); tenant is a
	// tenant's own record (Cluster.Tenant). Each is nil otherwise.
	tenants *tenancy
	tenant  *tenantOf

	stopOnce sync.Once
	stopErr  error
}

// Start starts a control plane and returns when the apiserver serves, the CRDs it installs are
// established and the controllers' caches have synced. ctx bounds only the start-up; the cluster
// runs until Stop. If the process dies first, the control plane dies with it.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	c, err := newCluster(opts)
	if err != nil {
		return nil, err
	}
	if err := c.start(ctx, opts); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

// builtinPrograms are the programs the rules may name: Options.Builtins, else restartbed's.
func (o *Options) builtinPrograms() program.Builtins {
	if o.Builtins != nil {
		return o.Builtins
	}
	return builtins.Programs()
}

func newCluster(opts Options) (*Cluster, error) {
	release, err := controlplane.ResolveRelease(opts.KubernetesVersion)
	if err != nil {
		return nil, err
	}
	gates, err := ResolveFeatureGates(release, opts.FeatureGates)
	if err != nil {
		return nil, err
	}
	profile := timing.Fast()
	if opts.Timing != nil {
		profile = *opts.Timing
	}
	if err := profile.Validate(); err != nil {
		return nil, err
	}
	if opts.JobSet && ownWebhooks(opts.Webhooks) {
		return nil, errors.New("Options.JobSet and Options.Webhooks: restartbed's JobSet webhook and yours would share envtest's one webhook port; set JobSet false to run your own")
	}
	if opts.ExistingCluster != nil {
		if err := checkExisting(opts); err != nil {
			return nil, err
		}
	}
	if opts.ExternalNodes < 0 {
		return nil, fmt.Errorf("Options.ExternalNodes: must not be negative, got %d", opts.ExternalNodes)
	}
	if err := fakekubelet.ValidatePools(opts.Nodes); err != nil {
		return nil, fmt.Errorf("node pools: %w", err)
	}
	if err := checkKubeletProcesses(opts); err != nil {
		return nil, err
	}
	if opts.Tenants && (len(opts.Nodes) > 0 || opts.KubeletProcesses > 0 || opts.ExistingCluster != nil) {
		return nil, errors.New("Options.Tenants: a shared control plane's nodes are its tenants' (Cluster.Tenant): not with Nodes, KubeletProcesses or ExistingCluster")
	}
	if _, err := program.NewRegistry(opts.Programs, opts.builtinPrograms(), opts.AllowHostBinaries); err != nil {
		return nil, err
	}
	if err := checkBinaries(opts.Programs); err != nil {
		return nil, err
	}
	c := &Cluster{Release: release, FeatureGates: gates, Timing: profile, Clock: opts.Clock, Scheme: opts.Scheme,
		downComponents: map[string]bool{}}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Scheme == nil {
		if c.Scheme, err = NewScheme(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// NewScheme returns client-go's types plus restartbed's.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, jobsetv1alpha2.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("building the scheme: %w", err)
		}
	}
	return s, nil
}

// kubeletOptions are the in-process kubelets' options, on restartbed's control plane or an
// existing cluster's: the cluster's gates, timing and clock, the options' nodes, programs and
// images, each node as its own identity.
func (c *Cluster) kubeletOptions(opts Options, api *fakekubelet.APIOptions, kubeletVersion string) fakekubelet.Options {
	return fakekubelet.Options{API: api,
		Config: c.Config, Pools: opts.Nodes, FeatureGates: c.FeatureGates, Timing: c.Timing, Clock: c.Clock, Logger: opts.Logger,
		Programs: opts.Programs, Images: opts.Images, ImageCommands: opts.ImageCommands, Builtins: opts.builtinPrograms(),
		KubeletVersion: kubeletVersion, DeclaredFeatures: c.Release.DeclaredFeatures(c.FeatureGates),
		NodeIdentities: true, RuntimeSocketDir: opts.RuntimeSocketDir, KubeletConfigFile: opts.KubeletConfigFile,
	}
}

func (c *Cluster) start(ctx context.Context, opts Options) error {
	if opts.ExistingCluster != nil {
		return c.startOnExisting(ctx, opts)
	}
	if opts.Tenants {
		c.tenants = &tenancy{}
		opts.ExternalNodes = max(opts.ExternalNodes, tenantNodes) // the tenants' nodes join
	}
	// The kubelet processes' nodes join as other processes' do.
	processes := opts
	if opts.KubeletProcesses > 0 {
		for _, p := range opts.Nodes {
			opts.ExternalNodes += p.Count
		}
		opts.Nodes = nil
	}
	assets, err := controlplane.Ensure(c.Release, opts.Assets)
	if err != nil {
		return err
	}
	c.Assets = assets
	if c.work, err = newWorkDir(c.Clock); err != nil {
		return err
	}
	paths, err := assets.Guarded(c.work.file("bin"))
	if err != nil {
		return err
	}

	var crds []*apiextensionsv1.CustomResourceDefinition
	if opts.JobSet {
		if crds, err = crd.CRDs(); err != nil {
			return fmt.Errorf("reading restartbed's CRDs: %w", err)
		}
	}
	out := opts.ControlPlaneOutput
	if out == nil {
		out = io.Discard
	}
	apiserver := &crenvtest.APIServer{Path: paths[controlplane.KubeAPIServerBinary], CertDir: c.work.file("apiserver"), Out: out, Err: out}
	args := apiserver.Configure()
	c.apiServerArgs(args, opts.DisableControllerManager)
	clientCA, err := pki.NewCA("restartbed-client-ca", c.Clock.Now)
	if err != nil {
		return err
	}
	apiserver.Authn = &clientCertAuthn{ca: clientCA}
	if len(opts.Nodes) > 0 || opts.ExternalNodes > 0 {
		if c.kubeletAPI, err = c.startKubeletAPI(args, clientCA, len(opts.Nodes) > 0, opts.ExternalNodes > 0); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(opts.APIServerFlags)) {
		args.Set(name, opts.APIServerFlags[name]...)
	}
	c.env = &crenvtest.Environment{
		ControlPlane: crenvtest.ControlPlane{
			APIServer: apiserver,
			Etcd:      &crenvtest.Etcd{Path: paths[controlplane.EtcdBinary], DataDir: c.work.file("etcd"), Out: out, Err: out},
		},
		Scheme:                c.Scheme,
		CRDs:                  append(crds, opts.CRDs...),
		CRDDirectoryPaths:     opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing: true,
		// controller-runtime waits 10 s for the CRDs to be served, which a loaded machine starting
		// several control planes overruns; the wait is as long as the components' start.
		CRDInstallOptions:        crenvtest.CRDInstallOptions{MaxTime: componentStartTimeout},
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	switch {
	case opts.JobSet:
		c.env.WebhookInstallOptions = webhookInstallOptions()
	case ownWebhooks(opts.Webhooks):
		c.env.WebhookInstallOptions = opts.Webhooks
		if c.env.WebhookInstallOptions.LocalServingHost == "" {
			c.env.WebhookInstallOptions.LocalServingHost = "127.0.0.1"
		}
	}
	for _, dir := range []string{apiserver.CertDir, c.env.ControlPlane.Etcd.DataDir} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return fmt.Errorf("creating the control plane's directory: %w", err)
		}
	}
	serviceCIDR := defaultServiceCIDR
	if v := opts.APIServerFlags["service-cluster-ip-range"]; len(v) > 0 {
		serviceCIDR = v[0]
	}
	if err := c.writeAPIServerCerts(apiserver, serviceCIDR); err != nil {
		return err
	}
	c.launcher = newLauncher()
	if c.Config, err = c.launcher.start(c.env); err != nil {
		return fmt.Errorf("starting kube-apiserver %s and etcd %s from %s (%s): %w",
			c.Release.Kubernetes, c.Release.Etcd, assets.Dir, assets.Source, err)
	}
	if err := c.keepWebhookCerts(); err != nil {
		return err
	}
	// Tests and the emulated kubelet write in bursts; client-side throttling would hide the
	// apiserver's real limits.
	c.Config.QPS, c.Config.Burst = -1, 0
	if c.Clientset, err = kubernetes.NewForConfig(c.Config); err != nil {
		return fmt.Errorf("building the clientset: %w", err)
	}
	if c.Client, err = client.New(c.Config, client.Options{Scheme: c.Scheme}); err != nil {
		return fmt.Errorf("building the controller-runtime client: %w", err)
	}
	if err := c.startComponents(opts, paths, out); err != nil {
		return err
	}
	// Without a controller-manager no volume would be bound to a claim.
	if !opts.DisableControllerManager {
		if err := c.startStorage(ctx, opts.Logger); err != nil {
			return err
		}
	}

	if err := c.startInProcess(ctx, opts); err != nil {
		return err
	}
	if len(opts.Nodes) > 0 {
		if program.NamesBinaries(opts.Programs) {
			if c.hostBinaries, err = c.startHostBinaries(opts.Assets); err != nil {
				return err
			}
		}
		kopts := c.kubeletOptions(opts, c.kubeletAPI.kubeletOptions(), c.Release.Kubernetes)
		kopts.HostBinaries = c.hostBinaries
		c.Kubelet, err = fakekubelet.New(kopts)
		if err != nil {
			return err
		}
		if err := c.Kubelet.Start(ctx); err != nil {
			return err
		}
		c.kubeletAPI.connectTo(c.Kubelet.Dial)
	}
	if processes.KubeletProcesses > 0 {
		if err := c.startKubeletProcesses(ctx, processes, out); err != nil {
			return err
		}
	}
	return c.waitComponents(ctx)
}

// startInProcess starts the controllers that run in this process: restartbed's JobSet and
// Kueue's failure recovery, when asked.
func (c *Cluster) startInProcess(ctx context.Context, opts Options) error {
	if opts.JobSet {
		logger := logr.Discard()
		if opts.Logger != nil {
			logger = *opts.Logger
		}
		c.jobSetLogger = &logger
		if err := c.startJobSet(ctx, logger); err != nil {
			return err
		}
	}
	if opts.KueueFailureRecovery != nil {
		if err := c.startKueue(ctx, *opts.KueueFailureRecovery, opts.Logger); err != nil {
			return err
		}
	}
	return nil
}

// WebhookServerOptions says where the apiserver calls the webhooks of Options.Webhooks: give it
// to your webhook server (controller-runtime's webhook.NewServer, or ctrl.Options.WebhookServer).
func (c *Cluster) WebhookServerOptions() webhook.Options {
	wio := c.env.WebhookInstallOptions
	return webhook.Options{Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir}
}

// keepWebhookCerts moves the webhooks' serving certificates, which controller-runtime writes to
// a temporary directory of their own, into the cluster's directory: a run killed before Stop
// then leaves nothing the next start does not sweep.
func (c *Cluster) keepWebhookCerts() error {
	wio := &c.env.WebhookInstallOptions
	if wio.LocalServingCertDir == "" {
		return nil
	}
	dir := c.work.file("webhook-certs")
	if err := os.Rename(wio.LocalServingCertDir, dir); err != nil {
		return fmt.Errorf("moving the webhooks' serving certificates into the cluster's directory: %w", err)
	}
	wio.LocalServingCertDir = dir
	return nil
}

// ownWebhooks reports whether the options name any webhook.
func ownWebhooks(w crenvtest.WebhookInstallOptions) bool {
	return len(w.Paths) > 0 || len(w.MutatingWebhooks) > 0 || len(w.ValidatingWebhooks) > 0
}

// Dir is the cluster's directory: etcd's data, the apiserver's certificates, the components'
// kubeconfig and configuration. Stop removes it; if the process dies first, the next cluster to
// start in any process removes it.
func (c *Cluster) Dir() string {
	if c.work == nil {
		return "" // an existing cluster's: restartbed keeps no files for it
	}
	return c.work.path
}

// JobSetRunning reports whether restartbed's JobSet controller and webhook run (Options.JobSet,
// and not killed by KillComponent).
func (c *Cluster) JobSetRunning() bool {
	c.componentsMu.Lock()
	defer c.componentsMu.Unlock()
	return c.jobSet != nil
}

// Stop stops the controllers, then the apiserver and etcd, and removes their files. It is safe
// to call more than once; later calls return the first result.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		if c.tenant != nil && c.Clientset != nil {
			// Before the kubelet stops: nothing of the tenant's should be left running.
			errs = append(errs, c.deleteTenantNamespaces(context.Background()))
		}
		c.componentsMu.Lock()
		if c.userKill != nil { // the caller's controller first: it acts on all the rest
			errs = append(errs, c.userKill())
			c.userKill = nil
		}
		c.componentsMu.Unlock()
		if c.Kubelet != nil {
			c.Kubelet.Stop()
		}
		errs = append(errs, c.stopKubeletProcesses())
		if c.hostBinaries != nil {
			c.hostBinaries.Close()
		}
		errs = append(errs, c.kubeletAPI.stop())
		c.componentsMu.Lock()
		for _, comp := range slices.Backward(c.components) {
			errs = append(errs, comp.stop())
		}
		if c.jobSet != nil { // nil while KillComponent has it down
			errs = append(errs, c.jobSet.stop())
		}
		c.componentsMu.Unlock()
		if c.kueue != nil {
			errs = append(errs, c.kueue.stop())
		}
		if c.storage != nil {
			errs = append(errs, c.storage.stop())
		}
		errs = append(errs, c.deleteJoinedNodes())
		if c.tenant != nil && c.Clientset != nil {
			if c.Kubelet != nil {
				errs = append(errs, c.deleteTenantLeases(context.Background(), c.Kubelet.NodeNames()))
			}
			errs = append(errs, c.waitTenantNamespaces(context.Background()))
		}
		switch {
		case c.launcher != nil:
			errs = append(errs, c.launcher.stop(c.env))
		case c.env != nil:
			errs = append(errs, c.env.Stop()) // an existing cluster's: the CRDs go, the cluster stays
		}
		if c.env != nil {
			// The webhooks' serving certificates, in a temporary directory of their own. Stop
			// removes it only when it got that far: it returns early if the CRDs will not go.
			errs = append(errs, c.env.WebhookInstallOptions.Cleanup())
		}
		if c.work != nil {
			errs = append(errs, c.work.remove())
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}
