package fakekubelet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/fakekubelet/container"
	"github.com/restartbed/restartbed/fakekubelet/restart"
	"github.com/restartbed/restartbed/fakekubelet/runtime"
	"github.com/restartbed/restartbed/fakekubelet/status"
	"github.com/restartbed/restartbed/timing"
)

// podWorkerCount bounds how many pods are synced at once; syncs never block on a container.
const podWorkerCount = 8

// StatusWorkers bounds the kubelet's concurrent pod status patches: restartbed's own client
// concurrency, at which restartbed bench measures the control plane's write bound.
const StatusWorkers = 16

// uidIndex indexes the pod informer by UID: runtime events name pods by UID.
const uidIndex = "restartbed-uid"

// podState is the kubelet's in-memory state of one pod: what a restart of the kubelet loses.
type podState struct {
	// reasons is the reason cache: why a container is held back (CrashLoopBackOff).
	reasons map[string]status.Waiting
	// backoff is the crash-loop backoff of the pod's containers, keyed by container and image.
	backoff *flowcontrol.Backoff
	// probes holds probe state by container instance ID.
	probes map[string]*probeState
	// stopIssued: instance IDs the kubelet has begun to stop (preStop included).
	stopIssued map[string]bool
	// shutdownSince is when the kubelet began shutting the pod down (deletion or terminal).
	shutdownSince time.Time
}

// pods runs the pods bound to the kubelet's nodes: one sync per pod event, container exit,
// backoff expiry or probe period, on a bounded set of workers.
type pods struct {
	client   kubernetes.Interface
	clock    clock.WithTicker
	timing   timing.Profile
	rules    restart.Rules
	rt       *runtime.Runtime
	status   *status.Manager
	informer cache.SharedIndexInformer
	queue    workqueue.TypedDelayingInterface[types.UID]
	nodes    map[string]*node
	events   *events

	mu     sync.Mutex
	states map[types.UID]*podState
	// ips: the pod IPs in use on each node, and each pod's.
	ips   map[string]map[netip.Addr]types.UID
	podIP map[types.UID]podAddress

	// frozen holds, for the pods of partitioned nodes, the pod as their kubelet last saw it: a
	// kubelet cut off from the apiserver works from that view (see partition.go).
	frozenMu sync.RWMutex
	frozen   map[types.UID]*corev1.Pod

	// background holds preStop hooks in flight.
	background sync.WaitGroup
	ctx        context.Context
}

func (p *pods) onPod(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok || p.nodes[pod.Spec.NodeName] == nil {
		return
	}
	p.queue.Add(pod.UID)
}

// lookup returns the pod with the UID from the informer, or nil once it left the API.
func (p *pods) lookup(uid types.UID) *corev1.Pod {
	objs, err := p.informer.GetIndexer().ByIndex(uidIndex, string(uid))
	if err != nil || len(objs) == 0 {
		return nil
	}
	return objs[0].(*corev1.Pod)
}

func (p *pods) state(uid types.UID) *podState {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.states[uid]
	if st == nil {
		b := flowcontrol.NewBackOff(p.timing.CrashLoopBackOff, p.timing.CrashLoopBackOffMax)
		b.Clock = p.clock
		reset := p.timing.CrashLoopBackOffReset
		b.HasExpiredFunc = func(eventTime, lastUpdate time.Time, _ time.Duration) bool {
			return eventTime.Sub(lastUpdate) > reset
		}
		st = &podState{reasons: map[string]status.Waiting{}, backoff: b, probes: map[string]*probeState{}, stopIssued: map[string]bool{}}
		p.states[uid] = st
	}
	return st
}

// forgetState drops the kubelet's memory of a pod (a kubelet restart does this for all pods).
func (p *pods) forgetState(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.states, uid)
}

// podAddress is a pod's IP and the node whose range it came from.
type podAddress struct {
	node string
	ip   netip.Addr
}

