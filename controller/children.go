package controller

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// children is what reconciles read of each JobSet's Jobs and pods, kept up to date by the Job and
// pod watches change by change instead of listed from the cache on every reconcile. A group
// restart of N pods reconciles its JobSet about four times a pod; listing and reading N Jobs and
// N pods each time made the controller's work grow as N² (at 5000 pods it was the largest part of
// restartbed's CPU). A watch handler updates children before it queues the JobSet, so a
// reconcile sees at least the change that queued it, as it would see it in the cache.
//
// The Jobs are the cache's own objects: readers must not modify them.
type children struct {
	mu sync.RWMutex
	// jobs holds Jobs by the UID of the JobSet that controls them.
	jobs map[types.UID]*jobSetJobs
	// changes numbers the changes of Jobs, so that a view knows whether its Jobs are current.
	changes uint64
	// pods tallies pods by their JobSet: namespace and jobset-name label.
	pods map[types.NamespacedName]*podTally
}

// jobSetJobs are one JobSet's Jobs, and the last view of them a reconcile took.
type jobSetJobs struct {
	byName map[string]*childJob
	// changed is children.changes at the last change of these Jobs.
	changed uint64
	view    *jobView
}

func newChildren() *children {
	return &children{jobs: map[types.UID]*jobSetJobs{}, pods: map[types.NamespacedName]*podTally{}}
}

// childJob is a Job of the cache with what classify reads of its labels and status, taken once
// per change of the Job rather than once per reconcile.
type childJob struct {
	*batchv1.Job
	// restarts is the JobSet attempt label, index the Job index label, ownRestarts the Job's own
	// attempt label (0 when absent); each is -1 when it cannot be read.
	restarts, index, ownRestarts int
	replicatedJob                string
	// named: the Job has the name its controlling JobSet gives the Job of its replicated Job
	// and index (jobName).
	named bool
	// finished is JobComplete or JobFailed when that condition of the Job is True (Complete
	// first), else empty.
	finished batchv1.JobConditionType
	// running, suspended and ready are what the JobSet's status counts of an unfinished Job:
	// it has active pods, it is suspended, and its pods that succeeded or are ready reach its
	// parallelism (or completions, if fewer).
	running, suspended, ready bool
}

func newChildJob(job *batchv1.Job) *childJob {
	nonNegative := func(v string) int {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			return n
		}
		return -1
	}
	c := &childJob{Job: job, replicatedJob: job.Labels[jobsetv1alpha2.ReplicatedJobNameKey],
		restarts: nonNegative(job.Labels[jobsetv1alpha2.RestartsKey]), index: nonNegative(job.Labels[jobsetv1alpha2.JobIndexKey])}
	if v, ok := job.Labels[jobsetv1alpha2.JobRestartsKey]; ok {
		c.ownRestarts = nonNegative(v)
	}
	if owner := jobSetOwner(job); owner != nil && c.index >= 0 {
		c.named = job.Name == owner.Name+"-"+c.replicatedJob+"-"+strconv.Itoa(c.index)
	}
	for _, t := range []batchv1.JobConditionType{batchv1.JobComplete, batchv1.JobFailed} {
		if jobCondition(job, t) != nil {
			c.finished = t
			break
		}
	}
	want := min(ptr.Deref(job.Spec.Parallelism, 1), ptr.Deref(job.Spec.Completions, ptr.Deref(job.Spec.Parallelism, 1)))
	c.running, c.suspended = job.Status.Active > 0, ptr.Deref(job.Spec.Suspend, false)
	c.ready = job.Status.Succeeded+ptr.Deref(job.Status.Ready, 0) >= want
	return c
}

// jobView is what a reconcile reads of a JobSet's Jobs: the Jobs, their classification and which
// replicated Jobs have a Job of every index. During a group restart at 5000 pods the JobSet is
// reconciled thousands of times while its 1250 Jobs barely change; going through all of them on
// each reconcile made the controller's work grow as N². A view is kept with the JobSet's Jobs
// and reused while neither they nor what classify reads of the JobSet have changed.
//
// A view is shared by reconciles: its slices and maps must not be modified.
type jobView struct {
	key   viewKey
	owned []*childJob
	jobs  childJobs
	// complete holds the replicated Jobs of which a Job of every index has the name jobName
	// gives it.
	complete map[string]bool
}

