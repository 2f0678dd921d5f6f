package podactions

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/restartbed/restartbed/fakekubelet/container"
	"github.com/restartbed/restartbed/fakekubelet/release"
	"github.com/restartbed/restartbed/fakekubelet/restart"
	"github.com/restartbed/restartbed/fakekubelet/status"
)

// ProbeResults are what the prober recorded, by container instance ID.
type ProbeResults interface {
	status.ProbeResults
	// Failed returns "liveness" or "startup" when that probe of the instance has failed as often
	// as its failureThreshold allows: the instance is to be killed.
	Failed(id string) string
}

// BackoffState is what a container's crash-loop backoff says, at the time of the sync, of a
// restart after one exited instance.
type BackoffState struct {
	// Delay is the entry's current delay.
	Delay time.Duration
	// Held: the restart is still held back (flowcontrol.Backoff.IsInBackOffSince).
	Held bool
}

// BackoffKey is c's crash-loop backoff entry. The kubelet keys its one backoff by pod, container
// name and image (GetStableKey in pkg/kubelet/kuberuntime/kuberuntime_manager.go); each pod has
// its own here, so the name and image suffice.
func BackoffKey(c *corev1.Container) string { return c.Name + "@" + c.Image }

// Input is everything one sync of a pod reads.
type Input struct {
	// Pod is the pod as the kubelet sees it.
	Pod *corev1.Pod
	// Old is the status the kubelet last generated for the pod, or the API's.
	Old corev1.PodStatus
	// Status is the API status the pod worker generated from Runtime for this sync, before the
	// plan (GenerateStatus), as the kubelet's syncPod generates it before SyncPod plans: the plan
	// publishes it or not. Unused when Runtime is nil.
	Status corev1.PodStatus
	// Runtime is the pod's sandbox and container instances; nil when it has no sandbox.
	Runtime *container.PodStatus
	// HostIP is the node's IP.
	HostIP  string
	Rules   restart.Rules
	Release release.Kubelet
	Probes  ProbeResults
	// KubeletRestart is what the kubelet's last start keeps of running containers' status.
	KubeletRestart status.KubeletRestart
	// Reasons is the reason cache: why a container was last held back, by name.
	Reasons map[string]status.Waiting
	// Backoff is the crash-loop backoff at Now after each exited instance of Runtime, by
	// instance ID, for the entry of its container's current definition (BackoffKey); an
	// instance it lacks holds no start back.
	Backoff map[string]BackoffState
	// Stopping holds the instance IDs the kubelet has already begun to stop.
	Stopping map[string]bool
	// Killing holds the instances a live pod's sync killed (Kill.HoldsSync), by ID.
	Killing map[string]bool
	// PostStart holds the instances whose postStart hook has not succeeded, by ID: true while it
	// runs, false once it failed.
	PostStart map[string]bool
	// Pulling: a start of the sync under way waits for its image's pull (SyncPod pulls inside
	// startContainer).
	Pulling bool
	// Restarts are the starts a sync decided together with its kills (Kill.Restart, Deferred),
	// by container name, whose containers have not started since.
	Restarts map[string]Restart
	// Phase is the pod's phase as its worker kept it when the sync began.
	Phase Phase
	// TerminatingAt is when the pod entered TerminatingPod, zero before.
	TerminatingAt time.Time
	// MinGrace is the least grace a stop gets (a RestartAllContainers cleanup's grace, and
	// the floor of a termination whose grace has run out).
	MinGrace time.Duration
	Now      time.Time
}

// Plan is one sync of the pod as the pod worker makes it: the pod's API status generated from
// the runtime's view first, as the kubelet's sync functions generate it before they act (with
// terminating for a terminated pod), and then Compute on it. in.Status holds the status after.
func Plan(in *Input) Actions {
	if in.Runtime != nil {
		in.Status = GenerateStatus(*in, in.Runtime, in.Phase == TerminatedPod)
	}
	return Compute(*in)
}

// Compute returns what one sync of the pod does, Input.Status being the status generated for it.
func Compute(in Input) Actions {
	p := planner{in: in, stopping: map[string]bool{}}
	p.compute()
	return p.out
}

