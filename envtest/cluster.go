package envtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	// The in-place-restart agent registers itself as the fake kubelet's builtin program "agent".
	_ "github.com/restartbed/restartbed/agent"
	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
	"github.com/restartbed/restartbed/config/crd"
	"github.com/restartbed/restartbed/envtest/controllermanager"
	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/program"
	"github.com/restartbed/restartbed/timing"
)

// Options configure a Cluster. The zero value is a working cluster in the fast timing profile.
type Options struct {
	// FeatureGates are merged over DefaultFeatureGates and passed to the apiserver.
	FeatureGates map[string]bool
	// APIServerFlags are extra kube-apiserver flags, name without dashes to values; they replace
	// restartbed's and envtest's value for the same flag.
	APIServerFlags map[string][]string
	// Timing is the timing profile of every component. Default: timing.Fast().
	Timing *timing.Profile
	// Clock drives the in-process components. Default: the real clock.
	Clock clock.WithTicker
	// CRDDirectoryPaths are extra directories of CRD manifests to install with restartbed's
	// (config/crd, embedded).
	CRDDirectoryPaths []string
	// Scheme is the scheme of the returned controller-runtime client. Default: client-go's types
	// plus restartbed's.
	Scheme *runtime.Scheme
	// DisableControllerManager starts the control plane without the in-process controllers.
	DisableControllerManager bool
	// Nodes are the node pools the emulated kubelet registers and serves; with none, no kubelet
	// (and no scheduler) runs, and pods stay unbound unless the caller binds them.
	Nodes []fakekubelet.NodePool
	// Programs assign in-process programs or scripts to containers (see fakekubelet.Options).
	Programs []program.Rule
	// KueueFailureRecovery runs Kueue's failure-recovery controller (KEP-6757), as a cluster with
	// Kueue's FailureRecoveryPolicy gate on has it; nil leaves it off, as Kueue does by default.
	KueueFailureRecovery *KueueFailureRecovery
	// JobSet runs restartbed's JobSet controller (with the InPlaceRestart gate on) and serves
	// its admission webhook to the apiserver, as a cluster with JobSet installed has them.
	JobSet bool
	// ControlPlaneOutput receives the apiserver's and etcd's logs. Default: discarded.
	ControlPlaneOutput io.Writer
	// Logger receives the in-process controllers' logs. Default: discarded.
	Logger *logr.Logger
	// Assets tune how the control-plane binaries are found or built.
	Assets controlplane.Options
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
	// FeatureGates are the gates in force, defaults included.
	FeatureGates map[string]bool
	// Timing is the profile every component runs with.
	Timing timing.Profile
	// Clock is the clock every in-process component reads.
	Clock clock.WithTicker
	// Assets are the binaries the control plane runs.
	Assets controlplane.Assets
	// Kubelet is the emulated kubelet of every node, or nil when Options.Nodes is empty.
	Kubelet *fakekubelet.Kubelet

	env      *crenvtest.Environment
	launcher *launcher
	manager  *controllermanager.Manager
	jobSet   *runningManager
	kueue    *runningManager
	tempDir  string

	stopOnce sync.Once
	stopErr  error
}

// Start starts a control plane and returns when the apiserver serves, restartbed's CRDs are
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

