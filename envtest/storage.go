package envtest

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/restartbed/restartbed/provisioner"
)

// startStorage gives the cluster its default StorageClass and runs the provisioner behind it in a
// manager of its own, as a cluster runs its CSI provisioner, and returns once its caches have
// synced.
func (c *Cluster) startStorage(ctx context.Context, logger *logr.Logger) error {
	if err := c.Client.Create(ctx, provisioner.StorageClass()); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the default StorageClass: %w", err)
	}
	mgr, err := c.newManager(logger, "provisioner")
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
