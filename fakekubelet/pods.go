package fakekubelet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/fakekubelet/container"
	"github.com/restartbed/restartbed/fakekubelet/images"
	"github.com/restartbed/restartbed/fakekubelet/kubeletconfig"
	"github.com/restartbed/restartbed/fakekubelet/nodes"
	"github.com/restartbed/restartbed/fakekubelet/pleg"
	"github.com/restartbed/restartbed/fakekubelet/podactions"
	"github.com/restartbed/restartbed/fakekubelet/prober"
	"github.com/restartbed/restartbed/fakekubelet/release"
	"github.com/restartbed/restartbed/fakekubelet/restart"
	"github.com/restartbed/restartbed/fakekubelet/runtime"
	"github.com/restartbed/restartbed/fakekubelet/status"
	"github.com/restartbed/restartbed/fakekubelet/token"
	"github.com/restartbed/restartbed/timing"
)

// podWorkerCount bounds how many pods are synced at once; syncs never block on a container.
const podWorkerCount = 8

// StatusWorkers bounds the kubelet's concurrent pod status patches: restartbed's own client
// concurrency, at which restartbed bench measures the control plane's write bound.
const StatusWorkers = 16

// podState is the kubelet's in-memory state of one pod: what a restart of the kubelet loses.
type podState struct {
	// reasons is the reason cache: why a container is held back (CrashLoopBackOff).
	reasons map[string]status.Waiting
	// backoff is the crash-loop backoff of the pod's containers, keyed by container and image.
	backoff *flowcontrol.Backoff
	// probing: the pod's probe workers were added (its first SyncPod since the kubelet started).
	probing bool
	// stopIssued: instance IDs the kubelet has begun to stop (preStop included).
	stopIssued map[string]bool
	// killing: the instances of stopIssued that a live pod's sync killed; its syncs wait for them.
	killing map[string]bool
	// restarts: the starts decided with a sync's kills (Kill.Restart, Actions.Deferred), by
	// container name, until their containers start.
	restarts map[string]podactions.Restart
	// phase is where the pod is in its worker (podactions.Phase); terminatingAt is when it
	// entered TerminatingPod. The plans move it (advance).
	phase         podactions.Phase
	terminatingAt time.Time
	// lastSync is when the pod's last SyncPod ended: its next one waits for a relist that
	// began after it (the pod worker's lastSyncTime).
	lastSync time.Time
	// goesOn: the pod's last sync was one step of a SyncPod still under way, waiting for an
	// instance it stopped or a postStart hook it started (endSync). Read by the runtime's
	// notifications, hence atomic.
	goesOn atomic.Bool
	// acted: the sync under way killed or started a postStart hook (actionBegins).
	acted bool
	// remount: a ConfigMap or Secret the pod projects changed, or its tokens are due; the next
	// sync projects its volumes again (remount). Set from informers, hence atomic.
	remount atomic.Bool
	// pulling: a start waits for its image's pull; cleared when the pull ends (pulled).
	pulling atomic.Bool
}

// pods runs the pods bound to the kubelet's nodes: one sync per pod event, container exit,
// backoff expiry or probe period, on a bounded set of workers.
type pods struct {
	// ids are the nodes' kubelets' clients.
	ids    *identities
	clock  clock.WithTicker
	timing timing.Profile
	// config is what a node's kubelet took from its configuration file at its last start.
	config  func(node string) kubeletconfig.Settings
	rules   restart.Rules
	release release.Kubelet
	// changeStatusOnRestart is the ChangeContainerStatusOnKubeletRestart gate (status.KubeletRestart).
	changeStatusOnRestart bool
	rt                    *runtime.Runtime
	// pleg is the runtime as the pod workers see it: the last relist's.
	pleg   *pleg.PLEG
	prober *prober.Manager
	status *status.Manager
	// watch feeds the pods of the API into its store (podwatch.go).
	watch  *podWatch
	queue  workqueue.TypedDelayingInterface[types.UID]
	nodes  *nodes.Set
	events *events
	// sources give the ConfigMaps and Secrets containers' environments refer to.
	sources runtime.Sources
	// tokens is the token cache the sources' tokens come from; a deleted pod's are dropped.
	tokens *token.Manager
	// images are the nodes' images: a start finds its image there or pulls it.
	images *images.Manager

	mu     sync.Mutex
	states map[types.UID]*podState
	// started is when the kubelet started; restarted, when a node's kubelet restarted since.
	started   time.Time
	restarted map[string]time.Time
	// ips: the pod IPs in use on each node, and each pod's.
	ips   map[string]map[netip.Addr]types.UID
	podIP map[types.UID]podAddress

	// frozen holds, for the pods of partitioned nodes, the pod as their kubelet last saw it: a
	// kubelet cut off from the apiserver works from that view (see partition.go).
	frozenMu sync.RWMutex
	frozen   map[types.UID]*corev1.Pod

	// background holds lifecycle hooks in flight.
	background sync.WaitGroup
	hooks      hooks
}

