package status

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubectl/pkg/util/qos"

	"github.com/restartbed/restartbed/fakekubelet/container"
	"github.com/restartbed/restartbed/fakekubelet/release"
	"github.com/restartbed/restartbed/fakekubelet/restart"
)

// Container state reasons and messages the kubelet writes itself (the runtime's are in package
// runtime); docs/reference/kubelet.md, "Status formats".
const (
	ReasonContainerCreating      = "ContainerCreating"
	ReasonPodInitializing        = "PodInitializing"
	ReasonCrashLoopBackOff       = "CrashLoopBackOff"
	ReasonContainerStatusUnknown = "ContainerStatusUnknown"
	// ReasonCreateContainerConfigError: the container's configuration (its environment's
	// ConfigMaps and Secrets) could not be assembled, so it was not created.
	ReasonCreateContainerConfigError = "CreateContainerConfigError"

	messageRestartingAll = "The container is removed because RestartAllContainers in place"
	messageStatusUnknown = "The container could not be located when the pod was deleted.  The container used to be Running"
)

// Pod condition reasons and messages (docs/reference/kubelet.md, "The condition", "Status formats").
const (
	ReasonUnknownContainerStatuses    = "UnknownContainerStatuses"
	ReasonPodCompleted                = "PodCompleted"
	ReasonPodFailed                   = "PodFailed"
	ReasonContainersNotReady          = "ContainersNotReady"
	ReasonContainersNotInitialized    = "ContainersNotInitialized"
	ReasonReadinessGatesNotReady      = "ReadinessGatesNotReady"
	ReasonRestartAllContainersStarted = "RestartAllContainersStarted"
	ReasonPodSandboxNotReady          = "PodSandboxNotReady"
	messageNoSandbox                  = "no pod sandbox exists"
	messageSandboxNotReady            = "pod sandbox is not ready"
	MessageRestartAllContainers       = "container exited with restart policy rule"
)

// ProbeResults are what the kubelet's probes found, by container instance ID.
type ProbeResults interface {
	// Started: the startup probe of the instance has succeeded.
	Started(id string) bool
	// Ready: the last readiness probe of the instance succeeded.
	Ready(id string) bool
	// StartupKnown and ReadinessKnown: the instance's startup or readiness probe has a result
	// at all, its initial value included.
	StartupKnown(id string) bool
	ReadinessKnown(id string) bool
}

// kubeletRestartGrace: a container that has run since this long before its kubelet started was
// running before the kubelet restarted (the prober's kubeletRestartGracePeriod).
const kubeletRestartGrace = 10 * time.Second

// KubeletRestart is what the status generation keeps of running containers across a restart of
// their kubelet (KEP-5278, the kubelet's behaviour since 1.35 unless the deprecated
// ChangeContainerStatusOnKubeletRestart gate is enabled): until its probes have a result again,
// a running container that had started keeps started, and one that ran before the kubelet
// started is ready — unless it has a readiness probe and the pod was not Ready.
type KubeletRestart struct {
	// Start is when the pod's kubelet (re)started.
	Start time.Time
	// ChangeStatus is the ChangeContainerStatusOnKubeletRestart gate: a restarted kubelet's
	// containers are neither started nor ready until their probes say so, as before 1.35.
	ChangeStatus bool
}

// RanBefore reports whether a container running since startedAt ran before its kubelet
// (re)started, and keeps its status for that.
func (k KubeletRestart) RanBefore(startedAt time.Time) bool {
	return !k.ChangeStatus && !k.Start.IsZero() && !startedAt.IsZero() && startedAt.Before(k.Start.Add(-kubeletRestartGrace))
}

// Waiting is a waiting reason the kubelet remembers for a container (its reason cache): set
// when a start is held back, cleared when the container starts.
type Waiting struct {
	Reason, Message string
}