// allocateIP gives the pod the lowest free address of its node's range (.1 is the gateway).
func (p *pods) allocateIP(pod *corev1.Pod) (netip.Addr, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.podIP[pod.UID]; ok {
		return a.ip, nil
	}
	n := p.nodes[pod.Spec.NodeName]
	used := p.ips[n.name]
	if used == nil {
		used = map[netip.Addr]types.UID{}
		p.ips[n.name] = used
	}
	cidr := podCIDR(n.index)
	for ip := cidr.Addr().Next().Next(); cidr.Contains(ip); ip = ip.Next() {
		if _, taken := used[ip]; !taken && ip.As4()[3] != 255 {
			used[ip] = pod.UID
			p.podIP[pod.UID] = podAddress{node: n.name, ip: ip}
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("node %s has no free pod IP in %s", n.name, cidr)
}

func (p *pods) releaseIP(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.podIP[uid]; ok {
		delete(p.ips[a.node], a.ip)
		delete(p.podIP, uid)
	}
}

func (p *pods) run(ctx context.Context) {
	var wg sync.WaitGroup
	for range podWorkerCount {
		wg.Go(func() {
			for {
				uid, shutdown := p.queue.Get()
				if shutdown {
					return
				}
				if err := p.sync(ctx, uid); err != nil && ctx.Err() == nil {
					klog.FromContext(ctx).Error(err, "Pod sync failed; will retry", "podUID", uid)
					p.queue.AddAfter(uid, time.Second)
				}
				p.queue.Done(uid)
			}
		})
	}
	<-ctx.Done()
	p.queue.ShutDown()
	wg.Wait()
}

// sync brings one pod a step closer to what its spec and the kubelet's rules want (the
// kubelet's SyncPod and SyncTerminatingPod, reference §7).
func (p *pods) sync(ctx context.Context, uid types.UID) error {
	pod, unseen := p.view(uid)
	if unseen {
		return nil // bound to a partitioned node after the partition began: its kubelet never heard of it
	}
	if pod == nil {
		p.rt.RemovePod(uid)
		p.status.Forget(uid)
		p.forgetState(uid)
		p.releaseIP(uid)
		return nil
	}
	n := p.nodes[pod.Spec.NodeName]
	if n == nil {
		return nil
	}
	st := p.state(uid)

	if !p.rt.HasSandbox(uid) {
		if pod.DeletionTimestamp != nil || restart.IsTerminal(pod.Status.Phase) {
			// Nothing ever ran here (or a previous kubelet's runtime is gone): finish at once.
			return p.finishDeleted(ctx, pod)
		}
		ip, err := p.allocateIP(pod)
		if err != nil {
			return err
		}
		p.rt.RunSandbox(pod, ip.String())
	}
	rt, _ := p.rt.Status(uid)
	old, ok := p.status.Latest(uid)
	if !ok {
		old = *pod.Status.DeepCopy()
	}
	in := status.Input{Pod: pod, Old: old, Runtime: &rt, HostIP: internalIP(n.index).String(), Rules: p.rules,
		Probes: st, Reasons: st.reasons, Now: p.clock.Now()}

	// A RestartAllContainers cleanup in progress goes on without publishing anything: the
	// kubelet kills and removes the containers within one sync, so the statuses of half-cleaned
	// pods (a target killed with 137 that no rule restarts would read as Failed) never exist.
	if pod.DeletionTimestamp == nil && restartingAll(&old) && !restart.CleanedUp(pod, &rt) {
		p.resetAll(pod, st, &rt)
		return nil
	}
	// A deleted or terminal pod shuts down; so does one whose status just became terminal.
	if pod.DeletionTimestamp == nil && !restart.IsTerminal(pod.Status.Phase) && !restart.IsTerminal(old.Phase) {
		if gen := status.Generate(in); !restart.IsTerminal(gen.Phase) {
			return p.syncRunning(ctx, pod, st, &rt, old, gen)
		}
	}
	return p.syncShutdown(ctx, pod, st, &rt, in)
}

// restartingAll reports whether the status has AllContainersRestarting=True.
func restartingAll(s *corev1.PodStatus) bool {
	return slices.ContainsFunc(s.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.AllContainersRestarting && c.Status == corev1.ConditionTrue
	})
}

// syncRunning publishes the status of a live pod and starts, restarts or resets its containers.
func (p *pods) syncRunning(ctx context.Context, pod *corev1.Pod, st *podState, rt *container.PodStatus, old, gen corev1.PodStatus) error {
	if restartingAll(&gen) {
		// The trigger (a cleanup under way never gets here, see sync): publish it before the
		// cleanup, however short, so that it is seen (X2).
		if err := p.status.SetAndWait(ctx, pod, gen); err != nil {
			return err
		}
		p.resetAll(pod, st, rt)
		return nil
	}
	if restartingAll(&old) {
		// The cleaned-up status (Sync C): a real kubelet publishes it a relist before the
		// restarted containers show, so it too must reach the API before anything starts.
		if err := p.status.SetAndWait(ctx, pod, gen); err != nil {
			return err
		}
	} else {
		p.status.Set(pod, gen)
	}
	p.probe(ctx, pod, st, rt)
	p.startContainers(pod, st, rt)
	return nil
}

// resetAll advances a RestartAllContainers cleanup by one step: every instance of every init and
// regular container is stopped with the short grace and no preStop, one at a time, targets
// before sources, then removed (reference §3.3). Ephemeral containers are left alone.
func (p *pods) resetAll(pod *corev1.Pod, st *podState, rt *container.PodStatus) {
	var targets, sources []*container.Status
	collect := func(containers []corev1.Container) (t, s []*container.Status) {
		for i := range containers {
			c := &containers[i]
			for _, inst := range rt.Instances(c.Name) {
				if inst.State == container.Exited && p.rules.RestartsAll(c, inst.ExitCode) {
					s = append(s, inst)
				} else {
					t = append(t, inst)
				}
			}
		}
		return t, s
	}
	regularTargets, regularSources := collect(pod.Spec.Containers)
	initTargets, initSources := collect(pod.Spec.InitContainers)
	targets = append(regularTargets, initTargets...)
	sources = append(regularSources, initSources...)
	for _, inst := range append(targets, sources...) {
		if inst.State == container.Running {
			if !st.stopIssued[inst.ID] {
				st.stopIssued[inst.ID] = true
				p.events.container(pod, containerSpec(pod, inst.Name), corev1.EventTypeNormal, eventKilling, "killing")
				p.rt.Stop(pod.UID, inst.ID, p.timing.RestartAllKillGrace)
			}
			return // the exit brings the next sync
		}
		_ = p.rt.Remove(pod.UID, inst.ID)
		delete(st.stopIssued, inst.ID)
		delete(st.probes, inst.ID)
	}
	p.queue.Add(pod.UID) // cleaned up: the next sync publishes the cleaned status and starts over
}

// startContainers starts what the kubelet would start now (reference §4.3): the next init
// container, a sidecar gated on its startup probe, then every regular container that should run.
func (p *pods) startContainers(pod *corev1.Pod, st *podState, rt *container.PodStatus) {
	initialized := restart.HasRunningRegular(&pod.Spec, rt)
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		latest := rt.Latest(c.Name)
		if restart.IsSidecar(c) {
			switch {
			case latest == nil || latest.State == container.Exited:
				p.start(pod, st, c, rt)
				if !initialized {
					return
				}
			case c.StartupProbe != nil && !st.Started(latest.ID) && !initialized:
				return // the next container waits for this sidecar's startup probe
			}
			continue
		}
		switch {
		case latest == nil:
			if initialized {
				continue
			}
			p.start(pod, st, c, rt)
			return
		case latest.State == container.Running:
			return
		case latest.ExitCode == 0 && latest.Reason != container.ReasonOOMKilled:
			continue
		case p.rules.ShouldRestart(c, pod.Spec.RestartPolicy, latest.ExitCode):
			p.start(pod, st, c, rt)
			return
		default:
			return // failed for good: the phase is Failed and the next sync shuts the pod down
		}
	}
	anyWillRun := false
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if latest := rt.Latest(c.Name); latest != nil && latest.State == container.Running {
			anyWillRun = true
			continue
		}
		if p.rules.ShouldStart(c, pod, rt) {
			anyWillRun = true
			p.start(pod, st, c, rt)
		}
	}
	if !anyWillRun {
		// No regular container runs or will run again: the sidecars stop too (KillPod); the
		// status that follows is terminal.
		p.stopAll(pod, st, rt, p.podGrace(pod))
	}
}

