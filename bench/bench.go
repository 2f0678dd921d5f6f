package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restartbed/restartbed/agent"
	agentconfig "github.com/restartbed/restartbed/config/agent"
	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/hostproc"
	"github.com/restartbed/restartbed/fakekubelet/program"
	"github.com/restartbed/restartbed/internal/procfs"
	"github.com/restartbed/restartbed/timing"
)

// Options configure a benchmark run.
type Options struct {
	// Pods is the number of workers, each on a node of its own. Required.
	Pods int
	// PodsPerJob is each Job's parallelism; Pods must be a multiple. Default DefaultPodsPerJob.
	PodsPerJob int
	// Strategies are measured in order on the same cluster. Default: Strategies().
	Strategies []Strategy
	// AgentJitter jitters the agents' retry backoff (the agent's default). Nil means true.
	AgentJitter *bool
	// Timing is the cluster's timing profile. Default: realistic, whose heartbeats load the
	// apiserver as a cluster of that many nodes does.
	Timing *timing.Profile
	// HeartbeatBudget caps the nodes' Lease renewals per second (timing.WithHeartbeatBudget):
	// nil means DefaultHeartbeatBudget, 0 the timing profile's own intervals.
	HeartbeatBudget *float64
	// Timeout bounds each wait: the pods starting, the group restart, the clean-up. Default
	// DefaultTimeout(Pods).
	Timeout time.Duration
	// Progress receives a line per step. Default: discarded.
	Progress io.Writer
	// Restarting, if set, is called just before the worker of a strategy's restart is made to
	// exit: with Restarted, it bounds the window of the report's CPU figures (Restart.CPU).
	Restarting func(Strategy)
	// Restarted, if set, is called when every worker runs again after a strategy's restart,
	// before anything is cleaned up: the moment to take a heap profile.
	Restarted func(Strategy)
	// APIServerProfile, if set, receives a CPU profile (pprof) of kube-apiserver taken over
	// APIServerProfileFor from the first restart's exit: where the control plane's time goes.
	APIServerProfile io.Writer
	// APIServerProfileFor is how long the apiserver is profiled. Default
	// DefaultAPIServerProfileFor.
	APIServerProfileFor time.Duration
	// Cluster is the base of the cluster's options (assets, logger, control-plane output);
	// Run sets the nodes, programs, timing and JobSet.
	Cluster envtest.Options
	// AgentBinary, if set, is a host executable run as every pod's agent instead of restartbed's
	// builtin (docs/host-binaries.md; it needs root): upstream JobSet's in-place-restart agent,
	// say. The report then counts its processes' CPU and memory (CPU.HostBinaries,
	// Memory.HostBinaries); the agents' requests and the herd are not measured.
	AgentBinary string
	// KubeletProcesses runs the nodes in that many `restartbed kubelet` processes of one shard
	// group (envtest.Options.KubeletProcesses), started with KubeletCommand: the report then has
	// each process's nodes, CPU, peak memory and pod watch events (Restart.Shards), and
	// CPU.Restartbed is this process's alone (the JobSet controller). The agents run in the
	// processes, restartbed's builtin with its jitter, so neither their requests nor the herd are
	// measured.
	KubeletProcesses int
	KubeletCommand   []string
}

// DefaultHeartbeatBudget is how many Lease renewals a second the nodes may make unless Options
// say otherwise: about a tenth of what a 2-core machine's apiserver writes, where 5000 nodes in
// realistic timing would renew 500 times a second, as much as the whole machine can write.
const DefaultHeartbeatBudget = 50.0

// DefaultAPIServerProfileFor is how long Options.APIServerProfile profiles unless told.
const DefaultAPIServerProfileFor = 30 * time.Second

// DefaultTimeout bounds each wait of a run of pods: 10 minutes, or 250 ms a pod when that is
// longer (on 2 cores, 5000 pods took 7 minutes to start and 10 to be recreated).
func DefaultTimeout(pods int) time.Duration {
	return max(10*time.Minute, time.Duration(pods)*250*time.Millisecond)
}

// DefaultPodsPerJob is each Job's parallelism unless Options say otherwise: a 4-host slice.
const DefaultPodsPerJob = 4

// Duration is a time.Duration that JSON writes as seconds.
type Duration time.Duration

// MarshalJSON writes seconds.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).Seconds()) }

// UnmarshalJSON reads seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s float64
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*d = Duration(s * float64(time.Second))
	return nil
}