// Input is everything the kubelet's status generation reads.
type Input struct {
	// Pod is the pod as the API has it.
	Pod *corev1.Pod
	// Old is the last status the kubelet generated for the pod, or the API's after a restart
	// of the kubelet.
	Old corev1.PodStatus
	// Runtime is the pod's sandbox and instances; nil when it has no sandbox.
	Runtime *container.PodStatus
	// HostIP is the node's IP.
	HostIP string
	// Rules are the kubelet's restart rules (and its RestartAllContainers gate).
	Rules restart.Rules
	// Release is the kubelet's release, for what its status generation does differently.
	Release release.Kubelet
	// Probes are the probe results; nil: no probe has a result.
	Probes ProbeResults
	// KubeletRestart is what a restart of the kubelet keeps of running containers' status.
	KubeletRestart KubeletRestart
	// Reasons is the reason cache by container name.
	Reasons map[string]Waiting
	// Terminating: the pod is being shut down (deleted, or terminal); a pod whose containers
	// have all stopped is then Succeeded or Failed even if one would restart.
	Terminating bool
	// Now stamps new conditions and the start time.
	Now time.Time
}

// Generate computes the pod status the 1.35 kubelet publishes for the input (its
// generateAPIPodStatus and the status manager's normalization): container statuses (restart
// counts and lastState), phase, conditions in the kubelet's order with its reasons and messages,
// IPs, QoS class and start time.
func Generate(in Input) corev1.PodStatus {
	pod := in.Pod
	rt := in.Runtime
	if rt == nil {
		rt = &container.PodStatus{UID: pod.UID}
	}
	restarting := in.Rules.ShouldRestartAll(pod, rt, &in.Old)
	hasInit := len(pod.Spec.InitContainers) > 0

	s := corev1.PodStatus{QOSClass: qos.GetPodQOS(pod), ObservedGeneration: pod.Generation}
	if rt.IP != "" {
		s.PodIP = rt.IP
		s.PodIPs = []corev1.PodIP{{IP: rt.IP}}
	}
	g := generator{in: in, rt: rt, restarting: restarting, hasInit: hasInit}
	s.InitContainerStatuses = g.containerStatuses(pod.Spec.InitContainers, in.Old.InitContainerStatuses, true)
	s.ContainerStatuses = g.containerStatuses(pod.Spec.Containers, in.Old.ContainerStatuses, false)
	s.EphemeralContainerStatuses = in.Old.EphemeralContainerStatuses
	g.applyProbes(pod.Spec.InitContainers, s.InitContainerStatuses, true)
	g.applyProbes(pod.Spec.Containers, s.ContainerStatuses, false)

	s.Phase = in.Rules.Phase(restart.PhaseInput{Spec: &pod.Spec, InitStatuses: s.InitContainerStatuses,
		Statuses: s.ContainerStatuses, Initialized: restart.HasRunningRegular(&pod.Spec, rt), Terminating: in.Terminating})
	if !restart.IsTerminal(s.Phase) {
		switch {
		case restart.IsTerminal(in.Old.Phase):
			s.Phase = in.Old.Phase
		case restart.IsTerminal(pod.Status.Phase):
			s.Phase = pod.Status.Phase
		}
	}
	if s.Phase == in.Old.Phase {
		s.Reason, s.Message = in.Old.Reason, in.Old.Message
		if s.Reason == "" {
			s.Reason = pod.Status.Reason
		}
		if s.Message == "" {
			s.Message = pod.Status.Message
		}
	}
	if restart.IsTerminal(pod.Status.Phase) {
		s.Phase = pod.Status.Phase // a terminal phase in the API is final
	}

	s.Conditions = g.conditions(&s)
	if in.HostIP != "" {
		s.HostIP = in.HostIP
		s.HostIPs = []corev1.HostIP{{IP: in.HostIP}}
	}
	s.StartTime = in.Old.StartTime
	if s.StartTime == nil {
		s.StartTime = pod.Status.StartTime
	}
	if s.StartTime == nil {
		now := metav1.NewTime(in.Now).Rfc3339Copy()
		s.StartTime = &now
	}
	return s
}

type generator struct {
	in         Input
	rt         *container.PodStatus
	restarting bool
	hasInit    bool
}