// start starts c unless its crash-loop backoff holds it back (reference §4.2).
func (p *pods) start(pod *corev1.Pod, st *podState, c *corev1.Container, rt *container.PodStatus) {
	key := c.Name + "@" + c.Image
	if latest := rt.Latest(c.Name); latest != nil && latest.State == container.Exited {
		if st.backoff.IsInBackOffSince(key, latest.FinishedAt) {
			delay := st.backoff.Get(key)
			st.reasons[c.Name] = status.Waiting{Reason: status.ReasonCrashLoopBackOff,
				Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", delay, c.Name, podRef(pod))}
			p.events.container(pod, c, corev1.EventTypeWarning, eventBackOff, "Back-off restarting failed container %s in pod %s", c.Name, podRef(pod))
			p.queue.AddAfter(pod.UID, latest.FinishedAt.Add(delay).Sub(p.clock.Now()))
			return
		}
		st.backoff.Next(key, latest.FinishedAt)
	}
	delete(st.reasons, c.Name)
	env, err := runtime.EnvOf(pod, c, rt.IP, p.hostIP(pod))
	if err != nil {
		klog.FromContext(p.ctx).Info("Starting the container with part of its environment", "pod", klog.KObj(pod), "container", c.Name, "problem", err.Error())
	}
	if inst, err := p.rt.Start(pod, c, env); err != nil {
		klog.FromContext(p.ctx).V(2).Info("Container failed to start", "pod", klog.KObj(pod), "container", c.Name, "err", err)
		p.events.container(pod, c, corev1.EventTypeWarning, eventFailed, "Error: %s", inst.Message)
	}

}

func (p *pods) hostIP(pod *corev1.Pod) string {
	if n := p.nodes[pod.Spec.NodeName]; n != nil {
		return internalIP(n.index).String()
	}
	return ""
}

// podGrace is the pod's termination grace period.
func (p *pods) podGrace(pod *corev1.Pod) time.Duration {
	if pod.DeletionGracePeriodSeconds != nil {
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return corev1.DefaultTerminationGracePeriodSeconds * time.Second
}

// stopAll stops the pod's running containers as the kubelet kills a pod: regular containers (and
// a running regular init container) first, each after its preStop hook, then the sidecars one at
// a time in reverse order; grace counts from the start of the shutdown.
func (p *pods) stopAll(pod *corev1.Pod, st *podState, rt *container.PodStatus, grace time.Duration) {
	if st.shutdownSince.IsZero() {
		st.shutdownSince = p.clock.Now()
	}
	remaining := max(grace-p.clock.Since(st.shutdownSince), p.timing.RestartAllKillGrace)
	var sidecars []*corev1.Container
	mainRunning := false
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			c := &list[i]
			if restart.IsSidecar(c) {
				sidecars = append(sidecars, c)
				continue
			}
			if latest := rt.Latest(c.Name); latest != nil && latest.State == container.Running {
				mainRunning = true
				p.stopOne(pod, st, c, latest, remaining, "")
			}
		}
	}
	if mainRunning {
		return
	}
	for i := len(sidecars) - 1; i >= 0; i-- {
		if latest := rt.Latest(sidecars[i].Name); latest != nil && latest.State == container.Running {
			p.stopOne(pod, st, sidecars[i], latest, remaining, "")
			return
		}
	}
}

