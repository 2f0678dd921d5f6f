package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
	"github.com/restartbed/restartbed/envtest"
)

// settle bounds the wait for a restart's trailing writes (conditions, the JobSet's status)
// after the last worker runs again; quiet is how long the writes must pause to count as done.
const (
	settleMax   = 30 * time.Second
	settleQuiet = time.Second
)

// measureRestart creates the benchmark's JobSet for strategy in a namespace of its own, waits for
// every worker to run, makes the first pod's worker exit and times the group restart; it then
// deletes the JobSet and waits for its pods to go, so the nodes are free for the next strategy.
func measureRestart(ctx context.Context, cluster *envtest.Cluster, opts Options, strategy Strategy, tracker *agentTracker, procs processes, bound Bound,
	progress func(string, ...any)) (*Restart, error) {
	ns, err := benchNamespace(ctx, cluster, "bench-"+string(strategy))
	if err != nil {
		return nil, err
	}
	obs := newObserver(opts.Pods)
	stop := make(chan struct{})
	defer close(stop)
	pods, jobSets, err := watchBench(cluster, ns, obs, stop)
	if err != nil {
		return nil, err
	}

	r := &Restart{Strategy: strategy}
	created := time.Now()
	js := benchJobSet(ns, opts.Pods, opts.PodsPerJob, strategy)
	if err := cluster.Client.Create(ctx, js); err != nil {
		return nil, fmt.Errorf("creating the benchmark's JobSet: %w", err)
	}
	progress("%s: JobSet of %d workers (%d Jobs of %d) created; waiting for every worker to run", strategy, opts.Pods, opts.Pods/opts.PodsPerJob, opts.PodsPerJob)
	if err := waitFor(ctx, obs.started, opts.Timeout, func() string {
		return fmt.Sprintf("%d of %d workers running", len(pods.List()), opts.Pods)
	}); err != nil {
		return nil, fmt.Errorf("waiting for the workers to start: %w", err)
	}
	r.Start = Duration(time.Since(created))
	progress("%s: every worker runs after %s", strategy, r.Start)

	// The JobSet's status settles after the pods run (the barrier's attempt, then conditions).
	current, victim, err := quiesce(ctx, cluster, jobSets, pods, strategy, opts.Timeout)
	if err != nil {
		return nil, err
	}
	before, err := readCounts(ctx, cluster.Clientset)
	if err != nil {
		return nil, err
	}
	agentsBefore := tracker.mark()
	watchBefore, err := procs.shardWatch(ctx)
	if err != nil {
		return nil, err
	}
	if opts.Restarting != nil {
		opts.Restarting(strategy)
	}
	cpuBefore := procs.cpu()
	exitAt := time.Now()
	obs.arm(livePods(pods), current, exitAt)
	profiled := profileAPIServer(ctx, cluster, opts)
	// A restart that fails still waits for the profile, so that nothing writes to
	// opts.APIServerProfile once the benchmark has returned; it is written all the same.
	defer func() { _ = profiled() }()
	if err := cluster.Faults().ExitContainer(ctx, ns, victim, workerContainer, workerExitCode); err != nil {
		return nil, fmt.Errorf("making worker %s/%s exit: %w", ns, victim, err)
	}
	progress("%s: worker of pod %s exited %d; waiting for every worker to run again", strategy, victim, workerExitCode)
	if err := waitFor(ctx, obs.done, opts.Timeout, obs.progress); err != nil {
		r.Milestones = obs.milestones()
		return r, fmt.Errorf("waiting for the group restart: %w", err)
	}
	r.Restart = Duration(time.Since(exitAt))
	r.CPU = procs.since(cpuBefore)
	r.HostBinaries = procs.binaries()
	if r.Shards, err = procs.shards(ctx, cpuBefore, watchBefore); err != nil {
		return r, err
	}
	progress("%s: every worker runs again %s after the exit", strategy, r.Restart)
	if opts.Restarted != nil {
		opts.Restarted(strategy)
	}
	if err := profiled(); err != nil {
		return r, fmt.Errorf("profiling kube-apiserver: %w", err)
	}

	after, err := settleWrites(ctx, cluster, before)
	if err != nil {
		return r, err
	}
	r.Wall = Duration(time.Since(created))
	r.Milestones = obs.milestones()
	obs.mu.Lock()
	r.Replaced = obs.replaced
	obs.mu.Unlock()
	r.account(after.since(before), opts.Pods, bound)
	if opts.KubeletProcesses == 0 { // the processes' agents are not the tracker's
		r.Agents = tracker.since(agentsBefore, *opts.AgentJitter)
	}

	if opts.AgentBinary == "" && opts.KubeletProcesses == 0 { // a host binary's or a process's agents are out of reach
		progress("%s: breaking every agent's watch at once", strategy)
		if r.Herd, err = measureHerd(ctx, cluster, tracker, *opts.AgentJitter, opts.Timeout); err != nil {
			return r, err
		}
		progress("%s: all %d agents watch again %s after the break (%d 429s)", strategy, r.Herd.Agents, r.Herd.Back, r.Herd.Throttled)
	}

	progress("%s: deleting the JobSet and waiting for its pods to go", strategy)
	if err := cleanUp(ctx, cluster, ns, pods, opts.Timeout); err != nil {
		return r, err
	}
	return r, nil
}

