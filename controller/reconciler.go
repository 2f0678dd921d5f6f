package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// Options configure the JobSet controller.
type Options struct {
	// Clock stamps conditions and times TTLs. Default: the real clock.
	Clock clock.PassiveClock
	// Gates are JobSet's feature gates.
	Gates FeatureGates
}

// FeatureGates are the JobSet feature gates restartbed models. Both are alpha and off by default
// upstream; restartbed turns them on (DefaultFeatureGates), since testing them is its purpose.
type FeatureGates struct {
	// InPlaceRestart: off, the webhook rejects the InPlaceRestart strategy, the controller treats
	// such a JobSet like Recreate and pods are not watched.
	InPlaceRestart bool
	// RestartJob: the per-Job failure-policy actions recreate only the failed Job. Off, they act
	// as RestartJobSet and Jobs carry no job-restart-attempt.
	RestartJob bool
}

// DefaultFeatureGates are restartbed's: every modelled gate on.
func DefaultFeatureGates() FeatureGates {
	return FeatureGates{InPlaceRestart: true, RestartJob: true}
}

// Reconciler reconciles JobSets.
type Reconciler struct {
	client   client.Client
	recorder events.EventRecorder
	opts     Options
	// children holds what the Job and pod watches have seen of each JobSet's Jobs and pods.
	children *children
}

// Setup registers the controller, its indexes and watches with the manager.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	r := &Reconciler{client: mgr.GetClient(), recorder: mgr.GetEventRecorder("jobset-controller"), opts: opts, children: newChildren()}
	b := ctrl.NewControllerManagedBy(mgr).Named("jobset").For(&jobsetv1alpha2.JobSet{}).
		Watches(&batchv1.Job{}, r.children.jobHandler()).Owns(&corev1.Service{})
	if opts.Gates.InPlaceRestart {
		b = b.Watches(&corev1.Pod{}, r.children.podHandler())
	}
	return b.Complete(r)
}

// inPlaceInputsChanged reports whether a pod's update changed what the in-place restart reads
// of it (reconcileInPlaceRestart): its JobSet label, its attempt annotation, whether it failed,
// or a container's restart count. Upstream's controller reconciles the JobSet on every change of
// its pods; the outcome is the same, but a group restart of 1000 pods writes each pod's status
// four times, and most of those writes change nothing of this.
func inPlaceInputsChanged(oldObj, newObj client.Object) bool {
	oldPod, okOld := oldObj.(*corev1.Pod)
	newPod, okNew := newObj.(*corev1.Pod)
	if !okOld || !okNew {
		return true
	}
	if oldPod.Labels[jobsetv1alpha2.JobSetNameKey] != newPod.Labels[jobsetv1alpha2.JobSetNameKey] ||
		oldPod.Annotations[jobsetv1alpha2.InPlaceRestartAttemptKey] != newPod.Annotations[jobsetv1alpha2.InPlaceRestartAttemptKey] ||
		(oldPod.Status.Phase == corev1.PodFailed) != (newPod.Status.Phase == corev1.PodFailed) {
		return true
	}
	sameCounts := func(a, b []corev1.ContainerStatus) bool {
		return slices.EqualFunc(a, b, func(x, y corev1.ContainerStatus) bool { return x.RestartCount == y.RestartCount })
	}
	return !sameCounts(oldPod.Status.InitContainerStatuses, newPod.Status.InitContainerStatuses) ||
		!sameCounts(oldPod.Status.ContainerStatuses, newPod.Status.ContainerStatuses)
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// Reconcile brings one JobSet a step towards its spec, in the order of upstream's reconcile
// (docs/jobset.md, "Controller").
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var js jobsetv1alpha2.JobSet
	if err := r.client.Get(ctx, req.NamespacedName, &js); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if js.DeletionTimestamp != nil ||
		(js.Spec.ManagedBy != nil && *js.Spec.ManagedBy != jobsetv1alpha2.JobSetControllerName) {
		return ctrl.Result{}, nil
	}
	original := js.Status.DeepCopy()
	var events []event
	result, err := r.reconcile(ctx, &js, &events)
	if !apiequality.Semantic.DeepEqual(original, &js.Status) {
		if updateErr := r.client.Status().Update(ctx, &js); updateErr != nil {
			return ctrl.Result{}, errors.Join(err, fmt.Errorf("updating the status of JobSet %s: %w", req, updateErr))
		}
		for _, e := range events {
			r.recorder.Eventf(&js, nil, e.eventType, e.reason, eventAction, "%s", e.message)
		}
	}
	return result, err // controller-runtime logs it and retries
}