func (p *pods) onPod(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok || p.nodes.Get(pod.Spec.NodeName) == nil {
		return
	}
	p.queue.Add(pod.UID)
}

// lookup returns the pod with the UID from the informer, or nil once it left the API.
func (p *pods) lookup(uid types.UID) *corev1.Pod {
	objs, err := p.watch.store.ByIndex(uidIndex, string(uid))
	if err != nil || len(objs) == 0 {
		return nil
	}
	return objs[0].(*corev1.Pod)
}

// known is the pod's state if its worker has synced it, else nil; it creates none.
func (p *pods) known(uid types.UID) *podState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.states[uid]
}

// state is the pod's state, made at its first sync on the node, with the crash-loop backoff of
// the node's kubelet's configuration.
func (p *pods) state(uid types.UID, node string) *podState {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.states[uid]
	if st == nil {
		b := flowcontrol.NewBackOff(p.config(node).CrashLoopBackOff(p.timing))
		b.Clock = p.clock
		reset := p.timing.CrashLoopBackOffReset
		b.HasExpiredFunc = func(eventTime, lastUpdate time.Time, _ time.Duration) bool {
			return eventTime.Sub(lastUpdate) > reset
		}
		st = &podState{reasons: map[string]status.Waiting{}, backoff: b, stopIssued: map[string]bool{},
			killing: map[string]bool{}, restarts: map[string]podactions.Restart{}}
		p.states[uid] = st
	}
	return st
}

// teardown kills the pod's containers and forgets it: sandbox, status, state and IP.
func (p *pods) teardown(uid types.UID) {
	p.rt.RemovePod(uid)
	p.images.ForgetPod(uid)
	p.status.Forget(uid)
	p.forgetState(uid)
	p.releaseIP(uid)
}

// kubeletStopped reports whether the kubelet of the pod's node is stopped: the node the API binds
// it to or, for a pod gone from the API, the node its sandbox runs on.
func (p *pods) kubeletStopped(pod *corev1.Pod, uid types.UID) bool {
	node := ""
	if pod != nil {
		node = pod.Spec.NodeName
	} else {
		node, _ = p.rt.NodeOf(uid)
	}
	n := p.nodes.Get(node)
	return n != nil && n.KubeletStopped()
}

// silenced reports whether the pod's statuses must wait: its kubelet is cut off from the
// apiserver, or stopped.
func (p *pods) silenced(uid types.UID) bool {
	return p.cutOff(uid) || p.kubeletStopped(p.lookup(uid), uid)
}

// forgetState drops the kubelet's memory of a pod, its probe workers and their results (a
// kubelet restart does this for all pods).
func (p *pods) forgetState(uid types.UID) {
	p.prober.RemovePod(uid)
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.states, uid)
}

// kubeletRestarted records that the node's kubelet restarted now.
func (p *pods) kubeletRestarted(node string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.restarted[node] = p.clock.Now()
}

// restartKeeps is what the node's kubelet's last start keeps of its running containers' status.
func (p *pods) restartKeeps(node string) status.KubeletRestart {
	return status.KubeletRestart{Start: p.kubeletStart(node), ChangeStatus: p.changeStatusOnRestart}
}

// kubeletStart is when the node's kubelet last started.
func (p *pods) kubeletStart(node string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.restarted[node]; ok {
		return t
	}
	return p.started
}