// viewKey is what a view was taken of: the Jobs as of a change, and the JobSet's generation
// (its replicated Jobs), restart attempt and, with the RestartJob gate, each Job's own attempt.
type viewKey struct {
	changed     uint64
	generation  int64
	restarts    int32
	restartJob  bool
	jobRestarts [][]int32
}

func (k viewKey) equal(o viewKey) bool {
	return k.changed == o.changed && k.generation == o.generation && k.restarts == o.restarts && k.restartJob == o.restartJob &&
		slices.EqualFunc(k.jobRestarts, o.jobRestarts, slices.Equal)
}

func viewKeyOf(js *jobsetv1alpha2.JobSet, changed uint64, restartJob bool) viewKey {
	k := viewKey{changed: changed, generation: js.Generation, restarts: js.Status.Restarts, restartJob: restartJob}
	if restartJob {
		for i := range js.Spec.ReplicatedJobs {
			var restarts []int32
			if st := findReplicatedJobStatus(js.Status.ReplicatedJobsStatus, js.Spec.ReplicatedJobs[i].Name); st != nil {
				restarts = st.JobRestarts
			}
			k.jobRestarts = append(k.jobRestarts, restarts)
		}
	}
	return k
}

// kept is the key to keep with a view: its own copy of the JobSet's lists, which the reconcile
// may change after taking the view.
func (k viewKey) kept() viewKey {
	k.jobRestarts = slices.Clone(k.jobRestarts)
	for i := range k.jobRestarts {
		k.jobRestarts[i] = slices.Clone(k.jobRestarts[i])
	}
	return k
}

// view returns the view of the Jobs the JobSet controls: the last one taken, if it is still
// current, else a new one.
func (c *children) view(js *jobsetv1alpha2.JobSet, restartJob bool) *jobView {
	c.mu.RLock()
	held := c.jobs[js.UID]
	var owned []*childJob
	var key viewKey
	if held != nil {
		key = viewKeyOf(js, held.changed, restartJob)
		if v := held.view; v != nil && v.key.equal(key) {
			c.mu.RUnlock()
			return v
		}
		owned = held.list()
	}
	c.mu.RUnlock()
	v := &jobView{key: key.kept(), owned: owned, jobs: classify(js, owned, restartJob), complete: completeReplicatedJobs(js, owned)}
	if held != nil {
		c.mu.Lock()
		// Kept only if no Job changed meanwhile: the next reconcile takes a view of the new ones.
		if c.jobs[js.UID] == held && held.changed == key.changed {
			held.view = v
		}
		c.mu.Unlock()
	}
	return v
}

// completeReplicatedJobs returns, for each replicated Job, whether owned has a Job of every
// index of it, by the name jobName gives it.
func completeReplicatedJobs(js *jobsetv1alpha2.JobSet, owned []*childJob) map[string]bool {
	present := map[string][]bool{}
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		present[rj.Name] = make([]bool, rj.Replicas)
	}
	for _, job := range owned {
		if have := present[job.replicatedJob]; job.named && job.index < len(have) {
			have[job.index] = true
		}
	}
	complete := make(map[string]bool, len(present))
	for name, have := range present {
		complete[name] = !slices.Contains(have, false)
	}
	return complete
}

// anyMissing reports whether a Job of a replicated Job that allowed lets start is missing.
func (v *jobView) anyMissing(allowed map[string]bool) bool {
	for name, ok := range allowed {
		if complete, known := v.complete[name]; ok && known && !complete {
			return true
		}
	}
	return false
}

// list returns the Jobs in no particular order.
func (h *jobSetJobs) list() []*childJob {
	jobs := make([]*childJob, 0, len(h.byName))
	for _, j := range h.byName {
		jobs = append(jobs, j)
	}
	return jobs
}