func (r *Reconciler) reconcile(ctx context.Context, js *jobsetv1alpha2.JobSet, events *[]event) (ctrl.Result, error) {
	now := metav1.NewTime(r.opts.Clock.Now())
	// The cache's own Jobs, not copies (children); what writes a Job copies it first.
	view := r.children.view(js, r.opts.Gates.RestartJob)
	jobs := view.jobs
	js.Status.ReplicatedJobsStatus = replicatedJobsStatus(js, jobs)

	if finished(js) {
		if err := r.deleteJobs(ctx, jobs.active); err != nil {
			return ctrl.Result{}, err
		}
		return r.expire(ctx, js)
	}
	if err := r.deleteJobs(ctx, jobs.previous); err != nil {
		return ctrl.Result{}, err
	}
	total := int32(0)
	for _, rj := range js.Spec.ReplicatedJobs {
		total += rj.Replicas
	}
	readyOrDone := int32(len(jobs.successful))
	for _, st := range js.Status.ReplicatedJobsStatus {
		readyOrDone += st.Ready
	}
	if !ptr.Deref(js.Spec.Suspend, false) && readyOrDone >= total && len(jobs.failed) == 0 {
		setCondition(js, jobsetv1alpha2.JobSetRestarting, metav1.ConditionFalse, reasonRestartingJobsReady, messageRestartingJobsReady, now)
	}

	if len(jobs.failed) > 0 {
		d := failurePolicy(js, jobs.failed, r.opts.Gates.RestartJob)
		*events = append(*events, d.events...)
		switch {
		case d.fail:
			r.fail(js, d.reason, d.message, now)
		case d.restartJob != nil:
			bumpJobRestarts(js, d.restartJob, d.countsTowardsMax)
		case d.restart:
			js.Status.Restarts++
			if d.countsTowardsMax {
				js.Status.RestartsCountTowardsMax++
			}
			setCondition(js, jobsetv1alpha2.JobSetRestarting, metav1.ConditionTrue, d.restartingReason, d.message, now)
		}
		return ctrl.Result{}, nil
	}
	if len(jobs.successful) > 0 && successPolicy(js, jobs.successful) {
		setCondition(js, jobsetv1alpha2.JobSetCompleted, metav1.ConditionTrue, reasonAllJobsCompleted, messageAllJobsCompleted, now)
		setCondition(js, jobsetv1alpha2.JobSetRestarting, metav1.ConditionFalse, reasonRestartingJobSetCompleted, messageAllJobsCompleted, now)
		js.Status.TerminalState = terminalCompleted
		*events = append(*events, event{corev1.EventTypeNormal, reasonAllJobsCompleted, messageAllJobsCompleted})
		return ctrl.Result{}, nil
	}

	// A failure to create a child is recorded on every attempt, as upstream does, whether or not
	// the status changes; the other events go out with the status write that carries them.
	if err := r.ensureService(ctx, js); err != nil {
		r.recorder.Eventf(js, nil, corev1.EventTypeWarning, reasonHeadlessServiceCreationFailed, eventAction, "%s", err)
		return ctrl.Result{}, err
	}
	if err := r.ensureClaims(ctx, js); err != nil {
		r.recorder.Eventf(js, nil, corev1.EventTypeWarning, reasonPVCCreationFailed, eventAction, "%s", err)
		return ctrl.Result{}, err
	}
	if err := r.createJobs(ctx, js, view); err != nil {
		r.recorder.Eventf(js, nil, corev1.EventTypeWarning, reasonJobCreationFailed, eventAction, "%s", err)
		return ctrl.Result{}, err
	}
	if err := r.suspendOrResume(ctx, js, jobs, now, events); err != nil {
		return ctrl.Result{}, err
	}
	if isInPlaceRestart(js) && r.opts.Gates.InPlaceRestart {
		return ctrl.Result{}, r.inPlaceRestart(js, now, events)
	}
	return ctrl.Result{}, nil
}

// fail sets the JobSet Failed with the reason and message.
func (r *Reconciler) fail(js *jobsetv1alpha2.JobSet, reason, message string, now metav1.Time) {
	setCondition(js, jobsetv1alpha2.JobSetFailed, metav1.ConditionTrue, reason, message, now)
	setCondition(js, jobsetv1alpha2.JobSetRestarting, metav1.ConditionFalse, reasonRestartingJobSetFailed, messageRestartingJobSetFailed, now)
	js.Status.TerminalState = terminalFailed
}

func (r *Reconciler) inPlaceRestart(js *jobsetv1alpha2.JobSet, now metav1.Time, events *[]event) error {
	failed, err := reconcileInPlaceRestart(js, r.children.inPlaceView(types.NamespacedName{Namespace: js.Namespace, Name: js.Name}))
	if err != nil {
		return err
	}
	if failed {
		r.fail(js, reasonReachedMaxRestarts, messageReachedMaxRestarts, now)
		*events = append(*events, event{corev1.EventTypeWarning, reasonReachedMaxRestarts, messageReachedMaxRestarts})
	}
	return nil
}