// sandboxIP is the pod's IP while it has a sandbox, "" otherwise.
func (p *pods) sandboxIP(uid types.UID) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.podIP[uid]; ok {
		return a.ip.String()
	}
	return ""
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
	n := p.nodes.Get(pod.Spec.NodeName)
	used := p.ips[n.Name()]
	if used == nil {
		used = map[netip.Addr]types.UID{}
		p.ips[n.Name()] = used
	}
	cidr := n.PodCIDR()
	for ip := cidr.Addr().Next().Next(); cidr.Contains(ip); ip = ip.Next() {
		if _, taken := used[ip]; !taken && ip.As4()[3] != 255 {
			used[ip] = pod.UID
			p.podIP[pod.UID] = podAddress{node: n.Name(), ip: ip}
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("node %s has no free pod IP in %s", n.Name(), cidr)
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

// sync runs one sync of a pod: package podactions decides what it does, apply does it.
func (p *pods) sync(ctx context.Context, uid types.UID) error {
	pod, unseen := p.view(uid)
	if unseen {
		return nil // bound to a partitioned node after the partition began: its kubelet never heard of it
	}
	if p.kubeletStopped(pod, uid) {
		return nil // its kubelet is not running; StartKubelet syncs every pod of the node again
	}
	var n *nodes.Node
	if pod != nil {
		n = p.nodes.Get(pod.Spec.NodeName)
	}
	if n == nil {
		// Gone from the API, or its node released (adopt.go): its containers die with it.
		p.teardown(uid)
		return nil
	}
	st := p.state(uid, n.Name())
	var rt *container.PodStatus
	if st.goesOn.Load() {
		// A step of a SyncPod under way: the kubelet's SyncPod sees its own kills and hooks end.
		rt = p.liveStatus(uid)
	} else {
		var fresh bool
		if rt, fresh = p.pleg.Status(uid, st.lastSync); !fresh {
			// The next relist brings the sync; what the probes found is published meanwhile.
			p.publishProbeResults(pod, n.InternalIP().String())
			return nil
		}
	}
	if st.remount.Swap(false) && st.phase != podactions.TerminatedPod {
		p.refreshVolumes(ctx, pod) // a terminated pod's volumes are unmounted: nothing to refresh
	}
	in := p.input(pod, st, n, rt)
	defer func() { p.endSync(st, in.Runtime) }()
	actions := podactions.Plan(&in)
	if actions.CreateSandbox {
		ip, err := p.allocateIP(pod)
		if err != nil {
			return err
		}
		if actions.SandboxChanged {
			p.events.pod(pod, corev1.EventTypeNormal, eventSandboxChanged, "Pod sandbox changed, it will be killed and re-created.")
			p.remove(ctx, pod, st, actions.Remove)
		}
		if err := p.rt.RunSandbox(ctx, pod, ip.String()); err != nil {
			// The kubelet publishes the pod's status, then waits for its volumes: the
			// containers stay ContainerCreating and the sync is tried again after the back-off.
			p.releaseIP(pod.UID)
			p.events.pod(pod, corev1.EventTypeWarning, eventFailedMount, "%s", err)
			p.queue.AddAfter(pod.UID, p.timing.SyncErrorBackOff)
			in.Runtime = &container.PodStatus{UID: pod.UID} // no sandbox, nothing created
			waiting := podactions.Plan(&in)
			return p.apply(ctx, pod, st, &in, &podactions.Actions{Publish: waiting.Publish, Status: waiting.Status, Phase: waiting.Phase})
		}
		// SyncPod reads the sandbox it just made from the runtime, not from the PLEG.
		in = p.input(pod, st, n, p.liveStatus(uid))
		actions = podactions.Plan(&in)
	}
	return p.apply(ctx, pod, st, &in, &actions)
}

// setStatus hands the status manager the pod's new status, and the probe workers too: a
// readiness worker whose container now shows started probes at once.
func (p *pods) setStatus(pod *corev1.Pod, s corev1.PodStatus) {
	p.status.Set(pod, s)
	p.prober.StatusSet(pod.UID, &s)
}

// liveStatus is the runtime's snapshot of the pod now, nil when it has neither sandbox nor
// instance.
func (p *pods) liveStatus(uid types.UID) *container.PodStatus {
	if s, ok := p.rt.Status(uid); ok {
		return &s
	}
	return nil
}

// endSync ends one sync of the pod, whose plan saw the pod's instances as rt. The kubelet's
// SyncPod kills the containers it decided to kill and waits for each, and runs a started
// container's postStart hook before it goes on; restartbed's pod workers never block on a
// container, so such a SyncPod is several syncs. A sync that killed or started a hook, and one
// that saw an instance the kubelet stopped still running or a hook running, is a step of a
// SyncPod that goes on: the next step runs on the runtime's live view, brought by the instance's
// exit or the hook's end, without waiting for a relist. Otherwise the SyncPod has ended, and the
// pod's next sync waits for a relist that began after it.
func (p *pods) endSync(st *podState, rt *container.PodStatus) {
	acted := st.acted
	st.acted = false
	switch {
	case acted:
		// goesOn was set before the kill or the hook began, so their end brings the next step
		// even if it came before now.
	case p.syncGoesOn(st, rt):
		st.goesOn.Store(true)
	default:
		st.goesOn.Store(false)
		st.lastSync = p.clock.Now()
	}
}

// actionBegins marks the pod's sync as one step of a SyncPod that goes on (endSync), before the
// kill or hook that makes it so begins: the runtime's notification of its end then brings the
// next step however soon it comes.
func (st *podState) actionBegins() {
	st.acted = true
	st.goesOn.Store(true)
}

// syncGoesOn reports whether rt has an instance the kubelet stopped still running, or one whose
// postStart hook runs.
func (p *pods) syncGoesOn(st *podState, rt *container.PodStatus) bool {
	for id := range st.stopIssued {
		if rt.Running(id) {
			return true
		}
	}
	for _, running := range p.hooks.of(rt) {
		if running {
			return true
		}
	}
	return false
}

// pulled is the images' report that a pull a start of the pod waited for has ended: the sync
// under way goes on (endSync), starting the container or showing why it cannot.
func (p *pods) pulled(uid types.UID) {
	st := p.known(uid)
	if st != nil {
		st.pulling.Store(false)
	}
	p.queue.Add(uid)
}

// changed is the runtime's notification of a change in the pod: the PLEG's next relist
// inspects it, and a SyncPod under way goes on at once (endSync).
func (p *pods) changed(uid types.UID) {
	p.pleg.Changed(uid)
	st := p.known(uid)
	if st != nil && st.goesOn.Load() {
		p.queue.Add(uid)
	}
}

// input gathers what the pod's sync reads: the runtime's view of the pod (rt), the status
// manager's and the kubelet's memory of it, as values: the plan holds nothing the pod's
// workers, hooks or probes change later.
func (p *pods) input(pod *corev1.Pod, st *podState, n *nodes.Node, rt *container.PodStatus) podactions.Input {
	old, ok := p.status.Latest(pod.UID)
	if !ok {
		old = *pod.Status.DeepCopy()
	}
	for id := range st.killing {
		if !rt.Running(id) {
			delete(st.killing, id) // stopped: the sync that killed it has returned
		}
	}
	return podactions.Input{Pod: pod, Old: old, Runtime: rt, HostIP: n.InternalIP().String(), Rules: p.rules,
		KubeletRestart: p.restartKeeps(pod.Spec.NodeName),
		Release:        p.release, Probes: p.prober.Results(pod.UID), Reasons: cloneNonEmpty(st.reasons), Backoff: backoffAfter(pod, rt, st.backoff),
		Stopping: cloneNonEmpty(st.stopIssued), Killing: cloneNonEmpty(st.killing), Restarts: cloneNonEmpty(st.restarts), PostStart: p.hooks.of(rt), Pulling: st.pulling.Load(),
		Phase: st.phase, TerminatingAt: st.terminatingAt, MinGrace: p.timing.RestartAllKillGrace, Now: p.clock.Now()}
}

// cloneNonEmpty copies m, or returns nil when it is empty (the common case, on every sync).
func cloneNonEmpty[K comparable, V any](m map[K]V) map[K]V {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

// backoffAfter reads the pod's crash-loop backoff for a start after each exited instance, so
// that the plan reads values and no clock.
func backoffAfter(pod *corev1.Pod, rt *container.PodStatus, b *flowcontrol.Backoff) map[string]podactions.BackoffState {
	if rt == nil {
		return nil
	}
	var out map[string]podactions.BackoffState
	for i := range rt.Containers {
		inst := &rt.Containers[i]
		if inst.State != container.Exited {
			continue
		}
		c := container.SpecOf(pod, inst.Name)
		if c == nil {
			continue // an ephemeral container, or one the spec no longer has: never restarted
		}
		if out == nil {
			out = map[string]podactions.BackoffState{}
		}
		key := podactions.BackoffKey(c)
		out[inst.ID] = podactions.BackoffState{Delay: b.Get(key), Held: b.IsInBackOffSince(key, inst.FinishedAt)}
	}
	return out
}

// remove removes the pod's instances with the IDs from the runtime.
func (p *pods) remove(ctx context.Context, pod *corev1.Pod, st *podState, ids []string) {
	for _, id := range ids {
		if err := p.rt.Remove(pod.UID, id); err != nil {
			// The plan removes exited instances only; the runtime refuses a running one, which
			// keeps its bookkeeping, as the kubelet's container GC logs and tries again later.
			klog.FromContext(ctx).Error(err, "Failed to remove container", "pod", klog.KObj(pod), "containerID", id)
			continue
		}
		delete(st.stopIssued, id)
		delete(st.killing, id)
	}
}

// apply does what podactions planned for the pod, in the order Actions gives; in is what the
// plan was made on.
func (p *pods) apply(ctx context.Context, pod *corev1.Pod, st *podState, in *podactions.Input, a *podactions.Actions) error {
	rt := in.Runtime
	if a.StopSandbox {
		p.rt.StopSandbox(pod.UID)
		p.releaseIP(pod.UID) // a stopped sandbox gives its address back; the status keeps showing it
		// The final status, from the runtime as it is now, as syncTerminatingPod generates it
		// after its kill.
		stopped := p.liveStatus(pod.UID)
		if stopped == nil {
			stopped = &container.PodStatus{UID: pod.UID}
		}
		a.Status = podactions.GenerateStatus(*in, stopped, true)
	}
	switch a.Publish {
	case podactions.PublishNone:
		p.publishProbeResults(pod, in.HostIP)
	case podactions.PublishAsync:
		p.setStatus(pod, a.Status)
	case podactions.PublishAndWait:
		err := p.status.SetAndWait(ctx, pod, a.Status)
		gone := a.FinishDeletion && errors.Is(err, status.ErrPodGone) // left the API meanwhile: nothing more to publish
		if err != nil && !gone {
			return err
		}
		p.prober.StatusSet(pod.UID, &a.Status)
	}
	p.remove(ctx, pod, st, a.Remove)
	p.advance(pod, st, a.Phase)
	for _, k := range a.Kill {
		p.kill(ctx, pod, st, k)
	}
	for _, h := range a.HoldBack {
		st.reasons[h.Container.Name] = h.Waiting
		p.events.container(pod, h.Container, corev1.EventTypeWarning, eventBackOff, "Back-off restarting failed container %s in pod %s",
			h.Container.Name, podactions.PodRef(pod))
	}
	if len(a.HoldBack) > 0 {
		p.queue.AddAfter(pod.UID, a.RetryAfter())
	}
	for _, s := range a.Deferred {
		st.restarts[s.Container.Name] = podactions.Restart{BackoffKey: s.BackoffKey, BackoffSince: s.BackoffSince}
	}
	for _, s := range a.Start {
		if p.start(ctx, pod, st, rt, s) {
			// SyncPod starts its containers one after another and a postStart hook holds the
			// next one back; the hook's end brings the sync that plans the rest.
			break
		}
	}
	if a.FinishDeletion {
		if err := p.finishDeleted(ctx, pod); err != nil {
			return err
		}
	}
	if a.Requeue {
		p.queue.Add(pod.UID)
	}
	return nil
}

// start starts a container the plan starts, once its image is present; a restart advances its
// crash-loop backoff. It reports whether the sync's next starts wait: for the image's pull or
// for the container's postStart hook.
func (p *pods) start(ctx context.Context, pod *corev1.Pod, st *podState, rt *container.PodStatus, s podactions.Start) bool {
	c := s.Container
	// Set before the pull is asked for: its end (pulled), which clears it, may come at once.
	st.pulling.Store(true)
	img := p.images.Ensure(pod.Spec.NodeName, pod, c)
	for _, e := range img.Events {
		p.events.container(pod, c, e.Type, e.Reason, "%s", e.Message)
	}
	if !img.Pulling {
		st.pulling.Store(false)
	}
	switch {
	case img.Pulling:
		// SyncPod waits in startContainer while the image is pulled; the pull's end brings the
		// sync that starts the container, or shows why it cannot.
		st.actionBegins()
		return true
	case img.Reason != "":
		// The kubelet's reason cache shows the failure; the pod worker syncs the pod again after
		// its back-off period, when the next start finds the image's pull backoff.
		st.reasons[c.Name] = status.Waiting{Reason: img.Reason, Message: img.Message}
		p.queue.AddAfter(pod.UID, p.timing.SyncErrorBackOff)
		return false // the plan starts no container after a regular init container
	}
	if s.BackoffKey != "" {
		st.backoff.Next(s.BackoffKey, s.BackoffSince)
	}
	delete(st.reasons, c.Name)
	delete(st.restarts, c.Name)
	env, err := runtime.EnvOf(ctx, pod, c, rt.IP, p.hostIP(pod), p.sources)
	if err != nil {
		// The kubelet's startContainer fails before creating anything; the pod worker tries the
		// sync again after its back-off period.
		st.reasons[c.Name] = status.Waiting{Reason: status.ReasonCreateContainerConfigError, Message: err.Error()}
		p.events.container(pod, c, corev1.EventTypeWarning, eventFailed, "Error: %s", err)
		p.queue.AddAfter(pod.UID, p.timing.SyncErrorBackOff)
		return false
	}
	inst, err := p.rt.Start(pod, c, env)
	// The runtime created the container either way; a start error is runc's, after the create.
	p.events.container(pod, c, corev1.EventTypeNormal, eventCreated, "Container created")
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Container failed to start", "pod", klog.KObj(pod), "container", c.Name, "err", err)
		p.events.container(pod, c, corev1.EventTypeWarning, eventFailed, "Error: %s", inst.Message)
		return false
	}
	p.events.container(pod, c, corev1.EventTypeNormal, eventStarted, "Container started")
	if c.Lifecycle == nil || c.Lifecycle.PostStart == nil {
		return false
	}
	st.actionBegins()
	p.postStart(ctx, pod, c, inst.ID)
	return true
}

// postStart runs the container's postStart hook on the instance just started. The kubelet runs
// it inside SyncPod, so the pod's syncs wait for it (Input.PostStart); when it fails, the next
// sync kills the instance.
func (p *pods) postStart(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id string) {
	p.hooks.set(id, true)
	p.background.Go(func() {
		if err := <-p.runInContainer(ctx, pod, c, id, c.Lifecycle.PostStart); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).V(2).Info("PostStart hook failed", "pod", klog.KObj(pod), "container", c.Name, "err", err)
			// The event does not carry the hook's output, which could hold secrets.
			p.events.container(pod, c, corev1.EventTypeWarning, eventFailedPostStartHook, "PostStartHook failed")
			p.hooks.set(id, false)
			p.queue.Add(pod.UID)
			select { // the next sync kills it
			case <-p.rt.Done(pod.UID, id):
			case <-ctx.Done(): // the kubelet stops, and kills every container after its goroutines
			}
		}
		p.hooks.forget(id)
		p.queue.Add(pod.UID)
	})
}