func (g *generator) defaultWaiting() corev1.ContainerState {
	reason := ReasonContainerCreating
	if g.hasInit {
		reason = ReasonPodInitializing
	}
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
}

func second(t time.Time) metav1.Time {
	if t.IsZero() {
		return metav1.Time{}
	}
	return metav1.NewTime(t).Rfc3339Copy()
}

// fromRuntime converts one runtime instance (convertContainerStatus upstream).
func (g *generator) fromRuntime(cs *container.Status, old *corev1.ContainerStatus) corev1.ContainerStatus {
	st := corev1.ContainerStatus{Name: cs.Name, RestartCount: int32(cs.Attempt), Image: cs.Image, ImageID: cs.ImageRef,
		ContainerID: cs.ContainerID()}
	if old != nil {
		st.VolumeMounts = old.VolumeMounts
		if g.in.Rules.RestartAll && old.RestartCount > st.RestartCount {
			st.RestartCount = old.RestartCount
		}
		if g.in.Rules.RestartAll && g.in.Release.CarriesLastStateAcrossRestartAll() {
			// A RestartAllContainers removed the instance this one follows; the last status
			// remembers how it ended. A previous instance the runtime still has overrides this.
			if old.ContainerID != st.ContainerID && old.State.Terminated != nil {
				st.LastTerminationState.Terminated = old.State.Terminated.DeepCopy()
			} else if old.LastTerminationState.Terminated != nil {
				st.LastTerminationState.Terminated = old.LastTerminationState.Terminated.DeepCopy()
			}
		}
	}
	switch cs.State {
	case container.Running:
		st.State.Running = &corev1.ContainerStateRunning{StartedAt: second(cs.StartedAt)}
		if g.in.Rules.RestartAll && old != nil && old.State.Terminated != nil && old.RestartCount >= int32(cs.Attempt) {
			st.RestartCount = old.RestartCount + 1
		}
		if old != nil && old.Started != nil {
			st.Started = old.Started
		}
	case container.Exited:
		st.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: cs.ExitCode, Reason: cs.Reason, Message: cs.Message,
			StartedAt: second(cs.StartedAt), FinishedAt: second(cs.FinishedAt), ContainerID: cs.ContainerID()}
	}
	return st
}