// setJob records a Job's new state (nil once it is deleted), replacing old's.
func (c *children) setJob(old, job *batchv1.Job) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changes++
	if old != nil {
		if owner := jobSetOwner(old); owner != nil {
			if held := c.jobs[owner.UID]; held != nil {
				delete(held.byName, old.Name)
				held.changed, held.view = c.changes, nil
				if len(held.byName) == 0 {
					delete(c.jobs, owner.UID)
				}
			}
		}
	}
	if job == nil {
		return
	}
	if owner := jobSetOwner(job); owner != nil {
		held := c.jobs[owner.UID]
		if held == nil {
			held = &jobSetJobs{byName: map[string]*childJob{}}
			c.jobs[owner.UID] = held
		}
		held.byName[job.Name] = newChildJob(job)
		held.changed, held.view = c.changes, nil
	}
}

// jobSetAPIVersion is a JobSet owner reference's apiVersion.
var jobSetAPIVersion = jobsetv1alpha2.GroupVersion.String()

// jobSetOwner is the reference to the JobSet that controls obj, if one does: obj's own, read only.
func jobSetOwner(obj metav1.Object) *metav1.OwnerReference {
	if owner := metav1.GetControllerOfNoCopy(obj); owner != nil && owner.Kind == "JobSet" && owner.APIVersion == jobSetAPIVersion {
		return owner
	}
	return nil
}

// jobSetOfPod is the JobSet a pod belongs to by its jobset-name label.
func jobSetOfPod(pod *corev1.Pod) (types.NamespacedName, bool) {
	name, ok := pod.Labels[jobsetv1alpha2.JobSetNameKey]
	return types.NamespacedName{Namespace: pod.Namespace, Name: name}, ok
}

// setPod records a pod's new state (nil once it is deleted), replacing old's.
func (c *children) setPod(old, pod *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old != nil {
		if key, ok := jobSetOfPod(old); ok && c.pods[key] != nil {
			if c.pods[key].remove(old.UID); c.pods[key].empty() {
				delete(c.pods, key)
			}
		}
	}
	if pod == nil {
		return
	}
	if key, ok := jobSetOfPod(pod); ok {
		if c.pods[key] == nil {
			c.pods[key] = newPodTally()
		}
		c.pods[key].add(pod)
	}
}

// inPlaceView returns what the in-place restart reads of the JobSet's pods.
func (c *children) inPlaceView(js types.NamespacedName) inPlaceView {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if t := c.pods[js]; t != nil {
		return t.view()
	}
	return inPlaceView{}
}

// podTally counts a JobSet's pods by what the in-place restart reads of each (podFacts).
type podTally struct {
	pods map[types.UID]podFacts
	// attempts counts the pods that are not Failed by their readable attempt annotation.
	attempts map[int32]int
	// unreadable counts the pods that are not Failed and whose attempt annotation is not a
	// non-negative integer.
	unreadable int
	// restartCounts counts pods, Failed ones included, by their highest container restart count.
	restartCounts map[int32]int
}

func newPodTally() *podTally {
	return &podTally{pods: map[types.UID]podFacts{}, attempts: map[int32]int{}, restartCounts: map[int32]int{}}
}

// podFacts is what the in-place restart reads of one pod.
type podFacts struct {
	// restartCount is the highest restartCount of its init and regular containers.
	restartCount int32
	// attempt is its attempt annotation, when counted: the pod is not Failed and has the
	// annotation, readable (unreadable false) or not.
	attempt             int32
	counted, unreadable bool
}

func factsOf(pod *corev1.Pod) podFacts {
	var f podFacts
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range list {
			f.restartCount = max(f.restartCount, list[i].RestartCount)
		}
	}
	if pod.Status.Phase == corev1.PodFailed {
		return f
	}
	value, ok := pod.Annotations[jobsetv1alpha2.InPlaceRestartAttemptKey]
	if !ok {
		return f
	}
	f.counted = true
	n, err := strconv.ParseInt(value, 10, 32)
	if err != nil || n < 0 {
		f.unreadable = true
		return f
	}
	f.attempt = int32(n)
	return f
}

func (t *podTally) add(pod *corev1.Pod) {
	t.remove(pod.UID)
	f := factsOf(pod)
	t.pods[pod.UID] = f
	t.restartCounts[f.restartCount]++
	switch {
	case f.unreadable:
		t.unreadable++
	case f.counted:
		t.attempts[f.attempt]++
	}
}

