package invariants

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// The built-in invariants, by the names reports and docs/explore.md give them.
const (
	// AttemptsMonotonic: a JobSet's current and previous in-place restart attempts, and a pod's
	// in-place-restart-attempt annotation, never go back.
	AttemptsMonotonic = "attempts-monotonic"
	// Barrier: a worker container starts only at its pod's attempt, and only once the JobSet's
	// currentInPlaceRestartAttempt is that attempt: the agent lifts its barrier at the sync point
	// and not before.
	Barrier = "barrier"
	// GroupRestart: after a worker fails, no worker of the JobSet starts again until every pod
	// the JobSet had then has restarted, in place or recreated: the lost sync in-place restart
	// exists to prevent. A pod has restarted once each of its containers that had run then has
	// a later instance: a worker still waiting at the barrier carries nothing of the old attempt,
	// and the kubelet counts no restart when it first starts. A pod that leaves the group (its
	// node lost, failed for good) is such a failure once a worker of the group has run since its
	// pods last restarted; before that no worker has anything to be out of step with, and the
	// barrier alone judges their first start.
	GroupRestart = "group-restart"
	// PodKept: an in-place restart never deletes a pod whose node is Ready; only a JobSet
	// restart (status.restarts passing the pod's restart-attempt label) recreates it.
	PodKept = "pod-kept"
	// FailsByPolicy: a JobSet fails only when its failure policy says so, with maxRestarts counted
	// as released JobSet counts it: a failed Job with no failure policy (FailedJobs), a failed Job
	// a FailJobSet rule matches, or ReachedMaxRestarts — a container's restartCount or the pods'
	// attempt (less the uncounted restarts) past maxRestarts, or a failed Job once the counted
	// restarts reach it. status.restarts rises only for a failed Job of the restart before, never
	// for an in-place restart. The other way round, an in-place JobSet past its limit is not
	// settled (Unsettled) until it has failed.
	FailsByPolicy = "fails-by-policy"
	// Recovers: once the faults are over, every JobSet runs again, each worker at the JobSet's
	// attempt, or has finished (Unsettled says what is not there yet). A JobSet with a pod no node
	// can take is not judged: it lacks capacity, which no restart mends; nor is one with a pod
	// stranded Terminating on a node that is not Ready, which only a node's return, its deletion
	// or its out-of-service taint ends.
	Recovers = "recovers"
)

// Names are the built-in invariants, in the order docs/explore.md lists them.
var Names = []string{AttemptsMonotonic, Barrier, GroupRestart, PodKept, FailsByPolicy, Recovers}

// Violation is one breach of an invariant.
type Violation struct {
	Invariant string
	// Object is the object whose change revealed it: "Pod default/w-0-0-abcde".
	Object string
	// Message says what happened, with the times and attempts involved.
	Message string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: %s: %s", v.Invariant, v.Object, v.Message)
}

// JobSetInPlace judges the built-in invariants for the JobSets whose failure policy restarts in
// place. Feed it every change of the pods, JobSets and nodes a run observes, each kind in the
// order its watch delivers it; it is not safe for concurrent use.
//
// Two judgements wait for information still on its way: the barrier compares a pod's change
// with the JobSet as it was at that change's resourceVersion, which the JobSet's watch may
// deliver later; the group restart compares a worker's start with the restarts of pods whose
// kubelets have not reported yet. Both are settled when that arrives, or by Finish.
//
// The barrier and the group restart are judged in sidecar mode only (the agent a restartable
// init container, the workers the pod's containers): in main-container mode the agent runs the
// worker as its own child process, which the API does not show.
type JobSetInPlace struct {
	jobSets map[string]*jobSetState // namespace/name
	pods    map[types.UID]*podState
	ready   map[string]bool // node name → Ready condition True
	// jobEnded are the Jobs, by namespace/name, that have failed or succeeded (or are about to).
	jobEnded map[string]bool
	// jobsGap: the Jobs' watch broke, so a Job may have failed and gone unobserved.
	jobsGap bool
	out     []Violation
}

// NewJobSetInPlace returns a checker that has observed nothing.
func NewJobSetInPlace() *JobSetInPlace {
	return &JobSetInPlace{jobSets: map[string]*jobSetState{}, pods: map[types.UID]*podState{}, ready: map[string]bool{}, jobEnded: map[string]bool{}}
}