// containerStatuses converts one list of containers (convertToAPIContainerStatuses upstream).
func (g *generator) containerStatuses(containers []corev1.Container, previous []corev1.ContainerStatus, isInit bool) []corev1.ContainerStatus {
	old := make(map[string]*corev1.ContainerStatus, len(previous))
	for i := range previous {
		old[previous[i].Name] = &previous[i]
	}
	statuses := make(map[string]*corev1.ContainerStatus, len(containers))
	for i := range containers {
		c := &containers[i]
		st := &corev1.ContainerStatus{Name: c.Name, Image: c.Image, State: g.defaultWaiting()}
		if o := old[c.Name]; o != nil {
			if o.State.Terminated != nil {
				st = o.DeepCopy()
			} else {
				st.RestartCount = o.RestartCount
				st.LastTerminationState = *o.LastTerminationState.DeepCopy()
			}
		}
		statuses[c.Name] = st
	}

	// Containers the runtime no longer has.
	for i := range containers {
		c := &containers[i]
		o := old[c.Name]
		if g.rt.Latest(c.Name) != nil || o == nil {
			continue
		}
		st := statuses[c.Name]
		if g.in.Rules.RestartAll && g.restarting && o.State.Waiting == nil {
			st.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: restart.ReasonRestartingAllContainers, Message: messageRestartingAll}}
			st.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: container.ExitCodeKilled, Reason: restart.ReasonRestartingAllContainers, Message: messageRestartingAll}}
			st.RestartCount = o.RestartCount + 1
			continue
		}
		if o.State.Terminated != nil || o.State.Running == nil {
			continue
		}
		if st.State.Waiting == nil || st.State.Waiting.Reason != g.defaultWaiting().Waiting.Reason || st.LastTerminationState.Terminated != nil {
			continue
		}
		st.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: container.ExitCodeKilled, Reason: ReasonContainerStatusUnknown, Message: messageStatusUnknown}}
		if g.in.Pod.DeletionTimestamp == nil {
			st.RestartCount++
		}
	}

	// Containers the runtime has: the newest instance is the state, the one before the last state.
	for i := range containers {
		c := &containers[i]
		latest := g.rt.Latest(c.Name)
		if latest == nil {
			continue
		}
		st := g.fromRuntime(latest, old[c.Name])
		if prev := g.rt.Previous(c.Name); prev != nil {
			st.LastTerminationState = g.fromRuntime(prev, old[c.Name]).State
		}
		statuses[c.Name] = &st
	}

	// Containers held back (crash-loop backoff) show the remembered reason.
	for i := range containers {
		c := &containers[i]
		latest := g.rt.Latest(c.Name)
		if isInit && latest != nil && latest.State == container.Exited && latest.ExitCode == 0 {
			continue
		}
		if !g.in.Rules.ShouldStart(c, g.in.Pod, g.rt) {
			continue
		}
		reason, ok := g.in.Reasons[c.Name]
		if !ok {
			continue
		}
		st := statuses[c.Name]
		if st.State.Terminated != nil {
			st.LastTerminationState = st.State
		}
		st.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason.Reason, Message: reason.Message}}
	}

	out := make([]corev1.ContainerStatus, 0, len(containers))
	for i := range containers {
		out = append(out, *statuses[containers[i].Name])
	}
	if !isInit {
		// The kubelet sorts regular container statuses by name, init ones by spec order.
		slices.SortFunc(out, func(a, b corev1.ContainerStatus) int { return strings.Compare(a.Name, b.Name) })
	}
	return out
}

// applyProbes sets started and ready as the kubelet's probe manager does (docs/reference/kubelet.md, "Start order and startup probes").
func (g *generator) applyProbes(containers []corev1.Container, statuses []corev1.ContainerStatus, isInit bool) {
	for i := range containers {
		c := &containers[i]
		st := restart.StatusOf(statuses, c.Name)
		id := container.InstanceID(st.ContainerID)
		started := st.State.Running != nil &&
			(c.StartupProbe == nil || (g.in.Probes != nil && g.in.Probes.Started(id)) || g.keepsStarted(c, id))
		st.Started = &started
		if isInit && !restart.IsSidecar(c) {
			if st.State.Terminated != nil && st.State.Terminated.ExitCode == 0 {
				st.Ready = true
			}
			continue
		}
		if !started {
			continue
		}
		st.Ready = st.State.Running != nil &&
			(c.ReadinessProbe == nil || (g.in.Probes != nil && g.in.Probes.Ready(id)) || g.keepsReady(c, st))
	}
}

// keepsStarted: a running container whose startup probe has no result yet keeps the started
// flag its last status had, unless the ChangeContainerStatusOnKubeletRestart gate is on
// (KubeletRestart).
func (g *generator) keepsStarted(c *corev1.Container, id string) bool {
	if g.in.KubeletRestart.ChangeStatus || (g.in.Probes != nil && g.in.Probes.StartupKnown(id)) {
		return false
	}
	old := restart.StatusOf(g.in.Old.InitContainerStatuses, c.Name)
	if old == nil {
		old = restart.StatusOf(g.in.Old.ContainerStatuses, c.Name)
	}
	return old != nil && old.Started != nil && *old.Started
}

// keepsReady: a running container that ran before its kubelet (re)started and whose readiness
// probe has no result yet is ready if the pod was Ready (KubeletRestart).
func (g *generator) keepsReady(c *corev1.Container, st *corev1.ContainerStatus) bool {
	if g.in.Probes != nil && g.in.Probes.ReadinessKnown(container.InstanceID(st.ContainerID)) {
		return false
	}
	if st.State.Running == nil || !g.in.KubeletRestart.RanBefore(st.State.Running.StartedAt.Time) {
		return false
	}
	return slices.ContainsFunc(g.in.Pod.Status.Conditions, func(cond corev1.PodCondition) bool {
		return cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue
	})
}

