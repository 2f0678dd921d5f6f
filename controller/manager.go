package controller

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// ManagerOptions configure a manager that runs the JobSet controller and, unless disabled, its
// admission webhook: what cmd/controller runs against a cluster and envtest runs in-process.
type ManagerOptions struct {
	Scheme *runtime.Scheme
	Logger logr.Logger
	Clock  clock.PassiveClock
	// Gates are JobSet's feature gates.
	Gates FeatureGates
	// Webhook serves the admission webhook (TLS, with the certificate in CertDir) on Host:Port.
	Webhook *webhook.Options
	// MetricsBindAddress and HealthProbeBindAddress: "0" turns them off.
	MetricsBindAddress, HealthProbeBindAddress string
	// LeaderElection, with LeaderElectionNamespace, lets several replicas run with one active.
	LeaderElection          bool
	LeaderElectionNamespace string
}

// LeaderElectionID is the Lease the controller's replicas elect a leader with.
const LeaderElectionID = "6d4f6a47.jobset.x-k8s.io"

// NewManager builds the manager with the controller (and the webhook) registered; Start runs it.
func NewManager(ctx context.Context, cfg *rest.Config, opts ManagerOptions) (ctrl.Manager, error) {
	mgrOpts := ctrl.Options{
		Scheme: opts.Scheme, Logger: opts.Logger,
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsBindAddress},
		HealthProbeBindAddress:  opts.HealthProbeBindAddress,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		// The controller never reads managed fields; at thousands of pods they are much of the
		// cache's memory.
		Cache: crcache.Options{DefaultTransform: crcache.TransformStripManagedFields()},
	}
	if opts.Webhook != nil {
		mgrOpts.WebhookServer = webhook.NewServer(*opts.Webhook)
	}
	// Several clusters may run in one process (restartbed run -p, test suites), each with its
	// own manager and a controller named "jobset"; controller-runtime's process-wide name check
	// exists for metric names, which restartbed does not serve.
	mgrOpts.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("JobSet controller manager: %w", err)
	}
	if err := Setup(ctx, mgr, Options{Clock: opts.Clock, Gates: opts.Gates}); err != nil {
		return nil, err
	}
	if opts.Webhook != nil {
		(&Webhook{Gates: opts.Gates}).Register(mgr.GetWebhookServer(), mgr.GetScheme())
	}
	if opts.HealthProbeBindAddress != "0" && opts.HealthProbeBindAddress != "" {
		if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
			return nil, err
		}
		if opts.Webhook != nil {
			if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
				return nil, err
			}
		}
	}
	return mgr, nil
}
