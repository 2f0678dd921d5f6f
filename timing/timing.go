package timing

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Names of the built-in profiles, as written in a scenario's spec.timing.
const (
	RealisticName = "realistic"
	FastName      = "fast"
)

// Profile is one consistent set of timings for the whole cluster.
type Profile struct {
	// Name identifies the profile in reports and errors.
	Name string

	// JobSyncBatchPeriod is how long the Job controller batches pod events before it syncs a
	// Job; it is also the shortest delay of a re-queued sync (upstream SyncJobBatchPeriod).
	JobSyncBatchPeriod time.Duration
	// JobPodFailureBackOff is the delay before the Job controller replaces the first failed
	// pod; it doubles with every further failure (upstream DefaultJobPodFailureBackOff).
	JobPodFailureBackOff time.Duration
	// JobPodFailureBackOffMax caps the doubling (upstream MaxJobPodFailureBackOff).
	JobPodFailureBackOffMax time.Duration

	// NodeLeaseDuration is the leaseDurationSeconds of each node's Lease in kube-node-lease
	// (kubelet nodeLeaseDurationSeconds).
	NodeLeaseDuration time.Duration
	// NodeLeaseRenewInterval is how often a kubelet renews its Lease; upstream renews at a
	// quarter of the duration.
	NodeLeaseRenewInterval time.Duration
	// NodeStatusReportFrequency is how often a kubelet re-posts an unchanged node status, moving
	// the Ready condition's lastHeartbeatTime (kubelet nodeStatusReportFrequency).
	NodeStatusReportFrequency time.Duration

	// NodeMonitorPeriod is how often the node lifecycle controller checks node health
	// (kube-controller-manager --node-monitor-period).
	NodeMonitorPeriod time.Duration
	// NodeMonitorGracePeriod is how long a node may go without a heartbeat before the node
	// lifecycle controller marks it Unknown and taints it unreachable (--node-monitor-grace-period).
	NodeMonitorGracePeriod time.Duration
	// NodeStartupGracePeriod is the same allowance for a node that has never been Ready
	// (--node-startup-grace-period).
	NodeStartupGracePeriod time.Duration
	// NodeEvictionRate is how many nodes per second the node lifecycle controller may taint for
	// eviction in a healthy zone (--node-eviction-rate).
	NodeEvictionRate float32
	// DefaultTolerationSeconds is how long a pod without a toleration of its own stays on a node
	// tainted not-ready or unreachable (NoExecute) before taint eviction deletes it: the
	// apiserver's DefaultTolerationSeconds admission adds tolerations of this many seconds
	// (--default-not-ready-toleration-seconds, --default-unreachable-toleration-seconds).
	DefaultTolerationSeconds time.Duration //nolint:staticcheck // ST1011: named after the apiserver flags it sets
	// PodGCPeriod is how often pod garbage collection looks for pods to remove (upstream's
	// gcCheckPeriod).
	PodGCPeriod time.Duration
	// PodGCQuarantine is how long a node must stay missing before pod garbage collection
	// removes the pods bound to it (upstream's quarantineTime).
	PodGCQuarantine time.Duration
	// KueueFailureRecoveryThreshold is how long after a pod's deletionTimestamp Kueue's
	// failure-recovery controller waits before it fails and force-deletes a pod stuck on an
	// unreachable node (Kueue's forcefulTerminationGracePeriod).
	KueueFailureRecoveryThreshold time.Duration

	// CrashLoopBackOff is the kubelet's delay before the second restart of a crashing
	// container (the first is immediate); it doubles with every further crash.
	CrashLoopBackOff time.Duration
	// CrashLoopBackOffMax caps the doubling (kubelet maxContainerRestartPeriod).
	CrashLoopBackOffMax time.Duration
	// CrashLoopBackOffReset: a container that ran this long since its last start restarts at
	// once when it next crashes, and its backoff starts over.
	CrashLoopBackOffReset time.Duration
	// PLEGRelistPeriod is how often a kubelet relists its runtime: a container's start or exit
	// reaches the kubelet's pod workers, and so the pod's status and its next containers, at
	// the next relist (the kubelet's genericPlegRelistPeriod).
	PLEGRelistPeriod time.Duration
	// RestartAllKillGrace is how long a RestartAllContainers cleanup waits for each running
	// container after SIGTERM before SIGKILL (the kubelet's minimum grace period).
	RestartAllKillGrace time.Duration
	// SyncErrorBackOff is how long a kubelet's pod worker waits before it syncs a pod again after
	// a sync that failed: a volume that could not be mounted, a container config that could not
	// be made, an image pull that failed (the kubelet's backOffPeriod).
	SyncErrorBackOff time.Duration
}

