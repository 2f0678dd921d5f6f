package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/restartbed/restartbed/envtest"
)

// Herd is what happened when every agent's watch broke at once and all of them listed and
// watched their JobSet again: the thundering herd of an apiserver rollout or a network blip,
// and — with a pod PATCH each besides — of every group restart on a real cluster, where the
// agents restart within a second of each other.
type Herd struct {
	// Agents is the number of watches broken; Jitter whether the agents' backoff was jittered.
	Agents int  `json:"agents"`
	Jitter bool `json:"jitter"`
	// Back is from the break to every agent watching again (0 if some never did); ToWatch the
	// same per agent.
	Back    Duration  `json:"backSeconds"`
	ToWatch Quantiles `json:"toWatch"`
	// RequestStats are the agents' requests from the break on; client-go retried each 429 after
	// the Retry-After the apiserver set.
	RequestStats
	FlowControl
}

// measureHerd breaks every agent's watch at once and waits for all of them to watch again.
func measureHerd(ctx context.Context, cluster *envtest.Cluster, tracker *agentTracker, jitter bool, timeout time.Duration) (*Herd, error) {
	before, err := readCounts(ctx, cluster.Clientset)
	if err != nil {
		return nil, err
	}
	agentsBefore := tracker.mark()
	h := tracker.breakWatches()
	err = waitFor(ctx, h.done, timeout, func() string {
		return fmt.Sprintf("%d of %d agents watch again", len(tracker.herdBack(h)), h.want)
	})
	back := tracker.herdBack(h)
	herd := &Herd{Agents: h.want, Jitter: jitter, ToWatch: quantiles(back)}
	if err == nil && len(back) > 0 {
		herd.Back = herd.ToWatch.Max
	}
	herd.RequestStats = tracker.since(agentsBefore, jitter).RequestStats
	after, cerr := readCounts(ctx, cluster.Clientset)
	if cerr != nil {
		return herd, cerr
	}
	herd.FlowControl = after.since(before).flowControl()
	if err != nil {
		return herd, fmt.Errorf("waiting for the agents to watch again: %w", err)
	}
	return herd, nil
}
