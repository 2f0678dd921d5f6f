package envtest

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/restartbed/restartbed/provisioner"
)

// startStorage gives the cluster its default StorageClass and runs the provisioner behind it in a
// manager of its own, as a cluster runs its CSI provisioner, and returns once its caches have
// synced.
func (c *Cluster) startStorage(ctx context.Context, logger *logr.Logger) error {
	if err := c.Client.Create(ctx, provisioner.StorageClass()); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the default StorageClass: %w", err)
	}
	log := logr.Discard()
	if logger != nil {
		log = logger.WithName("provisioner")
	}
	mgrOpts := ctrl.Options{Scheme: c.Scheme, Logger: log, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"}
	mgrOpts.Controller.SkipNameValidation = ptr.To(true) // one per cluster, several clusters per process
	mgr, err := ctrl.NewManager(c.Config, mgrOpts)
	if err != nil {
		return fmt.Errorf("storage provisioner manager: %w", err)
	}
	if err := provisioner.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("storage provisioner: %w", err)
	}
	c.storage = runManager(ctx, mgr)
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return errors.Join(errors.New("the storage provisioner's caches did not sync"), c.storage.exited())
	}
	return nil
}