// jobSetState is what the checker keeps of one JobSet.
type jobSetState struct {
	inPlace, disabled bool
	// terminal: the JobSet has failed or completed.
	terminal bool
	// gap: the watch broke and no version has arrived since.
	gap bool
	// versions are the observed states of the status, in resourceVersion order.
	versions []jobSetVersion
	latest   uint64
	round    *round
	barriers []barrierCheck
	deletes  []deleteCheck

	// What the failure policy is judged by.
	spec *jobsetv1alpha2.FailurePolicy
	// failed is the first version observed with terminalState Failed, and its condition's reason.
	failed       *jobSetVersion
	failedReason string
	// failedJobs are the JobSet's failed Jobs, by namespace/name.
	failedJobs map[string]failedJob
	// maxRestartCount is the highest restartCount observed of any container of the JobSet's pods;
	// maxAttempt the highest attempt annotation of a pod not Failed.
	maxRestartCount int32
	maxAttempt      int64
}

// failedJob is a Job of the JobSet that failed: what a failure policy rule matches on.
type failedJob struct {
	restartAttempt  int64
	replicatedJob   string
	reason, message string
}

type jobSetVersion struct {
	rv                uint64
	current, restarts int32
	previous          int32
	// counted is what maxRestarts bounds: restartsCountTowardsMax and the per-Job counts.
	counted             int32
	hasCurrent, hasPrev bool
	// afterGap: the JobSets' watch broke before this version, so versions between it and the
	// one before may never have been observed.
	afterGap bool
}

// asOf is the JobSet's status as it was at resourceVersion rv: the last version stored before it,
// and the first stored after it.
func (js *jobSetState) asOf(rv uint64) (before, after *jobSetVersion) {
	i, _ := slices.BinarySearchFunc(js.versions, rv, func(v jobSetVersion, rv uint64) int {
		if v.rv < rv {
			return -1
		}
		return 1
	})
	if i > 0 {
		before = &js.versions[i-1]
	}
	if i < len(js.versions) {
		after = &js.versions[i]
	}
	return before, after
}

// WatchBroke tells the checker that the watch of a kind ("JobSet") broke and lists again: what
// changed meanwhile arrives as the latest version only, and judgements that need the versions in
// between give the benefit of the doubt.
func (c *JobSetInPlace) WatchBroke(kind string) {
	if kind == "Job" {
		c.jobsGap = true
	}
	if kind != "JobSet" {
		return
	}
	for _, js := range c.jobSets {
		js.gap = true
	}
}

// round is a group restart in progress: it opens when a worker fails and closes once every pod
// the JobSet had then has restarted.
type round struct {
	failure string
	// members are the pods that must restart, by UID.
	members map[types.UID]*member
	// starts are the workers that started while the round was open.
	starts []workerStart
}

type member struct {
	name string
	// ran are the pod's containers whose instance had run when the round opened, by name, with
	// that instance's restartCount: the pod has restarted once each has a later instance. A
	// container that had not run (a worker still at the barrier) has nothing of the old attempt
	// to restart, and the kubelet does not count it restarted when it first starts.
	ran       map[string]int32
	restarted bool
}

type workerStart struct {
	pod, container string
	at             time.Time
}

// barrierCheck is a worker start waiting for the JobSet's state at its resourceVersion.
type barrierCheck struct {
	rv             uint64
	pod, container string
	attempt        int64
}

// deleteCheck is a deletion of a pod on a Ready node, judged at the end of the run.
type deleteCheck struct {
	pod, job string
	restarts int64
	node     string
}

// podState is what the checker keeps of one pod.
type podState struct {
	key, jobSet string
	sidecar     bool
	workers     map[string]bool
	attempt     int64 // -1: no annotation
	gen         int32 // the least restartCount of its containers: how often all of them restarted
	// started and failed are, by container, the highest instance (restartCount) seen running
	// and seen terminated.
	started, failed map[string]int32
	// running are the workers running as last observed.
	running map[string]bool
	// agentEnded: a sidecar of the pod's current generation has been seen terminated.
	agentEnded bool
	// ran: a worker of the pod's current generation has been seen running or ended.
	ran bool
	// instances are its containers whose current instance has run, with that instance's
	// restartCount, as last observed.
	instances map[string]int32
	// unschedulable: the scheduler found no node for it (PodScheduled False, Unschedulable).
	unschedulable bool
	deleting      bool
	// node is the node it is bound to ("" before it is scheduled).
	node string
	// restartCount is the highest restartCount of its containers.
	restartCount int32
}