// expire deletes a finished JobSet whose ttlSecondsAfterFinished has passed, or asks to be
// called back when it will have.
func (r *Reconciler) expire(ctx context.Context, js *jobsetv1alpha2.JobSet) (ctrl.Result, error) {
	if js.Spec.TTLSecondsAfterFinished == nil {
		return ctrl.Result{}, nil
	}
	var finishedAt time.Time
	for _, c := range js.Status.Conditions {
		if (c.Type == string(jobsetv1alpha2.JobSetCompleted) || c.Type == string(jobsetv1alpha2.JobSetFailed)) && c.Status == metav1.ConditionTrue {
			finishedAt = c.LastTransitionTime.Time
		}
	}
	left := finishedAt.Add(time.Duration(*js.Spec.TTLSecondsAfterFinished) * time.Second).Sub(r.opts.Clock.Now())
	if left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	err := r.client.Delete(ctx, js, client.PropagationPolicy(metav1.DeletePropagationForeground))
	return ctrl.Result{}, client.IgnoreNotFound(err)
}

// deleteJobs deletes Jobs with foreground propagation, at most maxParallelism at a time.
func (r *Reconciler) deleteJobs(ctx context.Context, jobs []*batchv1.Job) error {
	var g errgroup.Group
	g.SetLimit(maxParallelism)
	for _, job := range jobs {
		if job.DeletionTimestamp != nil {
			continue
		}
		g.Go(func() error {
			err := r.client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground))
			return client.IgnoreNotFound(err)
		})
	}
	return g.Wait()
}

// createJobs creates the Jobs of the current attempt that do not exist, for the replicated Jobs
// the startup policy or their dependencies let start. Recreate (and InPlaceRestart) creates a Job
// as soon as no Job of its name exists; BlockingRecreate waits until every Job of earlier
// attempts is gone.
func (r *Reconciler) createJobs(ctx context.Context, js *jobsetv1alpha2.JobSet, view *jobView) error {
	if js.Spec.FailurePolicy != nil && js.Spec.FailurePolicy.RestartStrategy == jobsetv1alpha2.BlockingRecreate && len(view.jobs.previous) > 0 {
		return nil
	}
	allowed := creatable(js, metav1.NewTime(r.opts.Clock.Now()))
	// Most reconciles find every Job there; building them (a template copy each) is for when
	// one is missing.
	if !view.anyMissing(allowed) {
		return nil
	}
	exists := map[string]bool{}
	for _, job := range view.owned {
		exists[job.Name] = true
	}
	var g errgroup.Group
	g.SetLimit(maxParallelism)
	for _, job := range desiredJobs(js, r.opts.Gates.RestartJob) {
		if exists[job.Name] || !allowed[job.Labels[jobsetv1alpha2.ReplicatedJobNameKey]] {
			continue
		}
		g.Go(func() error {
			if err := r.client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating Job %s: %w", job.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// ensureService creates the headless Service that gives the pods their DNS names.
func (r *Reconciler) ensureService(ctx context.Context, js *jobsetv1alpha2.JobSet) error {
	if !dnsHostnames(js) {
		return nil
	}
	var existing corev1.Service
	err := r.client.Get(ctx, types.NamespacedName{Namespace: js.Namespace, Name: serviceName(js)}, &existing)
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	publish := js.Spec.Network == nil || js.Spec.Network.PublishNotReadyAddresses == nil || *js.Spec.Network.PublishNotReadyAddresses
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: serviceName(js), Namespace: js.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(js, jobsetv1alpha2.GroupVersion.WithKind("JobSet"))}},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: publish,
			Selector: map[string]string{jobsetv1alpha2.JobSetNameKey: js.Name}},
	}
	if err := r.client.Create(ctx, svc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating headless Service %s: %w", svc.Name, err)
	}
	return nil
}