// runInContainer runs a lifecycle hook as an exec in the instance runs: until it returns, the
// instance exits or ctx ends, whoever waits for it. The channel yields its error.
func (p *pods) runInContainer(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id string, hook *corev1.LifecycleHandler) <-chan error {
	hookCtx, cancel := context.WithCancel(ctx)
	result := make(chan error, 1)
	go func() {
		defer cancel()
		result <- p.runHandler(hookCtx, pod, c, hook)
	}()
	go func() {
		select {
		case <-p.rt.Done(pod.UID, id):
			cancel()
		case <-hookCtx.Done():
		}
	}()
	return result
}

// hooks are the postStart hooks that have not succeeded, by instance ID: true while running,
// false once failed.
type hooks struct {
	mu      sync.Mutex
	pending map[string]bool
}

func (h *hooks) set(id string, running bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pending == nil {
		h.pending = map[string]bool{}
	}
	h.pending[id] = running
}

func (h *hooks) forget(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.pending, id)
}

// of returns the entries of the pod's instances.
func (h *hooks) of(rt *container.PodStatus) map[string]bool {
	if rt == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.pending) == 0 {
		return nil // the common case, on every sync
	}
	var out map[string]bool
	for _, s := range rt.Containers {
		if running, ok := h.pending[s.ID]; ok {
			if out == nil {
				out = map[string]bool{}
			}
			out[s.ID] = running
		}
	}
	return out
}