type planner struct {
	in  Input
	out Actions
	// stopping: instances stopped before or by this plan.
	stopping map[string]bool
}

// syncPod plans a sync of a running pod (SyncPod): its sandbox, its starts, restarts, kills and
// RestartAllContainers cleanups. It reports whether the status generated for the sync is
// terminal, having planned nothing: the pod terminates (syncPod's isTerminal).
func (p *planner) syncPod() (terminal bool) {
	if p.in.Runtime == nil {
		p.out.CreateSandbox = true
		return false
	}
	if !p.in.Runtime.SandboxReady && p.in.Runtime.SandboxID != "" {
		return p.replaceSandbox()
	}
	// The kubelet pulls a container's image and runs its postStart hook inside SyncPod, and
	// kills what SyncPod decided to kill one after another, waiting for each (killContainer
	// returns once the preStop hook has run and the container has stopped, or the grace is
	// over). Until then the pod's next sync waits: nothing is killed, started or restarted or
	// published; the status changes only by what the probe workers find, as the status manager
	// applies it.
	if p.in.Pulling || p.postStartRunning() || p.killing() {
		return false
	}
	// A RestartAllContainers cleanup in progress goes on without publishing anything: the
	// kubelet kills and removes the containers within one sync, so the statuses of half-cleaned
	// pods (a target killed with 137 that no rule restarts would read as Failed) never exist.
	if restartingAll(&p.in.Old) && !restart.CleanedUp(p.in.Pod, p.in.Runtime) {
		p.cleanUp()
		return false
	}
	// The kubelet restarts a container it killed within one SyncPod, so no status shows it
	// stopped: it starts again before anything is published.
	if p.startRestarts() {
		return false
	}
	if restart.IsTerminal(p.in.Status.Phase) {
		return true
	}
	p.run(p.in.Status)
	return false
}

// replaceSandbox plans a sync of a live pod whose sandbox has stopped under it (a node's reboot,
// crictl stopp): computePodActions' sandbox change. What still runs is killed first. A pod whose
// status is now terminal (restartPolicy Never, or OnFailure with every container succeeded)
// terminates without a new sandbox, as the kubelet kills such a pod instead of creating one.
// Otherwise a new sandbox replaces the old, the init containers' instances are purged
// (purgeInitContainers), and the pod starts again from its first init container; the regular
// containers' exited instances stay, so their restarts go on counting.
func (p *planner) replaceSandbox() (terminal bool) {
	rt := p.in.Runtime
	for i := range rt.Containers {
		if inst := &rt.Containers[i]; inst.State == container.Running {
			p.kill(containerSpec(p.in.Pod, inst.Name), inst, podGrace(p.in.Pod), "", true)
		}
	}
	if len(p.out.Kill) > 0 || p.killing() || running(rt) {
		return false // their exits bring the next sync
	}
	if restart.IsTerminal(p.in.Status.Phase) {
		return true
	}
	p.out.CreateSandbox, p.out.SandboxChanged = true, true
	for i := range p.in.Pod.Spec.InitContainers {
		for _, inst := range rt.Instances(p.in.Pod.Spec.InitContainers[i].Name) {
			p.out.Remove = append(p.out.Remove, inst.ID)
		}
	}
	return false
}

// GenerateStatus generates the pod's API status from rt and the rest of in (package status):
// what Plan does before each plan, with rt the plan's Runtime, and, with terminating, for a
// terminated pod and once a terminating pod's sandbox has stopped (Actions.StopSandbox), as the
// kubelet's syncTerminatingPod generates the final status after its kill.
func GenerateStatus(in Input, rt *container.PodStatus, terminating bool) corev1.PodStatus {
	return status.Generate(status.Input{Pod: in.Pod, Old: in.Old, Runtime: rt, HostIP: in.HostIP, Rules: in.Rules, Release: in.Release,
		Probes: in.Probes, KubeletRestart: in.KubeletRestart, Reasons: in.Reasons, Terminating: terminating, Now: in.Now})
}

// restartingAll reports whether the status has AllContainersRestarting=True.
func restartingAll(s *corev1.PodStatus) bool {
	return slices.ContainsFunc(s.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.AllContainersRestarting && c.Status == corev1.ConditionTrue
	})
}

