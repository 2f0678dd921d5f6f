package controllermanager

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/kubernetes/pkg/controller/job"

	"github.com/restartbed/restartbed/timing"
)

// jobTunables are the Job controller settings that upstream keeps in package variables.
type jobTunables struct {
	syncBatchPeriod, podFailureBackOff, podFailureBackOffMax time.Duration
}

func jobTunablesOf(p timing.Profile) jobTunables {
	return jobTunables{
		syncBatchPeriod:      p.JobSyncBatchPeriod,
		podFailureBackOff:    p.JobPodFailureBackOff,
		podFailureBackOffMax: p.JobPodFailureBackOffMax,
	}
}

// The Job controller's tunables are process-wide, so every Job controller running in this
// process must agree on them. holders counts the running managers that set them.
var (
	jobTunablesMu sync.Mutex
	jobTunablesIn jobTunables
	holders       int
)

// acquireJobTunables sets the package variables of the upstream Job controller from p, or fails
// if another manager in this process runs with different ones. release undoes the hold.
func acquireJobTunables(p timing.Profile) (release func(), err error) {
	jobTunablesMu.Lock()
	defer jobTunablesMu.Unlock()
	want := jobTunablesOf(p)
	if holders > 0 && want != jobTunablesIn {
		return nil, fmt.Errorf("timing profile %q sets the Job controller's backoff to %s (max %s) and batch period to %s, "+
			"but a cluster already running in this process uses %s (max %s) and %s: upstream keeps these in process-wide variables, "+
			"so run clusters with different Job timings in separate processes",
			p.Name, want.podFailureBackOff, want.podFailureBackOffMax, want.syncBatchPeriod,
			jobTunablesIn.podFailureBackOff, jobTunablesIn.podFailureBackOffMax, jobTunablesIn.syncBatchPeriod)
	}
	if holders == 0 {
		// Only written while no Job controller of ours runs, so no running one reads them now.
		job.SyncJobBatchPeriod = want.syncBatchPeriod
		job.DefaultJobPodFailureBackOff = want.podFailureBackOff
		job.MaxJobPodFailureBackOff = want.podFailureBackOffMax
		jobTunablesIn = want
	}
	holders++
	var once sync.Once
	return func() {
		once.Do(func() {
			jobTunablesMu.Lock()
			defer jobTunablesMu.Unlock()
			holders--
		})
	}, nil
}