func (p *pods) hostIP(pod *corev1.Pod) string {
	if n := p.nodes.Get(pod.Spec.NodeName); n != nil {
		return n.InternalIP().String()
	}
	return ""
}

// kill stops one instance as the plan says (killContainer upstream): its preStop hook first, when
// the plan asks for it and the container has one, then its turn in the pod's termination order
// (Kill.After), both within the grace; then SIGTERM with what is left of it, never less than
// the least grace, and SIGKILL after. A hook that outlives the grace goes on until the
// container dies, as an exec in it does.
func (p *pods) kill(ctx context.Context, pod *corev1.Pod, st *podState, k podactions.Kill) {
	st.actionBegins()
	st.stopIssued[k.ID] = true
	if k.HoldsSync {
		st.killing[k.ID] = true
	}
	if k.Restart != nil {
		st.restarts[k.Container.Name] = *k.Restart
	}
	p.events.container(pod, k.Container, corev1.EventTypeNormal, eventKilling, "%s", k.Message)
	c := k.Container
	var hook *corev1.LifecycleHandler
	if k.PreStop && c.Lifecycle != nil {
		hook = c.Lifecycle.PreStop
	}
	if hook == nil && len(k.After) == 0 {
		p.rt.Stop(pod.UID, k.ID, k.Grace)
		return
	}
	p.background.Go(func() {
		started := p.clock.Now()
		grace := p.clock.NewTimer(k.Grace)
		defer grace.Stop()
		expired := false
		if hook != nil {
			// Best effort, as the kubelet's preStop; it ends with the container, not the grace.
			select {
			case err := <-p.runInContainer(ctx, pod, c, k.ID, hook):
				if err != nil && ctx.Err() == nil {
					klog.FromContext(ctx).V(2).Info("PreStop hook failed", "pod", klog.KObj(pod), "container", c.Name, "err", err)
					p.events.container(pod, c, corev1.EventTypeWarning, eventFailedPreStopHook, "PreStopHook failed")
				}
			case <-grace.C():
				expired = true
			case <-ctx.Done():
				return
			}
		}
		for _, id := range k.After {
			if expired {
				break
			}
			select {
			case <-p.rt.Done(pod.UID, id):
			case <-grace.C():
				expired = true
			case <-ctx.Done():
				return
			}
		}
		p.rt.Stop(pod.UID, k.ID, max(k.Grace-p.clock.Since(started), p.timing.RestartAllKillGrace))
	})
}