// run plans a live pod: publish its status, kill what failed its probes, start what should run.
func (p *planner) run(gen corev1.PodStatus) {
	p.out.Status = gen
	if restartingAll(&gen) {
		// The trigger (a cleanup under way never gets here): published before the cleanup,
		// however short, so that it is seen.
		p.out.Publish = PublishAndWait
		p.cleanUp()
		return
	}
	p.out.Publish = PublishAsync
	if restartingAll(&p.in.Old) {
		// The cleaned-up status: a real kubelet publishes it a relist before the restarted
		// containers show, so it too must reach the API before anything starts.
		p.out.Publish = PublishAndWait
	}
	p.killFailedPostStart()
	p.killRedefined()
	p.killProbeFailures()
	kills := len(p.out.Kill)
	p.startContainers()
	if kills > 0 {
		// SyncPod starts what it decided to start only once its kills have returned.
		for i := range p.out.Kill[:kills] {
			p.out.Kill[i].HoldsSync = true
		}
		p.out.Deferred, p.out.Start = p.out.Start, nil
	}
}

// cleanUp advances a RestartAllContainers cleanup by one step: every instance of every init
// and regular container is stopped with the least grace and no preStop, one at a time, targets
// before sources, then removed. Ephemeral containers are left alone.
func (p *planner) cleanUp() {
	pod, rt := p.in.Pod, p.in.Runtime
	collect := func(containers []corev1.Container) (targets, sources []*container.Status) {
		for i := range containers {
			c := &containers[i]
			for _, inst := range rt.Instances(c.Name) {
				if inst.State == container.Exited && p.in.Rules.RestartsAll(c, inst.ExitCode) {
					sources = append(sources, inst)
				} else {
					targets = append(targets, inst)
				}
			}
		}
		return targets, sources
	}
	regularTargets, regularSources := collect(pod.Spec.Containers)
	initTargets, initSources := collect(pod.Spec.InitContainers)
	order := slices.Concat(regularTargets, initTargets, regularSources, initSources)
	for _, inst := range order {
		if inst.State == container.Running {
			p.kill(containerSpec(pod, inst.Name), inst, p.in.MinGrace, "killing", false)
			return // its exit brings the next sync
		}
		p.out.Remove = append(p.out.Remove, inst.ID)
	}
	p.out.Requeue = true // cleaned up: the next sync publishes the cleaned status and starts over
}

// killing reports whether an instance a sync killed is still running.
func (p *planner) killing() bool {
	for id := range p.in.Killing {
		if p.in.Runtime.Running(id) {
			return true
		}
	}
	return false
}

// postStartRunning reports whether a running instance's postStart hook runs.
func (p *planner) postStartRunning() bool {
	for id, running := range p.in.PostStart {
		if running && p.in.Runtime.Running(id) {
			return true
		}
	}
	return false
}

// killFailedPostStart kills the running instances whose postStart hook failed; how the container
// goes on is up to its restart policy (startContainer in pkg/kubelet/kuberuntime).
func (p *planner) killFailedPostStart() {
	for i := range p.in.Runtime.Containers {
		inst := &p.in.Runtime.Containers[i]
		if running, ok := p.in.PostStart[inst.ID]; ok && !running && inst.State == container.Running {
			p.kill(containerSpec(p.in.Pod, inst.Name), inst, podGrace(p.in.Pod), "FailedPostStartHook", true)
		}
	}
}

// killRedefined kills the running instances whose container's definition (its image) changed
// since they were created, to start them again (computePodActions and
// computeInitContainerActions in pkg/kubelet/kuberuntime): regular containers whatever the
// restart policy, sidecars once their startup probe has succeeded. A regular init container is
// never restarted for it.
func (p *planner) killRedefined() {
	pod := p.in.Pod
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		inst := p.in.Runtime.Latest(c.Name)
		if !restart.IsSidecar(c) || !redefined(c, inst) || (c.StartupProbe != nil && !p.started(inst.ID)) {
			continue
		}
		p.killAndRestart(c, inst, podGrace(pod), fmt.Sprintf("Init container %s definition changed", c.Name))
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if inst := p.in.Runtime.Latest(c.Name); redefined(c, inst) {
			p.killAndRestart(c, inst, podGrace(pod), fmt.Sprintf("Container %s definition changed, will be restarted", c.Name))
		}
	}
}

