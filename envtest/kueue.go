package envtest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"github.com/restartbed/restartbed/kueue/failurerecovery"
)

// KueueFailureRecovery configures Kueue's failure-recovery controller.
type KueueFailureRecovery struct {
	// Threshold is how long after a pod's deletionTimestamp the controller fails and deletes it.
	// Zero means the timing profile's (realistic 60 s, Kueue's default; fast 3 s).
	Threshold time.Duration
}

// startKueue runs the failure-recovery controller in a manager of its own, as Kueue's manager
// runs it, and returns once its caches have synced.
func (c *Cluster) startKueue(ctx context.Context, opts KueueFailureRecovery, logger *logr.Logger) error {
	threshold := opts.Threshold
	if threshold == 0 {
		threshold = c.Timing.KueueFailureRecoveryThreshold
	}
	var namespaces []string
	if c.tenant != nil {
		namespaces = []string{c.tenant.namespace} // the other tenants' pods are not this one's to recover
	}
	mgr, err := c.newManager(logger, "kueue", namespaces...)
	if err != nil {
		return fmt.Errorf("kueue failure recovery manager: %w", err)
	}
	// Kueue's controllers record core/v1 events (record.EventRecorder); this one does as Kueue's.
	r, err := failurerecovery.New(failurerecovery.Options{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorderFor(failurerecovery.EventSource), //nolint:staticcheck // SA1019: as Kueue
		Clock:    c.Clock, Threshold: threshold,
	})
	if err != nil {
		return fmt.Errorf("kueue failure recovery: %w", err) // New checks the threshold
	}
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("kueue failure recovery: %w", err)
	}
	c.kueue = runManager(ctx, mgr)
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return errors.Join(errors.New("the Kueue failure-recovery controller's caches did not sync"), c.kueue.exited())
	}
	return nil
}