func newCluster(opts Options) (*Cluster, error) {
	gates, err := ResolveFeatureGates(opts.FeatureGates)
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
	if err := fakekubelet.ValidatePools(opts.Nodes); err != nil {
		return nil, fmt.Errorf("node pools: %w", err)
	}
	if _, err := program.NewRegistry(opts.Programs); err != nil {
		return nil, err
	}
	c := &Cluster{FeatureGates: gates, Timing: profile, Clock: opts.Clock, Scheme: opts.Scheme}
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

func (c *Cluster) start(ctx context.Context, opts Options) error {
	assets, err := controlplane.Ensure(opts.Assets)
	if err != nil {
		return err
	}
	c.Assets = assets
	if c.tempDir, err = os.MkdirTemp("", "restartbed-controlplane-"); err != nil {
		return fmt.Errorf("creating the control plane's directory: %w", err)
	}
	apiserverPath, etcdPath, err := assets.Guarded(c.tempDir)
	if err != nil {
		return err
	}

	crds, err := crd.CRDs()
	if err != nil {
		return fmt.Errorf("reading restartbed's CRDs: %w", err)
	}
	out := opts.ControlPlaneOutput
	if out == nil {
		out = io.Discard
	}
	apiserver := &crenvtest.APIServer{Path: apiserverPath, Out: out, Err: out}
	args := apiserver.Configure()
	args.Set("feature-gates", gatesFlag(c.FeatureGates))
	// The DefaultTolerationSeconds admission plugin gives every pod these tolerations of the
	// not-ready and unreachable NoExecute taints, so taint eviction runs on the profile's clock.
	tolerate := strconv.Itoa(int(c.Timing.DefaultTolerationSeconds / time.Second))
	args.Set("default-not-ready-toleration-seconds", tolerate)
	args.Set("default-unreachable-toleration-seconds", tolerate)
	for _, name := range slices.Sorted(maps.Keys(opts.APIServerFlags)) {
		args.Set(name, opts.APIServerFlags[name]...)
	}
	c.env = &crenvtest.Environment{
		ControlPlane: crenvtest.ControlPlane{
			APIServer: apiserver,
			Etcd:      &crenvtest.Etcd{Path: etcdPath, Out: out, Err: out},
		},
		Scheme:                   c.Scheme,
		CRDs:                     crds,
		CRDDirectoryPaths:        opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	if opts.JobSet {
		c.env.WebhookInstallOptions = webhookInstallOptions()
	}
	c.launcher = newLauncher()
	if c.Config, err = c.launcher.start(c.env); err != nil {
		return fmt.Errorf("starting kube-apiserver %s and etcd %s from %s (%s): %w",
			controlplane.CurrentVersions().Kubernetes, controlplane.CurrentVersions().Etcd, assets.Dir, assets.Source, err)
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

	if !opts.DisableControllerManager {
		c.manager, err = controllermanager.New(controllermanager.Options{
			Config: c.Config, Timing: c.Timing, Clock: c.Clock, Logger: opts.Logger,
		})
		if err != nil {
			return err
		}
		if err := c.manager.Start(ctx); err != nil {
			return err
		}
	}
	if opts.JobSet {
		logger := logr.Discard()
		if opts.Logger != nil {
			logger = *opts.Logger
		}
		if err := c.startJobSet(ctx, logger); err != nil {
			return err
		}
	}
	if opts.KueueFailureRecovery != nil {
		if err := c.startKueue(ctx, *opts.KueueFailureRecovery, opts.Logger); err != nil {
			return err
		}
	}
	if len(opts.Nodes) > 0 {
		c.Kubelet, err = fakekubelet.New(fakekubelet.Options{
			Config: c.Config, Pools: opts.Nodes, FeatureGates: c.FeatureGates, Timing: c.Timing, Clock: c.Clock, Logger: opts.Logger,
			Programs: opts.Programs,
		})
		if err != nil {
			return err
		}
		if err := c.Kubelet.Start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Stop stops the controllers, then the apiserver and etcd, and removes their files. It is safe
// to call more than once; later calls return the first result.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		if c.Kubelet != nil {
			c.Kubelet.Stop()
		}
		if c.manager != nil {
			c.manager.Stop()
		}
		var errs []error
		if c.jobSet != nil {
			errs = append(errs, c.jobSet.stop())
		}
		if c.kueue != nil {
			errs = append(errs, c.kueue.stop())
		}
		if c.launcher != nil {
			errs = append(errs, c.launcher.stop(c.env))
		}
		if c.tempDir != "" {
			errs = append(errs, os.RemoveAll(c.tempDir))
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}