// redefined reports whether inst runs and was created from another definition of c.
func redefined(c *corev1.Container, inst *container.Status) bool {
	return inst != nil && inst.State == container.Running && inst.SpecImage != "" && inst.SpecImage != c.Image
}

// killAndRestart kills inst and restarts its container once it has stopped, as SyncPod kills
// and then starts: the start's backoff is checked now, against the newest instance that had
// exited before (doBackOff); if that holds it back, the container stays stopped, waiting as
// the backoff says.
func (p *planner) killAndRestart(c *corev1.Container, inst *container.Status, grace time.Duration, message string) {
	if !p.kill(c, inst, grace, message, true) {
		return
	}
	k := &p.out.Kill[len(p.out.Kill)-1]
	var prev *container.Status
	for _, s := range p.in.Runtime.Instances(c.Name) {
		if s.State == container.Exited {
			prev = s
			break
		}
	}
	if prev == nil {
		k.Restart = &Restart{}
		return
	}
	if key, held := p.heldBack(c, prev); !held {
		k.Restart = &Restart{BackoffKey: key, BackoffSince: prev.FinishedAt}
	}
}

// startRestarts makes the starts a sync that killed decided (Restarts) once nothing it killed
// runs, and plans nothing else: the sync that follows the starts publishes.
func (p *planner) startRestarts() bool {
	for _, list := range [][]corev1.Container{p.in.Pod.Spec.InitContainers, p.in.Pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			r, ok := p.in.Restarts[c.Name]
			if latest := p.in.Runtime.Latest(c.Name); ok && (latest == nil || latest.State == container.Exited) {
				p.out.Start = append(p.out.Start, Start{Container: c, BackoffKey: r.BackoffKey, BackoffSince: r.BackoffSince})
			}
		}
	}
	if len(p.out.Start) == 0 {
		return false
	}
	p.out.Requeue = true
	return true
}

// killProbeFailures kills the running instances whose liveness or startup probe failed.
func (p *planner) killProbeFailures() {
	pod := p.in.Pod
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			inst := p.in.Runtime.Latest(c.Name)
			if inst == nil || inst.State != container.Running || p.in.Probes == nil {
				continue
			}
			probe := p.in.Probes.Failed(inst.ID)
			if probe == "" {
				continue
			}
			spec := c.LivenessProbe
			if probe == "startup" {
				spec = c.StartupProbe
			}
			grace := podGrace(pod)
			if spec != nil && spec.TerminationGracePeriodSeconds != nil {
				grace = time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
			}
			message := fmt.Sprintf("Container %s failed %s probe", c.Name, probe)
			if p.in.Rules.ShouldRestart(c, pod.Spec.RestartPolicy, container.ExitCodeKilled) {
				p.killAndRestart(c, inst, grace, message+", will be restarted")
				continue
			}
			p.kill(c, inst, grace, message, true)
		}
	}
}

// startContainers starts what the kubelet would start now: the next init container, a sidecar
// gated on its startup probe, then every regular container that should run. When no regular
// container runs or will run again, the pod's containers stop.
func (p *planner) startContainers() {
	pod, rt := p.in.Pod, p.in.Runtime
	initialized := restart.HasRunningRegular(&pod.Spec, rt)
	if p.anyRegularCreated() && !p.anyRegularWillRun() {
		// computePodActions' KillPod: the sidecars stop too, and none is started again. The
		// kubelet kills them all within one SyncPod; here the stops take several syncs, and no
		// sidecar stopped on the way is started again.
		p.stopAll()
		return
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		latest := rt.Latest(c.Name)
		if restart.IsSidecar(c) {
			switch {
			case latest == nil || latest.State == container.Exited:
				p.start(c)
				if !initialized && !p.laterInitCreated(i) {
					return
				}
			case c.StartupProbe != nil && !p.started(latest.ID) && !initialized:
				return // the next container waits for this sidecar's startup probe
			}
			continue
		}
		switch {
		case latest == nil:
			if initialized || p.laterInitCreated(i) {
				// Ran and was removed (crictl rm, the runtime's garbage collection): the
				// kubelet reads the init containers from the last one back, so an earlier one
				// without an instance has completed (computeInitContainerActions).
				continue
			}
			p.start(c)
			return
		case latest.State == container.Running:
			return
		case latest.ExitCode == 0 && latest.Reason != container.ReasonOOMKilled:
			continue
		case p.in.Rules.ShouldRestart(c, pod.Spec.RestartPolicy, latest.ExitCode):
			p.start(c)
			return
		default:
			return // failed for good: the phase is Failed and the pod terminates
		}
	}
	anyWillRun := false
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if latest := rt.Latest(c.Name); latest != nil && latest.State == container.Running {
			anyWillRun = true
			continue
		}
		if p.in.Rules.ShouldStart(c, pod, rt) {
			anyWillRun = true
			p.start(c)
		}
	}
	if !anyWillRun {
		// No regular container runs or will run again: the sidecars stop too (KillPod); the
		// status that follows is terminal.
		p.stopAll()
	}
}

