package envtest

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/restartbed/restartbed/timing"
)

// kube-controller-manager and kube-scheduler's client rate limits by default
// (--kube-api-qps/--kube-api-burst and clientConnection.qps/burst).
const (
	controllerManagerQPS, controllerManagerBurst = 20, 30
	schedulerQPS, schedulerBurst                 = 50, 100
	// nodesPerQPS: above the defaults, each component gets one query per second for this many
	// nodes, with a burst of twice that, as operators raise the limits of large clusters.
	nodesPerQPS = 5
)

// From largeClusterNodes nodes on, kube-controller-manager batches the endpoint controllers'
// reaction to pod changes for endpointBatchPeriod (--endpointslice-updates-batch-period and
// --endpoint-updates-batch-period; upstream's default is no batching). A JobSet's headless
// Service selects every pod of the JobSet, so without batching each pod's readiness change
// recomputes the Service's whole Endpoints and EndpointSlices: at 1000 pods that was half of
// kube-controller-manager's CPU during a group restart and 365 EndpointSlice updates; batched,
// a third of the CPU and about 230 updates (docs/control-plane.md).
const (
	largeClusterNodes   = 100
	endpointBatchPeriod = time.Second
)

// clientLimits are a component's client rate limits for a cluster of n nodes: the upstream
// defaults for small clusters, n/nodesPerQPS queries per second beyond.
func clientLimits(qps, burst, nodes int) (int, int) {
	scaled := nodes / nodesPerQPS
	if scaled <= qps {
		return qps, burst
	}
	return scaled, max(burst, 2*scaled)
}

// secondaryEvictionRateRatio: kube-controller-manager's --secondary-node-eviction-rate defaults
// to a tenth of --node-eviction-rate; restartbed keeps that ratio when the profile sets the rate.
const secondaryEvictionRateRatio = 0.1

// apiServerArgs sets restartbed's kube-apiserver flags over controller-runtime's defaults.
func (c *Cluster) apiServerArgs(args *crenvtest.Arguments, noControllerManager bool) {
	if flag := gatesFlag(c.Release, c.FeatureGates); flag != "" {
		args.Set("feature-gates", flag)
	}
	// controller-runtime turns ServiceAccount admission off because envtest runs no
	// controller-manager; restartbed runs one, so pods get their service account and its token
	// volume as in a cluster.
	if !noControllerManager {
		args.Disable("disable-admission-plugins")
	}
	// Kubelets are authorized as on a kubeadm cluster: the Node authorizer and NodeRestriction
	// admission limit each to its own node, its pods and what they use (docs/join.md).
	args.Set("authorization-mode", "Node,RBAC")
	args.Set("enable-admission-plugins", "NodeRestriction")
	if c.tenants != nil {
		// A shared control plane keeps each tenant's pods on its nodes (Cluster.Tenant).
		args.Set("enable-admission-plugins", "NodeRestriction,PodNodeSelector")
	}
	// The DefaultTolerationSeconds admission plugin gives every pod these tolerations of the
	// not-ready and unreachable NoExecute taints, so taint eviction runs on the profile's clock.
	tolerate := seconds(c.Timing.DefaultTolerationSeconds)
	args.Set("default-not-ready-toleration-seconds", tolerate)
	args.Set("default-unreachable-toleration-seconds", tolerate)
}

// controllerManagerArgs are kube-controller-manager's flags: every default controller, the
// profile's node-lifecycle timings through upstream's flags, and the Job and pod GC tunables that
// upstream keeps in code through restartbed's thin main (envtest/controlplane/mains).
func (c *Cluster) controllerManagerArgs(kubeconfig, caFile string, nodes int, overrides map[string][]string) []string {
	t := c.Timing
	qps, burst := clientLimits(controllerManagerQPS, controllerManagerBurst, nodes)
	flags := map[string][]string{
		"kubeconfig":   {kubeconfig},
		"leader-elect": {"false"},
		// No serving: restartbed asks the API, not the component, whether it works.
		"secure-port":                            {"0"},
		"service-account-private-key-file":       {c.env.ControlPlane.APIServer.CertDir + "/sa-signer.key"},
		"root-ca-file":                           {caFile},
		"kube-api-qps":                           {strconv.Itoa(qps)},
		"kube-api-burst":                         {strconv.Itoa(burst)},
		"node-monitor-period":                    {t.NodeMonitorPeriod.String()},
		"node-monitor-grace-period":              {t.NodeMonitorGracePeriod.String()},
		"node-startup-grace-period":              {t.NodeStartupGracePeriod.String()},
		"node-eviction-rate":                     {rate(t.NodeEvictionRate)},
		"secondary-node-eviction-rate":           {rate(t.NodeEvictionRate * secondaryEvictionRateRatio)},
		"restartbed-job-sync-batch-period":       {t.JobSyncBatchPeriod.String()},
		"restartbed-job-pod-failure-backoff":     {t.JobPodFailureBackOff.String()},
		"restartbed-job-pod-failure-backoff-max": {t.JobPodFailureBackOffMax.String()},
	}
	// Upstream's pod GC keeps its period and quarantine in constants: where the profile differs
	// from them, the thin main runs upstream's controller with the profile's instead of the
	// command's own, which shares the command's informers and so costs less.
	if upstream := timing.Realistic(); t.PodGCPeriod != upstream.PodGCPeriod || t.PodGCQuarantine != upstream.PodGCQuarantine {
		flags["controllers"] = []string{"*,-pod-garbage-collector-controller"}
		flags["restartbed-pod-gc-period"] = []string{t.PodGCPeriod.String()}
		flags["restartbed-pod-gc-quarantine"] = []string{t.PodGCQuarantine.String()}
	}
	if nodes >= largeClusterNodes {
		flags["endpointslice-updates-batch-period"] = []string{endpointBatchPeriod.String()}
		flags["endpoint-updates-batch-period"] = []string{endpointBatchPeriod.String()}
	}
	if flag := gatesFlag(c.Release, c.FeatureGates); flag != "" {
		flags["feature-gates"] = []string{flag}
	}
	maps.Copy(flags, overrides)
	return render(flags)
}

// schedulerConfig is kube-scheduler's configuration file: upstream's default profile, with the
// client limits for the cluster's size and no leader election.
func schedulerConfig(kubeconfig string, nodes int) string {
	qps, burst := clientLimits(schedulerQPS, schedulerBurst, nodes)
	return fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: %d
  burst: %d
leaderElection:
  leaderElect: false
`, kubeconfig, qps, burst)
}

func (c *Cluster) schedulerArgs(config string, overrides map[string][]string) []string {
	flags := map[string][]string{"config": {config}, "secure-port": {"0"}}
	if flag := gatesFlag(c.Release, c.FeatureGates); flag != "" {
		flags["feature-gates"] = []string{flag}
	}
	maps.Copy(flags, overrides)
	return render(flags)
}

// render writes flags as --name=value, sorted by name, one argument per value.
func render(flags map[string][]string) []string {
	var args []string
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		for _, v := range flags[name] {
			args = append(args, "--"+name+"="+v)
		}
	}
	return args
}

func seconds(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }

func rate(r float32) string { return strconv.FormatFloat(float64(r), 'g', -1, 32) }