// ensureClaims creates the PVCs of the volume claim policies that do not exist yet; with the
// Delete retention policy (the default) the JobSet owns them, so they go with it.
func (r *Reconciler) ensureClaims(ctx context.Context, js *jobsetv1alpha2.JobSet) error {
	var errs []error
	for _, policy := range js.Spec.VolumeClaimPolicies {
		owned := policy.RetentionPolicy == nil || policy.RetentionPolicy.WhenDeleted == nil ||
			*policy.RetentionPolicy.WhenDeleted == jobsetv1alpha2.RetentionPolicyDelete
		for _, t := range policy.Templates {
			labels := maps.Clone(t.Labels)
			if labels == nil {
				labels = map[string]string{}
			}
			labels[jobsetv1alpha2.JobSetNameKey] = js.Name
			pvc := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: claimName(js, t.Name), Namespace: js.Namespace, Labels: labels,
					Annotations: maps.Clone(t.Annotations)},
				Spec: *t.Spec.DeepCopy(),
			}
			if owned {
				pvc.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(js, jobsetv1alpha2.GroupVersion.WithKind("JobSet"))}
			}
			if err := r.client.Create(ctx, pvc); err != nil && !apierrors.IsAlreadyExists(err) {
				errs = append(errs, fmt.Errorf("creating PVC %s: %w", pvc.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// suspendOrResume makes the active Jobs follow spec.suspend and keeps the Suspended condition.
// Resuming goes replicated Job by replicated Job: those whose dependencies are unmet wait, and
// with startupPolicy InOrder the next one waits until the one before has started.
func (r *Reconciler) suspendOrResume(ctx context.Context, js *jobsetv1alpha2.JobSet, jobs childJobs, now metav1.Time, events *[]event) error {
	if ptr.Deref(js.Spec.Suspend, false) {
		for _, job := range jobs.active {
			if ptr.Deref(job.Spec.Suspend, false) {
				continue
			}
			patch := client.MergeFrom(job)
			job = job.DeepCopy()
			job.Spec.Suspend = ptr.To(true)
			if err := r.client.Patch(ctx, job, patch); err != nil {
				return fmt.Errorf("suspending Job %s: %w", job.Name, err)
			}
		}
		if setCondition(js, jobsetv1alpha2.JobSetSuspended, metav1.ConditionTrue, reasonSuspended, messageSuspended, now) {
			*events = append(*events, event{corev1.EventTypeNormal, reasonSuspended, messageSuspended})
		}
		return nil
	}
	// Only suspended Jobs are acted on (classify groups them); a running group has none.
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		if !dependenciesMet(js, rj) {
			continue
		}
		if inOrder(js) && started(rj, findReplicatedJobStatus(js.Status.ReplicatedJobsStatus, rj.Name)) {
			continue
		}
		for _, job := range jobs.suspended[rj.Name] {
			if err := r.resume(ctx, job, &rj.Template.Spec.Template); err != nil {
				return err
			}
		}
		if inOrder(js) {
			setInOrderInProgress(js, now)
			return nil
		}
	}
	if setCondition(js, jobsetv1alpha2.JobSetSuspended, metav1.ConditionFalse, reasonResumed, messageResumed, now) {
		*events = append(*events, event{corev1.EventTypeNormal, reasonResumed, messageResumed})
	}
	return nil
}

// resume unsuspends a Job. What a queueing controller such as Kueue may have changed in the
// replicated Job's pod template while the JobSet was suspended (labels, annotations,
// nodeSelector, tolerations, scheduling gates) is merged into the Job's template first; the
// apiserver allows that only while the Job has no startTime, so a started Job's is cleared.
func (r *Reconciler) resume(ctx context.Context, job *batchv1.Job, template *corev1.PodTemplateSpec) error {
	job = job.DeepCopy() // the cache's object
	if job.Status.StartTime != nil {
		job.Status.StartTime = nil
		if err := r.client.Status().Update(ctx, job); err != nil {
			return fmt.Errorf("clearing the startTime of Job %s: %w", job.Name, err)
		}
	}
	pod := &job.Spec.Template
	pod.Labels = mergeMaps(pod.Labels, template.Labels)
	pod.Annotations = mergeMaps(pod.Annotations, template.Annotations)
	pod.Spec.NodeSelector = mergeMaps(pod.Spec.NodeSelector, template.Spec.NodeSelector)
	pod.Spec.Tolerations = mergeSlices(pod.Spec.Tolerations, template.Spec.Tolerations)
	pod.Spec.SchedulingGates = mergeSlices(pod.Spec.SchedulingGates, template.Spec.SchedulingGates)
	job.Spec.Suspend = ptr.To(false)
	if err := r.client.Update(ctx, job); err != nil {
		return fmt.Errorf("resuming Job %s: %w", job.Name, err)
	}
	return nil
}

// mergeMaps returns base with every entry of over set (over wins).
func mergeMaps(base, over map[string]string) map[string]string {
	if len(over) == 0 {
		return base
	}
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, over)
	return out
}

// mergeSlices returns base followed by the items of more that base does not already hold.
func mergeSlices[T any](base, more []T) []T {
	out := slices.Clone(base)
	for _, item := range more {
		if !slices.ContainsFunc(out, func(x T) bool { return apiequality.Semantic.DeepEqual(x, item) }) {
			out = append(out, item)
		}
	}
	return out
}