// Realistic returns the upstream defaults of kube-controller-manager, kube-apiserver and the
// kubelet (the same in 1.35, 1.36 and 1.37) and of Kueue's failure recovery.
func Realistic() Profile {
	return Profile{
		Name:                    RealisticName,
		JobSyncBatchPeriod:      time.Second,
		JobPodFailureBackOff:    10 * time.Second,
		JobPodFailureBackOffMax: 10 * time.Minute,

		NodeLeaseDuration:         40 * time.Second,
		NodeLeaseRenewInterval:    10 * time.Second,
		NodeStatusReportFrequency: 5 * time.Minute,

		NodeMonitorPeriod:      5 * time.Second,
		NodeMonitorGracePeriod: 50 * time.Second,
		NodeStartupGracePeriod: time.Minute,
		NodeEvictionRate:       0.1,

		DefaultTolerationSeconds:      300 * time.Second,
		PodGCPeriod:                   20 * time.Second,
		PodGCQuarantine:               40 * time.Second,
		KueueFailureRecoveryThreshold: time.Minute,

		CrashLoopBackOff:      10 * time.Second,
		CrashLoopBackOffMax:   5 * time.Minute,
		CrashLoopBackOffReset: 10 * time.Minute,
		PLEGRelistPeriod:      time.Second,
		RestartAllKillGrace:   2 * time.Second,
		SyncErrorBackOff:      10 * time.Second,
	}
}

// Fast returns the realistic shapes scaled down about tenfold: backoffs start at one second and
// still double, so a test sees the same sequence of events in a fraction of the time. The
// default toleration (300 s to 3 s) and Kueue's threshold (60 s to 3 s) are cut more, so that a
// node failure, its eviction and Kueue's recovery fit in well under half a minute.
func Fast() Profile {
	return Profile{
		Name:                    FastName,
		JobSyncBatchPeriod:      50 * time.Millisecond,
		JobPodFailureBackOff:    time.Second,
		JobPodFailureBackOffMax: time.Minute,

		NodeLeaseDuration:         4 * time.Second,
		NodeLeaseRenewInterval:    time.Second,
		NodeStatusReportFrequency: 30 * time.Second,

		NodeMonitorPeriod:      500 * time.Millisecond,
		NodeMonitorGracePeriod: 5 * time.Second,
		NodeStartupGracePeriod: 10 * time.Second,
		NodeEvictionRate:       10,

		DefaultTolerationSeconds:      3 * time.Second,
		PodGCPeriod:                   2 * time.Second,
		PodGCQuarantine:               4 * time.Second,
		KueueFailureRecoveryThreshold: 3 * time.Second,

		CrashLoopBackOff:      time.Second,
		CrashLoopBackOffMax:   30 * time.Second,
		CrashLoopBackOffReset: time.Minute,
		PLEGRelistPeriod:      100 * time.Millisecond,
		RestartAllKillGrace:   time.Second,
		SyncErrorBackOff:      time.Second,
	}
}

var byName = map[string]func() Profile{
	RealisticName: Realistic,
	FastName:      Fast,
}

// ByName returns the built-in profile with that name; the empty name means Fast, the default
// of a scenario.
func ByName(name string) (Profile, error) {
	if name == "" {
		return Fast(), nil
	}
	p, ok := byName[name]
	if !ok {
		return Profile{}, fmt.Errorf("unknown timing profile %q: use one of %s", name, strings.Join(Names(), ", "))
	}
	return p(), nil
}