// Seconds is the duration in seconds.
func (d Duration) Seconds() float64 { return time.Duration(d).Seconds() }

func (d Duration) String() string {
	switch t := time.Duration(d); {
	case t >= time.Minute:
		return t.Round(100 * time.Millisecond).String()
	case t >= time.Second:
		return fmt.Sprintf("%.2fs", t.Seconds())
	default:
		return t.Round(time.Millisecond).String()
	}
}

// Report is the outcome of a run.
type Report struct {
	// Pods, Nodes and PodsPerJob are the run's shape; CPUs the cores Go could use.
	Pods       int    `json:"pods"`
	Nodes      int    `json:"nodes"`
	PodsPerJob int    `json:"podsPerJob"`
	CPUs       int    `json:"cpus"`
	Timing     string `json:"timing"`
	// LeaseRenewInterval is how often each node renewed its Lease, HeartbeatScale the factor
	// the heartbeat budget stretched the timing profile's heartbeats by (1: not at all).
	LeaseRenewInterval Duration `json:"leaseRenewIntervalSeconds"`
	HeartbeatScale     int      `json:"heartbeatScale"`
	Go                 string   `json:"go"`
	// AgentBinary is the host executable the agents ran (Options.AgentBinary); empty: the
	// builtin agent, inside restartbed.
	AgentBinary string `json:"agentBinary,omitempty"`
	// KubeletProcesses is how many kubelet processes ran the nodes (Options.KubeletProcesses);
	// 0: this process.
	KubeletProcesses int `json:"kubeletProcesses,omitempty"`
	// StartedAt is when the run began.
	StartedAt time.Time `json:"startedAt"`
	// ClusterStart is how long the control plane and the nodes took to come up.
	ClusterStart Duration `json:"clusterStartSeconds"`
	Bound        Bound    `json:"bound"`
	// Restarts holds one measurement per strategy, in the order run.
	Restarts []*Restart `json:"restarts"`
	// RecreateOverInPlace is the recreate restart's time over the in-place one's, when both ran.
	RecreateOverInPlace float64 `json:"recreateOverInPlace,omitempty"`
	Memory              Memory  `json:"memory"`
	// Wall is the whole run.
	Wall Duration `json:"wallSeconds"`
}

// Restart is one group restart of the benchmark's JobSet.
type Restart struct {
	Strategy Strategy `json:"strategy"`
	// HostBinaries is what the host binaries' processes held right after the restart
	// (Options.AgentBinary).
	HostBinaries HostBinaries `json:"hostBinaries,omitzero"`
	// Start is from the JobSet's creation to every worker running.
	Start Duration `json:"startSeconds"`
	// Restart is from one worker's exit to every worker running again.
	Restart Duration `json:"restartSeconds"`
	// Wall is from the JobSet's creation to the end of the restart's writes.
	Wall Duration `json:"wallSeconds"`
	// Milestones say where the restart's time went.
	Milestones []Milestone `json:"milestones"`
	// Replaced counts the pods replaced rather than restarted in place.
	Replaced int `json:"replaced"`
	// Writes are the API writes from the exit until they settled, by verb and resource, as the
	// apiserver counted them, without the nodes' heartbeats (Heartbeats).
	Writes       map[string]int64 `json:"writes"`
	WritesTotal  int64            `json:"writesTotal"`
	WritesPerPod float64          `json:"writesPerPod"`
	Heartbeats   int64            `json:"heartbeats"`
	// AtBound is the time Writes need at the measured bound (creates at the create rate, every
	// other write at the patch rate); OverBound is Restart over AtBound.
	AtBound   Duration `json:"atBoundSeconds"`
	OverBound float64  `json:"overBound"`
	// WatchEvents and WatchBytes are the watch events the apiserver sent during the restart, one
	// per watcher, and their bytes, by resource (apiserver_watch_events_total and _sizes).
	WatchEvents map[string]int64 `json:"watchEvents,omitempty"`
	WatchBytes  map[string]int64 `json:"watchBytes,omitempty"`
	// Throttled are the requests API Priority and Fairness answered 429, by verb and resource;
	// FlowControl has the same by priority level and reason, and the queue waits.
	Throttled map[string]int64 `json:"throttled,omitempty"`
	FlowControl
	// CPU is what each process used from the exit to every worker running again: on a machine
	// whose cores are all busy, the restart waits for CPU rather than for the apiserver's writes.
	CPU CPU `json:"cpu"`
	// WritesCPU is the kube-apiserver CPU the restart's writes cost at the bound's CPU per write:
	// CPU.APIServer less this is what the restart cost the apiserver besides its writes (watch
	// events to every watcher, the agents' lists).
	WritesCPU Duration `json:"writesCPUSeconds"`
	// Shards are what each kubelet process used from the exit to every worker running again
	// (Options.KubeletProcesses), by name.
	Shards []Shard `json:"shards,omitempty"`
	// Agents is what the agent processes started during the restart met.
	Agents *AgentStats `json:"agents,omitempty"`
	// Herd is what followed when every agent's watch broke at once after the restart.
	Herd *Herd `json:"herd,omitempty"`
}