// laterInitCreated reports whether an init container after the i-th has an instance.
func (p *planner) laterInitCreated(i int) bool {
	return slices.ContainsFunc(p.in.Pod.Spec.InitContainers[i+1:], func(c corev1.Container) bool { return p.in.Runtime.Latest(c.Name) != nil })
}

// anyRegularCreated reports whether some regular container has an instance, of any state.
func (p *planner) anyRegularCreated() bool {
	return slices.ContainsFunc(p.in.Pod.Spec.Containers, func(c corev1.Container) bool { return p.in.Runtime.Latest(c.Name) != nil })
}

// anyRegularWillRun reports whether a regular container runs or is to start.
func (p *planner) anyRegularWillRun() bool {
	pod, rt := p.in.Pod, p.in.Runtime
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if latest := rt.Latest(c.Name); (latest != nil && latest.State == container.Running) || p.in.Rules.ShouldStart(c, pod, rt) {
			return true
		}
	}
	return false
}

func (p *planner) started(id string) bool { return p.in.Probes != nil && p.in.Probes.Started(id) }

// start starts c unless its crash-loop backoff holds it back.
func (p *planner) start(c *corev1.Container) {
	latest := p.in.Runtime.Latest(c.Name)
	if latest == nil || latest.State != container.Exited {
		p.out.Start = append(p.out.Start, Start{Container: c})
		return
	}
	if key, held := p.heldBack(c, latest); !held {
		p.out.Start = append(p.out.Start, Start{Container: c, BackoffKey: key, BackoffSince: latest.FinishedAt})
	}
}

// heldBack checks c's crash-loop backoff for a start after the exited instance (doBackOff): it
// returns the backoff entry and, when the backoff holds the start back, plans the HoldBack.
func (p *planner) heldBack(c *corev1.Container, exited *container.Status) (key string, held bool) {
	key = BackoffKey(c)
	b := p.in.Backoff[exited.ID]
	if !b.Held {
		return key, false
	}
	p.out.HoldBack = append(p.out.HoldBack, HoldBack{Container: c, Retry: exited.FinishedAt.Add(b.Delay).Sub(p.in.Now),
		Waiting: status.Waiting{Reason: status.ReasonCrashLoopBackOff,
			Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", b.Delay, c.Name, PodRef(p.in.Pod))}})
	return key, true
}

// kill stops the instance unless the kubelet already is stopping it; it reports whether it
// planned a Kill.
func (p *planner) kill(c *corev1.Container, inst *container.Status, grace time.Duration, message string, preStop bool) bool {
	if p.in.Stopping[inst.ID] || p.stopping[inst.ID] {
		return false
	}
	p.stopping[inst.ID] = true
	if message == "" {
		message = "Stopping container " + c.Name
	}
	p.out.Kill = append(p.out.Kill, Kill{Container: c, ID: inst.ID, Grace: grace, Message: message, PreStop: preStop})
	return true
}

// podGrace is the pod's termination grace period.
func podGrace(pod *corev1.Pod) time.Duration {
	if pod.DeletionGracePeriodSeconds != nil {
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return corev1.DefaultTerminationGracePeriodSeconds * time.Second
}

// PodRef renders a pod as the kubelet's messages do: name_namespace(uid).
func PodRef(pod *corev1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}