// account fills in the writes and throttling counted during the restart.
func (r *Restart) account(d *apiCounts, pods int, bound Bound) {
	r.Writes = d.writes()
	var creates, others int64
	for kind, n := range r.Writes {
		r.WritesTotal += n
		if strings.HasPrefix(kind, "CREATE ") {
			creates += n
		} else {
			others += n
		}
	}
	r.WritesPerPod = float64(r.WritesTotal) / float64(pods)
	r.Heartbeats = d.heartbeats()
	if bound.CreatesPerSecond > 0 && bound.PatchesPerSecond > 0 {
		r.AtBound = Duration((float64(creates)/bound.CreatesPerSecond + float64(others)/bound.PatchesPerSecond) * float64(time.Second))
	}
	if r.AtBound > 0 {
		r.OverBound = r.Restart.Seconds() / r.AtBound.Seconds()
	}
	if bound.Pods > 0 {
		perWrite := float64(bound.CPU.APIServer) / float64(2*bound.Pods)
		r.WritesCPU = Duration(perWrite * float64(r.WritesTotal))
	}
	r.WatchEvents, r.WatchBytes = whole(d.watchEvents), whole(d.watchBytes)
	if t := d.throttledBy(); len(t) > 0 {
		r.Throttled = t
	}
	r.FlowControl = d.flowControl()
}

// watchBench starts informers on the namespace's pods and JobSets, feeding obs, and waits for
// them to sync.
func watchBench(cluster *envtest.Cluster, ns string, obs *observer, stop <-chan struct{}) (cache.Indexer, cache.Indexer, error) {
	// Protobuf, as the in-process components read pods: the benchmark's own watch should cost
	// the machine it measures as little as it can.
	podCfg := rest.CopyConfig(cluster.Config)
	podCfg.ContentType, podCfg.AcceptContentTypes = runtime.ContentTypeProtobuf, runtime.ContentTypeProtobuf+","+runtime.ContentTypeJSON
	podClient, err := kubernetes.NewForConfig(podCfg)
	if err != nil {
		return nil, nil, err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(podClient, 0, informers.WithNamespace(ns),
		informers.WithTransform(crcache.TransformStripManagedFields()))
	podInformer := factory.Core().V1().Pods().Informer()
	if _, err := podInformer.AddEventHandler(obs.podHandler()); err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		return nil, nil, err
	}
	dynFactory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, nil)
	jsInformer := dynFactory.ForResource(jobsetv1alpha2.GroupVersion.WithResource("jobsets")).Informer()
	if _, err := jsInformer.AddEventHandler(obs.jobSetHandler()); err != nil {
		return nil, nil, err
	}
	factory.Start(stop)
	dynFactory.Start(stop)
	if !cache.WaitForCacheSync(stop, podInformer.HasSynced, jsInformer.HasSynced) {
		return nil, nil, fmt.Errorf("the benchmark's informers did not sync")
	}
	return podInformer.GetIndexer(), jsInformer.GetIndexer(), nil
}