// Observe takes one change ("ADDED", "MODIFIED" or "DELETED") of a pod, JobSet or node and
// returns the violations it reveals. Other kinds are ignored.
func (c *JobSetInPlace) Observe(change string, obj *unstructured.Unstructured) []Violation {
	c.out = nil
	switch obj.GroupVersionKind().GroupKind() {
	case corev1.SchemeGroupVersion.WithKind("Pod").GroupKind():
		var pod corev1.Pod
		if runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &pod) == nil {
			c.pod(change, &pod)
		}
	case jobsetv1alpha2.GroupVersion.WithKind("JobSet").GroupKind():
		var js jobsetv1alpha2.JobSet
		if runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &js) == nil {
			c.jobSet(change, &js)
		}
	case batchv1.SchemeGroupVersion.WithKind("Job").GroupKind():
		var job batchv1.Job
		if runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &job) == nil && change != "DELETED" {
			c.job(&job)
		}
	case corev1.SchemeGroupVersion.WithKind("Node").GroupKind():
		var node corev1.Node
		if runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &node) == nil {
			c.ready[node.Name] = change != "DELETED" && nodeReady(&node)
		}
	}
	return c.out
}

// Finish settles what waits for information that will no longer come, and returns the
// violations that reveals: at the end of a run, every JobSet's state is as last observed.
func (c *JobSetInPlace) Finish() []Violation {
	c.out = nil
	for _, key := range slices.Sorted(maps.Keys(c.jobSets)) {
		js := c.jobSets[key]
		c.settle(key, js, math.MaxUint64)
		c.judgePolicy(key, js)
		if r := js.round; r != nil && len(r.starts) > 0 {
			for _, m := range r.members {
				if !m.restarted {
					s := r.starts[0]
					c.violate(GroupRestart, "Pod "+s.pod, "worker %s started at %s after %s, and pod %s never restarted",
						s.container, stamp(s.at), r.failure, m.name)
				}
			}
		}
	}
	return c.out
}

// stuck reports whether a pod of the JobSet waits on what none of the JobSet's controllers can
// give it: a node no one has (the scheduler found none: capacity, which no restart mends), or
// the end of its deletion on a node that is not Ready. Kubernetes leaves such a pod Terminating
// until its node comes back, is deleted or is tainted out-of-service (KEP-6757's
// stuck-terminating pod), and its Job waits for it before it replaces it (podReplacementPolicy
// Failed), so only something outside — an operator, Kueue's failure recovery — ends it.
func (c *JobSetInPlace) stuck(jobSet string) bool {
	for _, p := range c.pods {
		if p.jobSet != jobSet {
			continue
		}
		ready, known := c.ready[p.node]
		if (!p.deleting && p.unschedulable) || (p.deleting && known && !ready) {
			return true
		}
	}
	return false
}

// Unsettled says what keeps the in-place JobSets from running as they should with no fault
// about: a group restart still open, a worker not running, a pod at another attempt than its
// JobSet. It is "" when every such JobSet runs that way or has finished.
func (c *JobSetInPlace) Unsettled() string {
	for _, key := range slices.Sorted(maps.Keys(c.jobSets)) {
		js := c.jobSets[key]
		if !js.inPlace || js.terminal || len(js.versions) == 0 || c.stuck(key) {
			continue
		}
		if why := c.overLimit(key, js); why != "" {
			return why
		}
		if js.round != nil {
			return fmt.Sprintf("JobSet %s: the group restart after %s has not finished", key, js.round.failure)
		}
		v := js.versions[len(js.versions)-1]
		pods := 0
		for _, p := range c.pods {
			if p.jobSet != key || p.deleting {
				continue
			}
			pods++
			for _, w := range slices.Sorted(maps.Keys(p.workers)) {
				if !p.running[w] {
					return fmt.Sprintf("JobSet %s: worker %s of pod %s is not running", key, w, p.key)
				}
			}
			if p.sidecar && !js.disabled && (!v.hasCurrent || p.attempt != int64(v.current)) {
				return fmt.Sprintf("JobSet %s: pod %s is at attempt %d, the JobSet at %s", key, p.key, p.attempt, optional(v.current, v.hasCurrent))
			}
		}
		if pods == 0 {
			return fmt.Sprintf("JobSet %s has no pod", key)
		}
	}
	return ""
}