// advance moves the pod's worker to the phase the plan ended in (podactions.Phase, whose
// phase.go decides every move), and does what being or entering it does: in SyncPod the pod's
// probe workers are added at its first sync (a pod that terminates gets none); on
// TerminatingPod the liveness and startup probes of the regular containers stop and the
// termination's grace starts to count (syncTerminatingPod, before its kill); on TerminatedPod
// the probe workers end and the pod's tokens are dropped (after the kill, and the volume
// managers' UnregisterPod).
func (p *pods) advance(pod *corev1.Pod, st *podState, to podactions.Phase) {
	if to == podactions.SyncPod && !st.probing {
		st.probing = true
		p.prober.AddPod(pod, p.kubeletStart(pod.Spec.NodeName))
	}
	if to == st.phase {
		return
	}
	if st.phase == podactions.SyncPod {
		st.terminatingAt = p.clock.Now()
		p.prober.Terminating(pod.UID)
	}
	if to == podactions.TerminatedPod {
		p.prober.RemovePod(pod.UID)
		p.tokens.Forget(pod.UID)
	}
	st.phase = to
}

// finishDeleted removes a deleted pod whose containers have all stopped: delete with grace 0,
// guarded by its UID, as the kubelet's status manager does.
func (p *pods) finishDeleted(ctx context.Context, pod *corev1.Pod) error {
	if p.cutOff(pod.UID) {
		return nil // the deletion is finished when the node can reach the apiserver again
	}
	err := p.ids.client(pod.Spec.NodeName).CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	p.rt.RemovePod(pod.UID)
	p.images.ForgetPod(pod.UID)
	p.prober.RemovePod(pod.UID)
	p.tokens.Forget(pod.UID)
	p.releaseIP(pod.UID)
	return nil
}