// kubeletConditions are the condition types the kubelet owns and regenerates.
var kubeletConditions = []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady,
	corev1.ContainersReady, corev1.PodScheduled, corev1.AllContainersRestarting, corev1.PodResizeInProgress, corev1.PodResizePending}

func (g *generator) conditions(s *corev1.PodStatus) []corev1.PodCondition {
	pod := g.in.Pod
	var conds []corev1.PodCondition
	for _, c := range pod.Status.Conditions {
		if !slices.Contains(kubeletConditions, c.Type) {
			conds = append(conds, c)
		}
	}
	// A disruption recorded in the kubelet's own last status wins over the API's.
	for _, c := range g.in.Old.Conditions {
		if c.Type != corev1.DisruptionTarget {
			continue
		}
		if i := slices.IndexFunc(conds, func(x corev1.PodCondition) bool { return x.Type == c.Type }); i >= 0 {
			conds[i] = c
		} else {
			conds = append(conds, c)
		}
	}
	gen := pod.Generation
	conds = append(conds, g.readyToStartContainers())
	all := append(slices.Clone(s.InitContainerStatuses), s.ContainerStatuses...)
	conds = append(conds, g.initialized(all, s.Phase))
	containersReady := g.containersReady(all, s.Phase)
	conds = append(conds, g.podReady(containersReady, conds), containersReady)
	conds = append(conds, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, ObservedGeneration: gen})
	if g.in.Rules.CouldRestartAll(&pod.Spec) {
		conds = append(conds, g.restartingAll(s.Phase))
	}
	g.keepTransitionTimes(conds)
	return conds
}

// keepTransitionTimes stamps the kubelet's conditions as the status manager does: a condition
// keeps its transition time while its status stays, and takes the time now when it changes.
func (g *generator) keepTransitionTimes(conds []corev1.PodCondition) {
	for i := range conds {
		c := &conds[i]
		if !slices.Contains(kubeletConditions, c.Type) {
			continue
		}
		c.LastTransitionTime = second(g.in.Now)
		for _, o := range g.in.Old.Conditions {
			if o.Type == c.Type && o.Status == c.Status {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
	}
}

// readyToStartContainers is the PodReadyToStartContainers condition: True while the sandbox is
// ready; from 1.37 a False one says why.
func (g *generator) readyToStartContainers() corev1.PodCondition {
	cond := corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, ObservedGeneration: g.in.Pod.Generation}
	if g.rt.SandboxReady {
		return cond
	}
	cond.Status = corev1.ConditionFalse
	if g.in.Release.ExplainsSandboxNotReady() {
		cond.Reason, cond.Message = ReasonPodSandboxNotReady, messageSandboxNotReady
		if g.in.Runtime == nil {
			cond.Message = messageNoSandbox
		}
	}
	return cond
}

func listed(kind string, names []string) string {
	return fmt.Sprintf("containers with %s status: [%s]", kind, strings.Join(names, " "))
}

func (g *generator) initialized(all []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	pod := g.in.Pod
	cond := corev1.PodCondition{Type: corev1.PodInitialized, ObservedGeneration: pod.Generation, Status: corev1.ConditionTrue}
	var unknown, incomplete []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		st := restart.StatusOf(all, c.Name)
		switch {
		case st == nil:
			unknown = append(unknown, c.Name)
		case restart.IsSidecar(c) && (st.Started == nil || !*st.Started):
			incomplete = append(incomplete, c.Name)
		case !restart.IsSidecar(c) && !st.Ready:
			incomplete = append(incomplete, c.Name)
		}
	}
	if phase == corev1.PodSucceeded && len(unknown) == 0 {
		cond.Reason = ReasonPodCompleted
		return cond
	}
	for i := range pod.Spec.Containers {
		if st := restart.StatusOf(all, pod.Spec.Containers[i].Name); st != nil && (st.State.Running != nil || st.State.Terminated != nil) {
			return cond // a regular container has run: the pod was initialized
		}
	}
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, listed("unknown", unknown))
	}
	if len(incomplete) > 0 {
		msgs = append(msgs, listed("incomplete", incomplete))
	}
	if len(msgs) == 0 {
		return cond
	}
	if g.in.Rules.RestartAll {
		for _, o := range g.in.Old.Conditions {
			if o.Type == corev1.PodInitialized && o.Status == corev1.ConditionTrue {
				return cond // sticky through a RestartAllContainers
			}
		}
	}
	cond.Status, cond.Reason, cond.Message = corev1.ConditionFalse, ReasonContainersNotInitialized, strings.Join(msgs, ", ")
	return cond
}