// containerSpec returns the pod's init or regular container with the name.
func containerSpec(pod *corev1.Pod, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return &corev1.Container{Name: name}
}

// stopOne runs the container's preStop hook (best effort, within the grace) and then stops it.
func (p *pods) stopOne(pod *corev1.Pod, st *podState, c *corev1.Container, inst *container.Status, grace time.Duration, message string) {
	if st.stopIssued[inst.ID] {
		return
	}
	st.stopIssued[inst.ID] = true
	if message == "" {
		message = "Stopping container " + c.Name
	}
	p.events.container(pod, c, corev1.EventTypeNormal, eventKilling, "%s", message)
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		p.rt.Stop(pod.UID, inst.ID, grace)
		return
	}
	hook := c.Lifecycle.PreStop
	p.background.Go(func() {
		started := p.clock.Now()
		ctx, cancel := context.WithCancel(p.ctx)
		defer cancel()
		timer := p.clock.NewTimer(grace)
		defer timer.Stop()
		go func() {
			select {
			case <-timer.C():
				cancel()
			case <-ctx.Done():
			}
		}()
		p.runHandler(ctx, pod, c, hook)
		p.rt.Stop(pod.UID, inst.ID, max(grace-p.clock.Since(started), p.timing.RestartAllKillGrace))
	})
}

// syncShutdown stops a deleted or terminal pod's containers and, once all have stopped,
// publishes its final status; a deleted pod is then removed from the API.
func (p *pods) syncShutdown(ctx context.Context, pod *corev1.Pod, st *podState, rt *container.PodStatus, in status.Input) error {
	running := slices.ContainsFunc(rt.Containers, func(s container.Status) bool { return s.State == container.Running })
	if running {
		p.status.Set(pod, status.Generate(in))
		p.stopAll(pod, st, rt, p.podGrace(pod))
		return nil
	}
	p.rt.StopSandbox(pod.UID)
	p.releaseIP(pod.UID) // a stopped sandbox gives its address back; the status keeps showing it
	rtNow, _ := p.rt.Status(pod.UID)
	in.Runtime = &rtNow
	in.Terminating = true
	final := status.Generate(in)
	if pod.DeletionTimestamp == nil {
		p.status.Set(pod, final)
		return nil
	}
	if err := p.status.SetAndWait(ctx, pod, final); err != nil && !errors.Is(err, status.ErrPodGone) {
		return err
	}
	return p.finishDeleted(ctx, pod)
}

// finishDeleted removes a deleted pod whose containers have all stopped: delete with grace 0,
// guarded by its UID, as the kubelet's status manager does.
func (p *pods) finishDeleted(ctx context.Context, pod *corev1.Pod) error {
	if pod.DeletionTimestamp == nil {
		return nil // terminal before this kubelet ran anything: nothing to do
	}
	if p.cutOff(pod.UID) {
		return nil // the deletion is finished when the node can reach the apiserver again
	}
	err := p.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	p.rt.RemovePod(pod.UID)
	p.releaseIP(pod.UID)
	return nil
}