// Names lists the built-in profiles, sorted.
func Names() []string {
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Duration is one duration of a profile, under the name scenarios and errors use for it.
type Duration struct {
	Name  string
	Value time.Duration
}

// Durations lists the profile's durations in the order of the struct's fields.
func (p Profile) Durations() []Duration {
	return []Duration{
		{"jobSyncBatchPeriod", p.JobSyncBatchPeriod},
		{"jobPodFailureBackOff", p.JobPodFailureBackOff},
		{"jobPodFailureBackOffMax", p.JobPodFailureBackOffMax},
		{"nodeLeaseDuration", p.NodeLeaseDuration},
		{"nodeLeaseRenewInterval", p.NodeLeaseRenewInterval},
		{"nodeStatusReportFrequency", p.NodeStatusReportFrequency},
		{"nodeMonitorPeriod", p.NodeMonitorPeriod},
		{"nodeMonitorGracePeriod", p.NodeMonitorGracePeriod},
		{"nodeStartupGracePeriod", p.NodeStartupGracePeriod},
		{"defaultTolerationSeconds", p.DefaultTolerationSeconds},
		{"podGCPeriod", p.PodGCPeriod},
		{"podGCQuarantine", p.PodGCQuarantine},
		{"kueueFailureRecoveryThreshold", p.KueueFailureRecoveryThreshold},
		{"crashLoopBackOff", p.CrashLoopBackOff},
		{"crashLoopBackOffMax", p.CrashLoopBackOffMax},
		{"crashLoopBackOffReset", p.CrashLoopBackOffReset},
		{"plegRelistPeriod", p.PLEGRelistPeriod},
		{"restartAllKillGrace", p.RestartAllKillGrace},
		{"syncErrorBackOff", p.SyncErrorBackOff},
	}
}

// WithHeartbeatBudget returns the profile with the nodes' heartbeats slowed, if need be, so that
// nodes' kubelets together make at most perSecond Lease renewals a second: the renew interval,
// the lease's duration, the status report frequency and the node lifecycle controller's grace
// periods are all multiplied by the same whole factor, so nodes stay Ready exactly as before
// while a failure takes that factor longer to detect. It is for machines that cannot carry a
// large cluster's heartbeats (5000 nodes renew 500 times a second in realistic timing) and a
// workload besides. The factor is 1, and the profile unchanged, when the budget suffices or
// perSecond is not positive.
func (p Profile) WithHeartbeatBudget(nodes int, perSecond float64) (Profile, int) {
	if perSecond <= 0 || nodes <= 0 {
		return p, 1
	}
	renewals := float64(nodes) / p.NodeLeaseRenewInterval.Seconds()
	factor := int(math.Ceil(renewals / perSecond))
	if factor <= 1 {
		return p, 1
	}
	return p.WithHeartbeatScale(factor), factor
}

// WithHeartbeatScale returns the profile with the nodes' heartbeats stretched by factor, as
// WithHeartbeatBudget stretches them: the kubelets' renew interval, lease duration and status
// report frequency, and the node lifecycle controller's grace periods. A factor below 2 leaves
// the profile as it is.
func (p Profile) WithHeartbeatScale(factor int) Profile {
	if factor <= 1 {
		return p
	}
	k := time.Duration(factor)
	p.NodeLeaseRenewInterval *= k
	p.NodeLeaseDuration *= k
	p.NodeStatusReportFrequency *= k
	p.NodeMonitorGracePeriod *= k
	p.NodeStartupGracePeriod *= k
	return p
}

// Validate reports the first field that no component could work with.
func (p Profile) Validate() error {
	for _, f := range p.Durations() {
		if f.Value <= 0 {
			return fmt.Errorf("timing profile %q: %s must be positive, got %v", p.Name, f.Name, f.Value)
		}
	}
	if p.JobPodFailureBackOffMax < p.JobPodFailureBackOff {
		return fmt.Errorf("timing profile %q: jobPodFailureBackOffMax (%v) is below jobPodFailureBackOff (%v)",
			p.Name, p.JobPodFailureBackOffMax, p.JobPodFailureBackOff)
	}
	if p.CrashLoopBackOffMax < p.CrashLoopBackOff {
		return fmt.Errorf("timing profile %q: crashLoopBackOffMax (%v) is below crashLoopBackOff (%v)",
			p.Name, p.CrashLoopBackOffMax, p.CrashLoopBackOff)
	}
	if p.NodeEvictionRate <= 0 {
		return fmt.Errorf("timing profile %q: nodeEvictionRate must be positive, got %v", p.Name, p.NodeEvictionRate)
	}
	if p.NodeMonitorGracePeriod <= p.NodeLeaseRenewInterval {
		return fmt.Errorf("timing profile %q: nodeMonitorGracePeriod (%v) must exceed nodeLeaseRenewInterval (%v), or healthy nodes go Unknown",
			p.Name, p.NodeMonitorGracePeriod, p.NodeLeaseRenewInterval)
	}
	if p.NodeLeaseDuration%time.Second != 0 {
		return fmt.Errorf("timing profile %q: nodeLeaseDuration (%v) must be whole seconds: a Lease holds seconds", p.Name, p.NodeLeaseDuration)
	}
	if p.DefaultTolerationSeconds%time.Second != 0 {
		return fmt.Errorf("timing profile %q: defaultTolerationSeconds (%v) must be whole seconds: a toleration holds seconds", p.Name, p.DefaultTolerationSeconds)
	}
	if p.NodeLeaseRenewInterval >= p.NodeLeaseDuration {
		return fmt.Errorf("timing profile %q: nodeLeaseRenewInterval (%v) must be below nodeLeaseDuration (%v)",
			p.Name, p.NodeLeaseRenewInterval, p.NodeLeaseDuration)
	}
	return nil
}
