package scenarios

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/timing"
)

// Hosts are the shared control planes of a set of scenarios (RunOptions.Host): one for each
// release, timing profile and set of feature gates that two or more of the scenarios that can
// share one (Scenario.Shares) ask for, with restartbed's JobSet controller, each started when
// its first tenant needs it. A scenario that cannot share, or whose control plane no other
// scenario would share, runs on a cluster of its own.
type Hosts struct {
	byKey map[string]*Host
	// configure adjusts each control plane's options before it starts (logs, assets).
	configure func(*envtest.Options)
}

// Host is one shared control plane of Hosts.
type Host struct {
	// Key says what the control plane runs: its release, timing profile and gates.
	Key     string
	opts    envtest.Options
	once    sync.Once
	cluster *envtest.Cluster
	err     error
}

// NewHosts groups the scenarios by the control plane they would share; configure, when not nil,
// adjusts each control plane's options before it starts. It starts nothing.
func NewHosts(all []*Scenario, configure func(*envtest.Options)) (*Hosts, error) {
	h := &Hosts{byKey: map[string]*Host{}, configure: configure}
	members := map[string]int{}
	for _, sc := range all {
		if sc.Shares() == "" {
			key, err := hostKey(sc)
			if err != nil {
				return nil, err
			}
			members[key]++
		}
	}
	for _, sc := range all {
		key, _ := hostKey(sc) // checked above for those that share
		if sc.Shares() != "" || members[key] < 2 || h.byKey[key] != nil {
			continue
		}
		opts, err := sc.ClusterOptions()
		if err != nil {
			return nil, err
		}
		h.byKey[key] = &Host{Key: key, opts: envtest.Options{KubernetesVersion: opts.KubernetesVersion, Timing: opts.Timing,
			FeatureGates: opts.FeatureGates, JobSet: true, Tenants: true}}
	}
	return h, nil
}

// hostKey is what a shared control plane must run for the scenario: its release, its timing
// profile and its feature gates.
func hostKey(sc *Scenario) (string, error) {
	release, err := controlplane.ResolveRelease(sc.Spec.KubernetesVersion)
	if err != nil {
		return "", fmt.Errorf("%s: spec.kubernetesVersion: %w", sc.File, err)
	}
	var gates []string
	for _, g := range slices.Sorted(maps.Keys(sc.Spec.FeatureGates)) {
		gates = append(gates, fmt.Sprintf("%s=%t", g, sc.Spec.FeatureGates[g]))
	}
	key := fmt.Sprintf("Kubernetes %s, timing %s", release.Kubernetes, cmp.Or(sc.Spec.Timing, timing.FastName))
	if len(gates) > 0 {
		key += ", gates " + strings.Join(gates, ",")
	}
	return key, nil
}

// For is the shared control plane the scenario runs on, nil when it runs on a cluster of its own
// (or h is nil).
func (h *Hosts) For(sc *Scenario) *Host {
	if h == nil || sc.Shares() != "" {
		return nil
	}
	key, err := hostKey(sc)
	if err != nil {
		return nil
	}
	return h.byKey[key]
}

// Cluster is the host's control plane, started the first time; every later call returns the
// same cluster, or the same error.
func (h *Hosts) Cluster(ctx context.Context, host *Host) (*envtest.Cluster, error) {
	host.once.Do(func() {
		opts := host.opts
		if h.configure != nil {
			h.configure(&opts)
		}
		host.cluster, host.err = envtest.Start(ctx, opts)
		if host.err != nil {
			host.err = fmt.Errorf("starting the shared control plane (%s): %w", host.Key, host.err)
		}
	})
	return host.cluster, host.err
}

// Stop stops every control plane that started.
func (h *Hosts) Stop() error {
	var errs []error
	for _, host := range h.byKey {
		if host.cluster != nil {
			if err := host.cluster.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping the shared control plane (%s): %w", host.Key, err))
			}
		}
	}
	return errors.Join(errs...)
}