func (t *podTally) remove(uid types.UID) {
	f, ok := t.pods[uid]
	if !ok {
		return
	}
	delete(t.pods, uid)
	decrement := func(m map[int32]int, k int32) {
		if m[k]--; m[k] <= 0 {
			delete(m, k)
		}
	}
	decrement(t.restartCounts, f.restartCount)
	switch {
	case f.unreadable:
		t.unreadable--
	case f.counted:
		decrement(t.attempts, f.attempt)
	}
}

func (t *podTally) empty() bool { return len(t.pods) == 0 }

// inPlaceView is what the in-place restart reads of a JobSet's pods (upstream reads it from a
// list of the pods on every reconcile; these are the same figures, tallied as pods change).
type inPlaceView struct {
	// restartCount is the highest restartCount of any container of any of the pods.
	restartCount int32
	// attempts are the distinct attempts of the pods that are not Failed and have one, in
	// increasing order; annotated is how many such pods there are.
	attempts  []int32
	annotated int32
	// err says that one of those pods has an attempt that is not a non-negative integer.
	err error
}

func (t *podTally) view() inPlaceView {
	var v inPlaceView
	for n := range t.restartCounts {
		v.restartCount = max(v.restartCount, n)
	}
	for attempt, pods := range t.attempts {
		v.attempts = append(v.attempts, attempt)
		v.annotated += int32(pods)
	}
	slices.Sort(v.attempts)
	if t.unreadable > 0 {
		v.err = fmt.Errorf("invalid value for annotation %s, must be non-negative integer", jobsetv1alpha2.InPlaceRestartAttemptKey)
	}
	return v
}

// jobHandler keeps children's Jobs and queues the JobSet that controls a Job on each of its
// changes (what Owns(&batchv1.Job{}) does, with the bookkeeping first).
func (c *children) jobHandler() handler.TypedEventHandler[client.Object, reconcile.Request] {
	queue := func(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if owner := jobSetOwner(obj); owner != nil {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: owner.Name}})
		}
	}
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(_ context.Context, e crevent.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if job, ok := e.Object.(*batchv1.Job); ok {
				c.setJob(nil, job)
			}
			queue(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e crevent.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			oldJob, okOld := e.ObjectOld.(*batchv1.Job)
			job, okNew := e.ObjectNew.(*batchv1.Job)
			if okOld && okNew {
				c.setJob(oldJob, job)
			}
			queue(e.ObjectOld, q)
			queue(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e crevent.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if job, ok := e.Object.(*batchv1.Job); ok {
				c.setJob(job, nil)
			}
			queue(e.Object, q)
		},
		GenericFunc: func(_ context.Context, e crevent.TypedGenericEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			queue(e.Object, q)
		},
	}
}

// podHandler keeps children's pod tallies and queues a pod's JobSet when a change of the pod
// changes what the in-place restart reads of it (inPlaceInputsChanged).
func (c *children) podHandler() handler.TypedEventHandler[client.Object, reconcile.Request] {
	queue := func(pod *corev1.Pod, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if key, ok := jobSetOfPod(pod); ok {
			q.Add(reconcile.Request{NamespacedName: key})
		}
	}
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(_ context.Context, e crevent.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if pod, ok := e.Object.(*corev1.Pod); ok {
				c.setPod(nil, pod)
				queue(pod, q)
			}
		},
		UpdateFunc: func(_ context.Context, e crevent.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			oldPod, okOld := e.ObjectOld.(*corev1.Pod)
			pod, okNew := e.ObjectNew.(*corev1.Pod)
			if !okOld || !okNew || !inPlaceInputsChanged(oldPod, pod) {
				return
			}
			c.setPod(oldPod, pod)
			queue(oldPod, q)
			queue(pod, q)
		},
		DeleteFunc: func(_ context.Context, e crevent.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if pod, ok := e.Object.(*corev1.Pod); ok {
				c.setPod(pod, nil)
				queue(pod, q)
			}
		},
		GenericFunc: func(_ context.Context, e crevent.TypedGenericEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if pod, ok := e.Object.(*corev1.Pod); ok {
				queue(pod, q)
			}
		},
	}
}