func (c *JobSetInPlace) violate(invariant, object, format string, args ...any) {
	c.out = append(c.out, Violation{Invariant: invariant, Object: object, Message: fmt.Sprintf(format, args...)})
}

func (c *JobSetInPlace) jobSet(change string, obj *jobsetv1alpha2.JobSet) {
	key := obj.Namespace + "/" + obj.Name
	js := c.state(key)
	if change == "DELETED" {
		delete(c.jobSets, key)
		return
	}
	fp := obj.Spec.FailurePolicy
	js.inPlace = fp != nil && fp.RestartStrategy == jobsetv1alpha2.InPlaceRestart
	js.spec = fp
	_, js.disabled = obj.Annotations[jobsetv1alpha2.DisableInPlaceRestartKey]
	js.terminal = js.terminal || obj.Status.TerminalState != "" || obj.DeletionTimestamp != nil
	rv := resourceVersion(obj.ResourceVersion)
	v := jobSetVersion{rv: rv, restarts: obj.Status.Restarts, counted: obj.Status.RestartsCountTowardsMax}
	for _, st := range obj.Status.ReplicatedJobsStatus {
		for _, n := range st.JobRestartsCountTowardsMax {
			v.counted += n
		}
	}
	if obj.Status.TerminalState == terminalFailed && js.failed == nil {
		js.failed = &v
		for _, cond := range obj.Status.Conditions {
			if cond.Type == string(jobsetv1alpha2.JobSetFailed) && cond.Status == metav1.ConditionTrue {
				js.failedReason = cond.Reason
			}
		}
	}
	if p := obj.Status.CurrentInPlaceRestartAttempt; p != nil {
		v.current, v.hasCurrent = *p, true
	}
	if p := obj.Status.PreviousInPlaceRestartAttempt; p != nil {
		v.previous, v.hasPrev = *p, true
	}
	if n := len(js.versions); n > 0 {
		last := js.versions[n-1]
		if last.hasCurrent && (!v.hasCurrent || v.current < last.current) {
			c.violate(AttemptsMonotonic, "JobSet "+key, "status.currentInPlaceRestartAttempt went from %d to %s", last.current, optional(v.current, v.hasCurrent))
		}
		if last.hasPrev && (!v.hasPrev || v.previous < last.previous) {
			c.violate(AttemptsMonotonic, "JobSet "+key, "status.previousInPlaceRestartAttempt went from %d to %s", last.previous, optional(v.previous, v.hasPrev))
		}
	}
	if rv > js.latest {
		v.afterGap, js.gap = js.gap, false
		js.versions = append(js.versions, v)
		js.latest = rv
	}
	c.settle(key, js, js.latest)
}

func (c *JobSetInPlace) state(key string) *jobSetState {
	js := c.jobSets[key]
	if js == nil {
		js = &jobSetState{}
		c.jobSets[key] = js
	}
	return js
}

// settle judges the barrier and deletion checks whose resourceVersion the JobSet's watch has
// reached (upTo).
func (c *JobSetInPlace) settle(key string, js *jobSetState, upTo uint64) {
	keep := js.barriers[:0]
	for _, b := range js.barriers {
		if b.rv > upTo || (js.gap && upTo != math.MaxUint64) {
			keep = append(keep, b)
			continue
		}
		v, next := js.asOf(b.rv)
		if next != nil && next.afterGap && next.hasCurrent && int64(next.current) == b.attempt {
			continue // the JobSet may have reached the attempt while its watch was broken
		}
		if js.gap && next == nil {
			continue // the watch never came back: nothing to judge by
		}
		switch {
		case v == nil || !v.hasCurrent:
			c.violate(Barrier, "Pod "+b.pod, "worker %s started at attempt %d before JobSet %s had a current attempt", b.container, b.attempt, key)
		case int64(v.current) != b.attempt:
			c.violate(Barrier, "Pod "+b.pod, "worker %s started at attempt %d while JobSet %s was at attempt %d", b.container, b.attempt, key, v.current)
		}
	}
	js.barriers = keep
	if upTo != math.MaxUint64 {
		return
	}
	// A deletion is judged on how things ended: the Job that ends (fails by its pod failure
	// policy, succeeds) and the JobSet that restarts or finishes delete pods for reasons of
	// their own, and the watches tell of those after the deletion as often as before.
	for _, d := range js.deletes {
		if c.jobEnded[d.job] || js.terminal {
			continue
		}
		if n := len(js.versions); n == 0 || int64(js.versions[n-1].restarts) <= d.restarts {
			c.violate(PodKept, "Pod "+d.pod, "deleted while its node %s was Ready, though its Job %s did not end and JobSet %s neither restarted nor finished (the pod's restart-attempt %d)",
				d.node, d.job, key, d.restarts)
		}
	}
	js.deletes = nil
}