// Shard is what one kubelet process used over a restart.
type Shard struct {
	Name string `json:"name"`
	// Nodes counts the nodes it ran at the end of the restart.
	Nodes int `json:"nodes"`
	// CPU is its CPU time over the restart; PeakRSS its peak resident memory so far.
	CPU     Duration `json:"cpuSeconds"`
	PeakRSS int64    `json:"peakRSSBytes"`
	// PodWatchEvents are the pod events the apiserver's watches sent it over the restart.
	PodWatchEvents uint64 `json:"podWatchEvents"`
}

// FlowControl is what API Priority and Fairness did to a run's requests, as the apiserver
// counted: Rejected by priority level and reason, and QueueWait, the mean time a request waited
// in its queues, by priority level.
type FlowControl struct {
	Rejected  map[string]int64    `json:"rejected,omitempty"`
	QueueWait map[string]Duration `json:"queueWait,omitempty"`
}

// Memory is the peak resident memory of each process of the run, in bytes.
type Memory struct {
	Restartbed        int64 `json:"restartbedBytes"`
	APIServer         int64 `json:"kubeAPIServerBytes,omitempty"`
	Etcd              int64 `json:"etcdBytes,omitempty"`
	ControllerManager int64 `json:"kubeControllerManagerBytes,omitempty"`
	Scheduler         int64 `json:"kubeSchedulerBytes,omitempty"`
	// HostBinaries is the sum of the peak RSS of the host binaries' processes (the sandbox
	// helpers and what they run) right after a restart, the most of any strategy's;
	// HostBinaryProcesses how many there were then.
	HostBinaries        int64 `json:"hostBinariesBytes,omitempty"`
	HostBinaryProcesses int   `json:"hostBinaryProcesses,omitempty"`
	// KubeletProcesses is the sum of the kubelet processes' peak RSS (Options.KubeletProcesses).
	KubeletProcesses int64 `json:"kubeletProcessesBytes,omitempty"`
}