func (g *generator) containersReady(all []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	pod := g.in.Pod
	cond := corev1.PodCondition{Type: corev1.ContainersReady, ObservedGeneration: pod.Generation, Status: corev1.ConditionFalse}
	var unknown, unready []string
	check := func(c *corev1.Container) {
		st := restart.StatusOf(all, c.Name)
		switch {
		case st == nil:
			unknown = append(unknown, c.Name)
		case !st.Ready:
			unready = append(unready, c.Name)
		}
	}
	for i := range pod.Spec.InitContainers {
		if restart.IsSidecar(&pod.Spec.InitContainers[i]) {
			check(&pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		check(&pod.Spec.Containers[i])
	}
	switch {
	case phase == corev1.PodSucceeded && len(unknown) == 0:
		cond.Reason = ReasonPodCompleted
		return cond
	case phase == corev1.PodFailed:
		cond.Reason = ReasonPodFailed
		return cond
	}
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, listed("unknown", unknown))
	}
	if len(unready) > 0 {
		msgs = append(msgs, listed("unready", unready))
	}
	if len(msgs) > 0 {
		cond.Reason, cond.Message = ReasonContainersNotReady, strings.Join(msgs, ", ")
		return cond
	}
	cond.Status = corev1.ConditionTrue
	return cond
}

func (g *generator) podReady(containersReady corev1.PodCondition, conds []corev1.PodCondition) corev1.PodCondition {
	cond := corev1.PodCondition{Type: corev1.PodReady, ObservedGeneration: g.in.Pod.Generation}
	if containersReady.Status != corev1.ConditionTrue {
		cond.Status, cond.Reason, cond.Message = containersReady.Status, containersReady.Reason, containersReady.Message
		return cond
	}
	var msgs []string
	for _, gate := range g.in.Pod.Spec.ReadinessGates {
		i := slices.IndexFunc(conds, func(c corev1.PodCondition) bool { return c.Type == gate.ConditionType })
		switch {
		case i < 0:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", gate.ConditionType))
		case conds[i].Status != corev1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", gate.ConditionType, conds[i].Status))
		}
	}
	if len(msgs) > 0 {
		cond.Status, cond.Reason, cond.Message = corev1.ConditionFalse, ReasonReadinessGatesNotReady, strings.Join(msgs, ", ")
		return cond
	}
	cond.Status = corev1.ConditionTrue
	return cond
}

// restartingAll is the AllContainersRestarting condition (docs/reference/kubelet.md, "The
// condition"); it carries no observedGeneration, as upstream's does not.
func (g *generator) restartingAll(phase corev1.PodPhase) corev1.PodCondition {
	cond := corev1.PodCondition{Type: corev1.AllContainersRestarting, Status: corev1.ConditionFalse}
	switch {
	case phase == corev1.PodSucceeded:
		cond.Reason = ReasonPodCompleted
	case phase == corev1.PodFailed:
		cond.Reason = ReasonPodFailed
	case g.restarting && !restart.CleanedUp(g.in.Pod, g.rt):
		cond.Status, cond.Reason, cond.Message = corev1.ConditionTrue, ReasonRestartAllContainersStarted, MessageRestartAllContainers
	}
	return cond
}