func (c *JobSetInPlace) pod(change string, pod *corev1.Pod) {
	name := pod.Labels[jobsetv1alpha2.JobSetNameKey]
	if name == "" {
		return
	}
	jsKey := pod.Namespace + "/" + name
	js := c.state(jsKey)
	p := c.pods[pod.UID]
	if p == nil {
		p = newPodState(pod, jsKey)
		c.pods[pod.UID] = p
	}
	p.node = pod.Spec.NodeName
	rv := resourceVersion(pod.ResourceVersion)
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, st := range list {
			p.restartCount = max(p.restartCount, st.RestartCount)
		}
	}
	js.maxRestartCount = max(js.maxRestartCount, p.restartCount)
	if change == "DELETED" || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		c.deleted(js, p, pod, change == "DELETED")
		if change == "DELETED" {
			delete(c.pods, pod.UID)
		}
		return
	}
	c.attempt(p, pod)
	p.unschedulable = false
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
			p.unschedulable = true
		}
	}
	for _, st := range pod.Status.ContainerStatuses {
		p.running[st.Name] = st.State.Running != nil
	}
	if !js.inPlace || !p.sidecar {
		p.gen = generation(pod)
		return
	}
	failure := c.failures(p, pod)
	if failure != "" && js.round == nil {
		js.round = c.openRound(jsKey, failure)
	}
	if gen := generation(pod); gen > p.gen {
		p.gen, p.agentEnded, p.ran = gen, false, false
	}
	c.restarted(js, pod)
	p.instances = instances(pod)
	for _, s := range c.starts(p, pod) {
		p.ran = true
		if js.round != nil {
			js.round.starts = append(js.round.starts, s)
		}
		if !js.disabled {
			js.barriers = append(js.barriers, barrierCheck{rv: rv, pod: p.key, container: s.container, attempt: p.attempt})
		}
	}
	c.settle(jsKey, js, js.latest)
}

func newPodState(pod *corev1.Pod, jsKey string) *podState {
	p := &podState{key: pod.Namespace + "/" + pod.Name, jobSet: jsKey, attempt: -1, workers: map[string]bool{},
		started: map[string]int32{}, failed: map[string]int32{}, running: map[string]bool{}, gen: generation(pod), instances: instances(pod)}
	for _, ic := range pod.Spec.InitContainers {
		if ic.RestartPolicy != nil && *ic.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			p.sidecar = true
		}
	}
	for _, ct := range pod.Spec.Containers {
		p.workers[ct.Name] = true
	}
	// What the pod shows when first observed is its starting point, not news.
	for _, st := range pod.Status.ContainerStatuses {
		p.ran = p.ran || hasRun(st)
		if st.State.Running != nil {
			p.started[st.Name] = st.RestartCount
		} else {
			p.started[st.Name] = st.RestartCount - 1
		}
		p.failed[st.Name] = st.RestartCount - 1
		if st.State.Terminated != nil {
			p.failed[st.Name] = st.RestartCount
		}
	}
	return p
}

// attempt checks that the pod's attempt annotation does not go back, and keeps it.
func (c *JobSetInPlace) attempt(p *podState, pod *corev1.Pod) {
	v, ok := pod.Annotations[jobsetv1alpha2.InPlaceRestartAttemptKey]
	if !ok {
		return
	}
	a, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return // the controller's concern: it refuses such a value
	}
	if a < p.attempt {
		c.violate(AttemptsMonotonic, "Pod "+p.key, "annotation %s went from %d to %d", jobsetv1alpha2.InPlaceRestartAttemptKey, p.attempt, a)
	}
	p.attempt = a
	if js := c.jobSets[p.jobSet]; js != nil {
		js.maxAttempt = max(js.maxAttempt, a)
	}
}