func (o *Options) complete() error {
	if o.PodsPerJob == 0 {
		o.PodsPerJob = DefaultPodsPerJob
	}
	if err := checkShape(o.Pods, o.PodsPerJob); err != nil {
		return err
	}
	if len(o.Strategies) == 0 {
		o.Strategies = Strategies()
	}
	for _, s := range o.Strategies {
		if !slices.Contains(Strategies(), s) {
			return fmt.Errorf("unknown strategy %q: want %s or %s", s, InPlace, Recreate)
		}
	}
	if o.AgentJitter == nil {
		o.AgentJitter = new(true)
	}
	if o.Timing == nil {
		o.Timing = new(timing.Realistic())
	}
	if o.HeartbeatBudget == nil {
		o.HeartbeatBudget = new(DefaultHeartbeatBudget)
	}
	if *o.HeartbeatBudget < 0 {
		return fmt.Errorf("--heartbeats-per-second must be 0 (the timing profile's heartbeats) or positive, got %v", *o.HeartbeatBudget)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout(o.Pods)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.KubeletProcesses < 0 {
		return fmt.Errorf("--kubelets must not be negative, got %d", o.KubeletProcesses)
	}
	if o.KubeletProcesses > 0 {
		switch {
		case len(o.KubeletCommand) == 0:
			return errors.New("kubelet processes need the restartbed binary to run (Options.KubeletCommand)")
		case o.AgentBinary != "":
			return errors.New("--agent-binary runs in this process's kubelet: not with --kubelets")
		case !*o.AgentJitter:
			return errors.New("--agent-jitter=false sets the agents of this process's kubelet: the kubelet processes run restartbed's builtin agent, with jitter")
		}
	}
	if o.AgentBinary != "" {
		if err := hostproc.CheckBinary(o.AgentBinary); err != nil {
			return fmt.Errorf("the agent binary: %w", err)
		}
		if err := hostproc.Check(); err != nil {
			return fmt.Errorf("the agent binary: %w", err)
		}
	}
	return nil
}

// Run starts a cluster of opts.Pods nodes, measures the write bound and each strategy's group
// restart, and stops the cluster. The report is returned with what was measured before an error.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	profile, scale := opts.Timing.WithHeartbeatBudget(opts.Pods, *opts.HeartbeatBudget)
	rep := &Report{Pods: opts.Pods, Nodes: opts.Pods, PodsPerJob: opts.PodsPerJob, CPUs: goruntime.GOMAXPROCS(0),
		Timing: opts.Timing.Name, LeaseRenewInterval: Duration(profile.NodeLeaseRenewInterval), HeartbeatScale: scale,
		Go: goruntime.Version(), StartedAt: time.Now()}
	progress := func(format string, args ...any) {
		fmt.Fprintf(opts.Progress, "bench: "+format+"\n", args...)
	}

	tracker := newAgentTracker(*opts.AgentJitter)
	clusterOpts := opts.Cluster
	clusterOpts.Timing = &profile
	clusterOpts.JobSet = true
	clusterOpts.Nodes = []fakekubelet.NodePool{{Name: "bench", Count: opts.Pods,
		Capacity: corev1.ResourceList{fakekubelet.TPUResource: resource.MustParse("4")}}}
	agentRule := program.Rule{Container: agent.ContainerName, Program: tracker}
	if opts.AgentBinary != "" {
		agentRule = program.Rule{Container: agent.ContainerName, Binary: opts.AgentBinary}
		clusterOpts.AllowHostBinaries = true
		rep.AgentBinary = opts.AgentBinary
	}
	if opts.KubeletProcesses > 0 {
		// Their agent is restartbed's builtin, the processes' default program.
		clusterOpts.KubeletProcesses, clusterOpts.KubeletCommand = opts.KubeletProcesses, opts.KubeletCommand
		clusterOpts.KubeletArgs = append(clusterOpts.KubeletArgs, "--heartbeat-scale", strconv.Itoa(scale))
		rep.KubeletProcesses = opts.KubeletProcesses
	} else {
		clusterOpts.Programs = append([]program.Rule{agentRule}, clusterOpts.Programs...)
	}
	progress("starting a control plane with %d nodes (%s timing, Leases renewed every %s)", opts.Pods, opts.Timing.Name, rep.LeaseRenewInterval)
	cluster, err := envtest.Start(ctx, clusterOpts)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cluster.Stop() }()
	rep.ClusterStart = Duration(time.Since(rep.StartedAt))
	progress("cluster up in %s", rep.ClusterStart)

	procs := findProcesses(cluster)
	err = run(ctx, cluster, opts, tracker, procs, rep, progress)
	rep.Memory = procs.peakMemory()
	for _, r := range rep.Restarts {
		if r.HostBinaries.Bytes > rep.Memory.HostBinaries {
			rep.Memory.HostBinaries, rep.Memory.HostBinaryProcesses = r.HostBinaries.Bytes, r.HostBinaries.Processes
		}
	}
	rep.Wall = Duration(time.Since(rep.StartedAt))
	return rep, err
}

func run(ctx context.Context, cluster *envtest.Cluster, opts Options, tracker *agentTracker, procs processes, rep *Report,
	progress func(string, ...any)) error {
	boundNS, err := benchNamespace(ctx, cluster, "bench-bound")
	if err != nil {
		return err
	}
	// Until the controller-manager has lifted every new node's not-ready taint, that work would
	// run beside the bound's writes.
	progress("waiting for the controller-manager to take the not-ready taint off every node")
	if err := cluster.WaitForSchedulableNodes(ctx); err != nil {
		return err
	}
	boundPods := min(max(opts.Pods, 1000), 5000)
	progress("measuring the write bound: %d pod creates, then %d status patches, %d at a time", boundPods, boundPods, fakekubelet.StatusWorkers)
	cpuBefore := procs.cpu()
	rep.Bound, err = measureBound(ctx, cluster.Clientset, boundNS, boundPods, fakekubelet.StatusWorkers)
	if err != nil {
		return err
	}
	rep.Bound.CPU = procs.since(cpuBefore)
	if err := deleteBoundPods(ctx, cluster.Clientset, boundNS, boundPods, fakekubelet.StatusWorkers); err != nil {
		return err
	}
	progress("write bound: %.0f creates/s, %.0f status patches/s", rep.Bound.CreatesPerSecond, rep.Bound.PatchesPerSecond)

	for _, s := range opts.Strategies {
		r, err := measureRestart(ctx, cluster, opts, s, tracker, procs, rep.Bound, progress)
		opts.APIServerProfile = nil // the first restart's only
		if r != nil {
			rep.Restarts = append(rep.Restarts, r)
		}
		if err != nil {
			return fmt.Errorf("%s restart: %w", s, err)
		}
	}
	if in, re := rep.restart(InPlace), rep.restart(Recreate); in != nil && re != nil && in.Restart > 0 {
		rep.RecreateOverInPlace = re.Restart.Seconds() / in.Restart.Seconds()
	}
	return nil
}

