package envtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/restartbed/restartbed/controller"
)

// runningManager is a controller-runtime manager running in the process until stop.
type runningManager struct {
	cancel context.CancelFunc
	done   chan error
}

// newManager builds a controller-runtime manager for one of the cluster's in-process components:
// the cluster's scheme, logs under name, no metrics or probe endpoints, and controller names not
// checked for uniqueness, since a process may run several clusters. With namespaces, its cache
// holds their namespaced objects only.
func (c *Cluster) newManager(logger *logr.Logger, name string, namespaces ...string) (ctrl.Manager, error) {
	log := logr.Discard()
	if logger != nil {
		log = logger.WithName(name)
	}
	opts := ctrl.Options{Scheme: c.Scheme, Logger: log, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"}
	if len(namespaces) > 0 {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	opts.Controller.SkipNameValidation = ptr.To(true)
	return ctrl.NewManager(c.Config, opts)
}

// runManager starts mgr; it runs until stop, whatever happens to ctx after this call.
func runManager(ctx context.Context, mgr ctrl.Manager) *runningManager {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m := &runningManager{cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- mgr.Start(runCtx) }()
	return m
}

// exited returns the manager's error if it has stopped by itself, nil while it runs.
func (m *runningManager) exited() error {
	select {
	case err := <-m.done:
		m.done <- err
		return fmt.Errorf("the controller manager stopped: %w", err)
	default:
		return nil
	}
}

func (m *runningManager) stop() error {
	m.cancel()
	return <-m.done
}

// webhookInstallOptions make envtest register the JobSet webhooks with the apiserver, served on a
// loopback port with a certificate of its own.
func webhookInstallOptions() crenvtest.WebhookInstallOptions {
	mutating, validating := controller.Configurations()
	return crenvtest.WebhookInstallOptions{
		MutatingWebhooks:   []*admissionv1.MutatingWebhookConfiguration{mutating},
		ValidatingWebhooks: []*admissionv1.ValidatingWebhookConfiguration{validating},
		LocalServingHost:   "127.0.0.1",
	}
}

// startJobSet starts the controller and serves the webhook where envtest told the apiserver it
// is; it returns once the webhook answers and the controller's caches have synced.
func (c *Cluster) startJobSet(ctx context.Context, logger logr.Logger) error {
	serving := c.WebhookServerOptions()
	mgr, err := controller.NewManager(ctx, c.Config, controller.ManagerOptions{
		Scheme: c.Scheme, Logger: logger.WithName("jobset"), Clock: c.Clock, Gates: controller.DefaultFeatureGates(),
		Webhook:            &serving,
		MetricsBindAddress: "0", HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	c.jobSet = runManager(ctx, mgr)
	started := mgr.GetWebhookServer().StartedChecker()
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if err := c.jobSet.exited(); err != nil {
			return false, fmt.Errorf("JobSet: %w", err)
		}
		return started(&http.Request{}) == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the JobSet webhook to serve: %w", err)
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return errors.New("the JobSet controller's caches did not sync")
	}
	return nil
}