// failures returns the first worker failure the pod's change shows that earlier changes did not:
// a worker container that ended with a non-zero exit code on its own, not killed because its
// pod's agent ended first (the pod then restarts all its containers to follow its group).
func (c *JobSetInPlace) failures(p *podState, pod *corev1.Pod) string {
	var first string
	agentEnded := func(instance int32, finished time.Time) bool {
		if p.agentEnded {
			return true
		}
		for _, st := range pod.Status.InitContainerStatuses {
			if p.workers[st.Name] {
				continue
			}
			if t := st.State.Terminated; t != nil && st.RestartCount == instance && !t.FinishedAt.After(finished) {
				return true
			}
			if t := st.LastTerminationState.Terminated; t != nil && st.RestartCount-1 == instance && !t.FinishedAt.After(finished) {
				return true
			}
		}
		return false
	}
	defer func() {
		for _, st := range pod.Status.InitContainerStatuses {
			if st.State.Terminated != nil {
				p.agentEnded = true
			}
		}
	}()
	for _, st := range pod.Status.ContainerStatuses {
		if !p.workers[st.Name] {
			continue
		}
		term, instance := st.LastTerminationState.Terminated, st.RestartCount-1
		if st.State.Terminated != nil {
			term, instance = st.State.Terminated, st.RestartCount
		}
		if seen, ok := p.failed[st.Name]; term == nil || (ok && instance <= seen) {
			continue
		}
		p.failed[st.Name] = instance
		if term.ExitCode != 0 && first == "" && !agentEnded(instance, term.FinishedAt.Time) {
			first = fmt.Sprintf("worker %s of pod %s exited with code %d at %s", st.Name, p.key, term.ExitCode, stamp(term.FinishedAt.Time))
		}
	}
	return first
}

// openRound starts a group restart: every pod of the JobSet, as it was before this change, must
// restart the containers that had run.
func (c *JobSetInPlace) openRound(jsKey, failure string) *round {
	r := &round{failure: failure, members: map[types.UID]*member{}}
	for uid, p := range c.pods {
		if p.jobSet == jsKey && !p.deleting && len(p.instances) > 0 {
			r.members[uid] = &member{name: p.key, ran: p.instances}
		}
	}
	return r
}

// instances are the pod's containers whose current instance has run (running or ended), with
// its restartCount.
func instances(pod *corev1.Pod) map[string]int32 {
	out := map[string]int32{}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, st := range list {
			if hasRun(st) {
				out[st.Name] = st.RestartCount
			}
		}
	}
	return out
}

// hasRun reports whether the container's current instance has run: it runs or has ended.
func hasRun(st corev1.ContainerStatus) bool {
	return st.State.Running != nil || st.State.Terminated != nil
}

// restarted records that a member of the open round has restarted every container that had
// run, at the time its previous containers ended, and judges the workers that started before
// that.
func (c *JobSetInPlace) restarted(js *jobSetState, pod *corev1.Pod) {
	r := js.round
	if r == nil {
		return
	}
	m := r.members[pod.UID]
	if m == nil || m.restarted {
		return
	}
	counts := map[string]int32{}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, st := range list {
			counts[st.Name] = st.RestartCount
		}
	}
	for name, was := range m.ran {
		if counts[name] <= was {
			return
		}
	}
	m.restarted = true
	var at time.Time
	for _, st := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		if t := st.LastTerminationState.Terminated; t != nil && t.FinishedAt.After(at) {
			at = t.FinishedAt.Time
		}
	}
	c.restartedAt(js, m.name, at)
}

// restartedAt judges the round's worker starts against a member's restart at at, and closes the
// round once every member has restarted.
func (c *JobSetInPlace) restartedAt(js *jobSetState, name string, at time.Time) {
	r := js.round
	for _, s := range r.starts {
		// The kubelet's timestamps are whole seconds: within the same second is not a breach.
		if !at.IsZero() && at.Truncate(time.Second).After(s.at.Truncate(time.Second)) {
			c.violate(GroupRestart, "Pod "+s.pod, "worker %s started at %s after %s, before pod %s restarted (at %s)",
				s.container, stamp(s.at), r.failure, name, stamp(at))
		}
	}
	for _, m := range r.members {
		if !m.restarted {
			return
		}
	}
	js.round = nil
}