// restart returns the measurement of strategy s, or nil.
func (r *Report) restart(s Strategy) *Restart {
	for _, m := range r.Restarts {
		if m.Strategy == s {
			return m
		}
	}
	return nil
}

// benchNamespace creates a namespace with the agent's service account and RBAC.
func benchNamespace(ctx context.Context, cluster *envtest.Cluster, name string) (string, error) {
	if _, err := cluster.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("creating namespace %s: %w", name, err)
	}
	objs, err := agentconfig.RBAC(name)
	if err != nil {
		return "", err
	}
	for _, o := range objs {
		if err := cluster.Client.Create(ctx, o); err != nil {
			return "", fmt.Errorf("creating the agent's %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return name, nil
}

// The run's processes, in the order of processes' fields: this one and its children.
const (
	procRestartbed = iota
	procAPIServer
	procEtcd
	procControllerManager
	procScheduler
	procCount
)

// processes are the pids of the run's processes (0 if not found), and its kubelet processes.
type processes struct {
	pids    [procCount]int
	cluster *envtest.Cluster
}

// childCommands name the children by their /proc comm, which keeps 15 bytes of a name.
var childCommands = map[string]int{
	"kube-apiserver":  procAPIServer,
	"etcd":            procEtcd,
	"kube-controller": procControllerManager,
	"kube-scheduler":  procScheduler,
}

func findProcesses(cluster *envtest.Cluster) processes {
	p := processes{cluster: cluster}
	p.pids[procRestartbed] = os.Getpid()
	for _, pid := range procfs.Children(p.pids[procRestartbed]) {
		if i, ok := childCommands[procfs.Command(pid)]; ok {
			p.pids[i] = pid
		}
	}
	return p
}

// each reads f for every process; a process not found or gone reads as zero.
func each[T any](p processes, f func(pid int) (T, error)) [procCount]T {
	var out [procCount]T
	for i, pid := range p.pids {
		if pid == 0 {
			continue
		}
		if v, err := f(pid); err == nil {
			out[i] = v
		}
	}
	return out
}

// peakMemory reads the peak RSS of the run's processes.
func (p processes) peakMemory() Memory {
	v := each(p, procfs.PeakRSS)
	m := Memory{Restartbed: v[procRestartbed], APIServer: v[procAPIServer], Etcd: v[procEtcd],
		ControllerManager: v[procControllerManager], Scheduler: v[procScheduler]}
	for _, name := range p.cluster.KubeletProcessNames() {
		rss, _ := procfs.PeakRSS(p.cluster.KubeletProcessPID(name)) // a process gone reads as zero
		m.KubeletProcesses += rss
	}
	return m
}

// HostBinaries are the live processes of the host binaries' sandboxes at one moment.
type HostBinaries struct {
	// Processes counts the helpers and the processes they run; Bytes sums their peak RSS.
	Processes int   `json:"processes"`
	Bytes     int64 `json:"peakRSSBytes"`
}

// CPU is the CPU time each process of the run used over a span, and what the machine had.
type CPU struct {
	Restartbed        Duration `json:"restartbedSeconds"`
	APIServer         Duration `json:"kubeAPIServerSeconds"`
	Etcd              Duration `json:"etcdSeconds"`
	ControllerManager Duration `json:"kubeControllerManagerSeconds"`
	Scheduler         Duration `json:"kubeSchedulerSeconds"`
	// HostBinaries is what the host binaries' sandboxes used (helpers, their processes and the
	// processes they reaped), with Options.AgentBinary.
	HostBinaries Duration `json:"hostBinariesSeconds,omitempty"`
	// KubeletProcesses is what the kubelet processes used together (Options.KubeletProcesses;
	// Restart.Shards has each).
	KubeletProcesses Duration `json:"kubeletProcessesSeconds,omitempty"`
	// Available is the span's wall time times the cores Go could use.
	Available Duration `json:"availableSeconds"`
}

// cpuMark is a reading of the processes' CPU times.
type cpuMark struct {
	at       time.Time
	used     [procCount]time.Duration
	binaries time.Duration
	// kubelets are the kubelet processes' CPU times, by name.
	kubelets map[string]time.Duration
}

func (p processes) cpu() cpuMark {
	m := cpuMark{at: time.Now(), used: each(p, procfs.CPUTime), binaries: p.binariesCPU(), kubelets: map[string]time.Duration{}}
	for _, name := range p.cluster.KubeletProcessNames() {
		m.kubelets[name], _ = procfs.CPUTime(p.cluster.KubeletProcessPID(name)) // a process gone reads as zero
	}
	return m
}

// since is the CPU used from m to now.
func (p processes) since(m cpuMark) CPU {
	now := p.cpu()
	d := func(i int) Duration { return Duration(now.used[i] - m.used[i]) }
	c := CPU{Restartbed: d(procRestartbed), APIServer: d(procAPIServer), Etcd: d(procEtcd),
		ControllerManager: d(procControllerManager), Scheduler: d(procScheduler), HostBinaries: Duration(now.binaries - m.binaries),
		Available: Duration(now.at.Sub(m.at) * time.Duration(goruntime.GOMAXPROCS(0)))}
	for name, used := range now.kubelets {
		c.KubeletProcesses += Duration(used - m.kubelets[name])
	}
	return c
}

// shardMark is a reading of the kubelet processes' pod watch events, by name.
type shardMark map[string]uint64

func (p processes) shardWatch(ctx context.Context) (shardMark, error) {
	m := shardMark{}
	for _, name := range p.cluster.KubeletProcessNames() {
		st, err := p.cluster.KubeletProcessStats(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("the stats of kubelet process %s: %w", name, err)
		}
		m[name] = st.PodWatchEvents
	}
	return m, nil
}

// shards is what each kubelet process used from the marks to now.
func (p processes) shards(ctx context.Context, cpu cpuMark, watch shardMark) ([]Shard, error) {
	var out []Shard
	for _, name := range p.cluster.KubeletProcessNames() {
		pid := p.cluster.KubeletProcessPID(name)
		st, err := p.cluster.KubeletProcessStats(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("the stats of kubelet process %s: %w", name, err)
		}
		used, _ := procfs.CPUTime(pid) // a process gone reads as zero
		rss, _ := procfs.PeakRSS(pid)  // as above
		out = append(out, Shard{Name: name, Nodes: st.Nodes, CPU: Duration(used - cpu.kubelets[name]), PeakRSS: rss,
			PodWatchEvents: st.PodWatchEvents - watch[name]})
	}
	return out, nil
}

// helperCommand is the sandbox helpers' /proc comm: restartbed-sandbox, cut to 15 bytes.
const helperCommand = "restartbed-sand"

// helpers are restartbed's sandbox helpers alive now.
func (p processes) helpers() []int {
	var pids []int
	for _, pid := range procfs.Children(p.pids[procRestartbed]) {
		if procfs.Command(pid) == helperCommand {
			pids = append(pids, pid)
		}
	}
	return pids
}

// binariesCPU is the CPU the live sandboxes used so far: each helper with what it reaped, and
// its live children. A sandbox that ended (its pod deleted) takes its share with it.
func (p processes) binariesCPU() time.Duration {
	var total time.Duration
	for _, h := range p.helpers() {
		cpu, _ := procfs.CPUTimeWithChildren(h) // a process that ended took its share with it (zero)
		total += cpu
		for _, c := range procfs.Children(h) {
			cpu, _ := procfs.CPUTime(c) // as above
			total += cpu
		}
	}
	return total
}

// binaries sums the peak RSS of the live sandboxes' processes and counts them.
func (p processes) binaries() HostBinaries {
	var hb HostBinaries
	for _, h := range p.helpers() {
		for _, pid := range append([]int{h}, procfs.Children(h)...) {
			if rss, err := procfs.PeakRSS(pid); err == nil {
				hb.Bytes += rss
				hb.Processes++
			}
		}
	}
	return hb
}

// errTimeout wraps what a wait that ran out found.
var errTimeout = errors.New("timed out")