// quiesce waits until the JobSet's status holds the running group (in place: the current attempt
// set) and returns it with the name of the pod whose worker the benchmark stops: the first by name.
func quiesce(ctx context.Context, cluster *envtest.Cluster, jobSets, pods cache.Indexer, strategy Strategy, timeout time.Duration) (*jobsetv1alpha2.JobSet, string, error) {
	var js *jobsetv1alpha2.JobSet
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		items := jobSets.List()
		if len(items) != 1 {
			return false, nil
		}
		var err error
		if js, err = toJobSet(items[0]); err != nil {
			return false, err
		}
		return strategy != InPlace || js.Status.CurrentInPlaceRestartAttempt != nil, nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("the JobSet's status never showed the group running: %w", err)
	}
	live := livePods(pods)
	slices.SortFunc(live, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	if len(live) == 0 {
		return nil, "", fmt.Errorf("no pods")
	}
	return js, live[0].Name, nil
}

// livePods returns the indexer's pods that are not being deleted.
func livePods(pods cache.Indexer) []*corev1.Pod {
	var live []*corev1.Pod
	for _, obj := range pods.List() {
		if p := obj.(*corev1.Pod); p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live
}

// settleWrites waits until the writes other than heartbeats pause for settleQuiet (at most
// settleMax) and returns the counts then.
func settleWrites(ctx context.Context, cluster *envtest.Cluster, before *apiCounts) (*apiCounts, error) {
	total := func(c *apiCounts) int64 {
		var n int64
		for _, v := range c.since(before).writes() {
			n += v
		}
		return n
	}
	last, err := readCounts(ctx, cluster.Clientset)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(settleMax)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(settleQuiet):
		}
		now, err := readCounts(ctx, cluster.Clientset)
		if err != nil {
			return nil, err
		}
		if total(now) == total(last) {
			return now, nil
		}
		last = now
	}
	return last, nil
}

// cleanUp deletes the namespace's JobSet and waits for its pods to leave the API.
func cleanUp(ctx context.Context, cluster *envtest.Cluster, ns string, pods cache.Indexer, timeout time.Duration) error {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: jobSetName, Namespace: ns}}
	if err := cluster.Client.Delete(ctx, js, &client.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		return fmt.Errorf("deleting the benchmark's JobSet: %w", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return len(pods.List()) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d pods of namespace %s still exist: %w", len(pods.List()), ns, err)
	}
	return nil
}

// waitFor waits for done, at most timeout; describe says how far things got.
func waitFor(ctx context.Context, done <-chan struct{}, timeout time.Duration, describe func() string) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w (%s)", ctx.Err(), describe())
	case <-timer.C:
		return fmt.Errorf("%w after %s: %s", errTimeout, timeout, describe())
	}
}

// profileAPIServer starts a CPU profile of kube-apiserver over opts.APIServerProfileFor, through
// the apiserver's own /debug/pprof/profile, which --profiling (on by default) serves to the
// cluster's admin. The returned function waits for it, once, and returns what writing it to
// opts.APIServerProfile gave.
func profileAPIServer(ctx context.Context, cluster *envtest.Cluster, opts Options) func() error {
	if opts.APIServerProfile == nil {
		return func() error { return nil }
	}
	out, window := opts.APIServerProfile, cmp.Or(opts.APIServerProfileFor, DefaultAPIServerProfileFor)
	done := make(chan error, 1)
	go func() {
		profile, err := cluster.Clientset.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(int(window.Seconds()))).Timeout(window + time.Minute).DoRaw(ctx)
		if err == nil {
			_, err = out.Write(profile)
		}
		done <- err
	}()
	return sync.OnceValue(func() error { return <-done })
}