// starts returns the workers the change shows running in an instance not seen running before.
func (c *JobSetInPlace) starts(p *podState, pod *corev1.Pod) []workerStart {
	var out []workerStart
	for _, st := range pod.Status.ContainerStatuses {
		if !p.workers[st.Name] || st.State.Running == nil {
			continue
		}
		if seen, ok := p.started[st.Name]; ok && st.RestartCount <= seen {
			continue
		}
		p.started[st.Name] = st.RestartCount
		out = append(out, workerStart{pod: p.key, container: st.Name, at: st.State.Running.StartedAt.Time})
	}
	return out
}

// deleted handles a pod leaving its group, deleted or finished (Failed, Succeeded): it counts as
// restarted for a round, its leaving opens one, and its deletion is judged against the JobSet's
// restarts.
func (c *JobSetInPlace) deleted(js *jobSetState, p *podState, pod *corev1.Pod, gone bool) {
	if !p.deleting {
		if js.inPlace && p.sidecar && js.round == nil && !js.terminal && c.groupRan(p, pod) {
			// A pod that goes (its node lost, failed for good) leaves its group to restart
			// without it: the others restart before any worker runs again.
			js.round = c.openRound(p.jobSet, fmt.Sprintf("pod %s left the group (%s)", p.key, leaving(pod)))
		}
		p.deleting = true
		phase := pod.Status.Phase
		if js.inPlace && pod.DeletionTimestamp != nil && pod.Spec.NodeName != "" && c.ready[pod.Spec.NodeName] && phase != corev1.PodFailed && phase != corev1.PodSucceeded {
			restarts, _ := strconv.ParseInt(pod.Labels[jobsetv1alpha2.RestartsKey], 10, 64)
			js.deletes = append(js.deletes, deleteCheck{pod: p.key, job: pod.Namespace + "/" + pod.Labels[batchv1.JobNameLabel], restarts: restarts, node: pod.Spec.NodeName})
		}
	}
	if r := js.round; r != nil {
		if m := r.members[pod.UID]; m != nil && !m.restarted {
			m.restarted = true
			at := lastFinished(pod)
			if pod.DeletionTimestamp != nil {
				at = pod.DeletionTimestamp.Time
			}
			c.restartedAt(js, m.name, at)
		}
	}
	if !gone {
		c.settle(p.jobSet, js, js.latest)
	}
}

// groupRan reports whether a worker of the leaving pod's JobSet has run since its pod last
// restarted all its containers: the leaving pod's own (as its last status shows them) or
// another pod's (as observed so far). Only then does its leaving put the group out of step.
func (c *JobSetInPlace) groupRan(leaving *podState, pod *corev1.Pod) bool {
	for _, st := range pod.Status.ContainerStatuses {
		if leaving.workers[st.Name] && st.RestartCount >= leaving.gen && hasRun(st) {
			return true
		}
	}
	for _, p := range c.pods {
		if p.jobSet == leaving.jobSet && p.ran {
			return true
		}
	}
	return false
}

// leaving says why a pod leaves its group.
func leaving(pod *corev1.Pod) string {
	if pod.DeletionTimestamp != nil {
		return "deleted"
	}
	return strings.ToLower(string(pod.Status.Phase))
}

// lastFinished is when the pod's last container ended; zero if none has.
func lastFinished(pod *corev1.Pod) time.Time {
	var at time.Time
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, st := range list {
			if t := st.State.Terminated; t != nil && t.FinishedAt.After(at) {
				at = t.FinishedAt.Time
			}
		}
	}
	return at
}

// generation is how often all of the pod's containers have restarted: the least restartCount.
func generation(pod *corev1.Pod) int32 {
	var gen int32 = math.MaxInt32
	n := 0
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, st := range list {
			gen = min(gen, st.RestartCount)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return gen
}

// jobEnded reports whether the Job has failed or succeeded, or is about to (FailureTarget,
// SuccessCriteriaMet): its controller then deletes its running pods.
func jobEnded(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		switch c.Type {
		case batchv1.JobFailed, batchv1.JobComplete, batchv1.JobFailureTarget, batchv1.JobSuccessCriteriaMet:
			if c.Status == corev1.ConditionTrue {
				return true
			}
		}
	}
	return false
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// resourceVersion reads a storage revision; a value that is not one reads as 0.
func resourceVersion(s string) uint64 {
	rv, _ := strconv.ParseUint(s, 10, 64)
	return rv
}

func optional(v int32, ok bool) string {
	if !ok {
		return "unset"
	}
	return strconv.Itoa(int(v))
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	return t.UTC().Format(time.TimeOnly)
}
