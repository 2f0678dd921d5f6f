package controller

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

func TestDesiredJobs(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "u-1"},
		Spec: jobsetv1alpha2.JobSetSpec{Suspend: ptr.To(true), ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
			{Name: "driver", Replicas: 1, GroupName: "control"},
			{Name: "workers", Replicas: 2},
		}}}
	js.Status.Restarts = 3
	jobs := desiredJobs(js, false)
	var names []string
	for _, j := range jobs {
		names = append(names, j.Name)
	}
	if diff := cmp.Diff([]string{"train-driver-0", "train-workers-0", "train-workers-1"}, names); diff != "" {
		t.Fatalf("names (-want +got):\n%s", diff)
	}
	w1 := jobs[2]
	want := map[string]string{
		jobsetv1alpha2.JobSetNameKey: "train", jobsetv1alpha2.JobSetUIDKey: "u-1", jobsetv1alpha2.ReplicatedJobNameKey: "workers",
		jobsetv1alpha2.RestartsKey: "3", jobsetv1alpha2.ReplicatedJobReplicas: "2", jobsetv1alpha2.GlobalReplicasKey: "3",
		jobsetv1alpha2.JobIndexKey: "1", jobsetv1alpha2.JobGlobalIndexKey: "2", jobsetv1alpha2.GroupNameKey: "default",
		jobsetv1alpha2.GroupReplicasKey: "2", jobsetv1alpha2.JobGroupIndexKey: "1",
		// SHA-1 of "ml/train-workers-1" (printf ml/train-workers-1 | sha1sum), as upstream computes the job-key.
		jobsetv1alpha2.JobKey: "9758140d1b2c3c8dbaebb0783352de84ca2874b5",
	}
	for _, labels := range []map[string]string{w1.Labels, w1.Annotations, w1.Spec.Template.Labels, w1.Spec.Template.Annotations} {
		if diff := cmp.Diff(want, labels); diff != "" {
			t.Errorf("stamp (-want +got):\n%s", diff)
		}
	}
	if !ptr.Deref(w1.Spec.Suspend, false) || w1.Spec.Template.Spec.Subdomain != "train" {
		t.Errorf("suspend %v subdomain %q", w1.Spec.Suspend, w1.Spec.Template.Spec.Subdomain)
	}
	js.Spec.Coordinator = &jobsetv1alpha2.Coordinator{ReplicatedJob: "driver"}
	if got := desiredJobs(js, false)[1].Spec.Template.Labels[jobsetv1alpha2.CoordinatorKey]; got != "train-driver-0-0.train" {
		t.Errorf("coordinator label %q", got)
	}
	if owner := metav1.GetControllerOf(w1); owner == nil || owner.Kind != "JobSet" || owner.Name != "train" {
		t.Errorf("controller reference %+v", owner)
	}
}

func TestExclusivePlacement(t *testing.T) {
	rj := func(name string, annotations map[string]string) jobsetv1alpha2.ReplicatedJob {
		r := jobsetv1alpha2.ReplicatedJob{Name: name, Replicas: 1}
		r.Template.Annotations = annotations
		r.Template.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "tpu"}
		return r
	}
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: "ns",
		Annotations: map[string]string{jobsetv1alpha2.ExclusiveKey: "rack"}},
		Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
			rj("a", nil),
			rj("b", map[string]string{jobsetv1alpha2.ExclusiveKey: "zone", jobsetv1alpha2.NodeSelectorStrategyKey: "true"}),
		}}}
	jobs := desiredJobs(js, false)
	a, b := jobs[0], jobs[1]
	if a.Annotations[jobsetv1alpha2.ExclusiveKey] != "rack" || a.Spec.Template.Annotations[jobsetv1alpha2.ExclusiveKey] != "rack" {
		t.Errorf("a: the JobSet's topology is not propagated: %v", a.Annotations)
	}
	if _, ok := a.Labels[jobsetv1alpha2.ExclusiveKey]; ok {
		t.Error("a: exclusive-topology became a label")
	}
	if diff := cmp.Diff(map[string]string{"pool": "tpu"}, a.Spec.Template.Spec.NodeSelector); diff != "" {
		t.Errorf("a: affinity strategy must leave the nodeSelector alone (-want +got):\n%s", diff)
	}
	if b.Annotations[jobsetv1alpha2.ExclusiveKey] != "zone" {
		t.Errorf("b: the replicated Job's topology must win: %q", b.Annotations[jobsetv1alpha2.ExclusiveKey])
	}
	if diff := cmp.Diff(map[string]string{"pool": "tpu", jobsetv1alpha2.NamespacedJobKey: "ns_js-b-0"}, b.Spec.Template.Spec.NodeSelector); diff != "" {
		t.Errorf("b: nodeSelector (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.Toleration{{Key: jobsetv1alpha2.NoScheduleTaintKey, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoSchedule}}, b.Spec.Template.Spec.Tolerations); diff != "" {
		t.Errorf("b: tolerations (-want +got):\n%s", diff)
	}
	if js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.NodeSelector[jobsetv1alpha2.NamespacedJobKey] != "" {
		t.Error("the JobSet's own template was modified")
	}
}

func TestClaimVolumes(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: "ns"},
		Spec: jobsetv1alpha2.JobSetSpec{
			VolumeClaimPolicies: []jobsetv1alpha2.VolumeClaimPolicy{{Templates: []corev1.PersistentVolumeClaim{
				{ObjectMeta: metav1.ObjectMeta{Name: "ckpt"}}, {ObjectMeta: metav1.ObjectMeta{Name: "unused"}}}}},
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "w", Replicas: 1}}}}
	js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "init",
		VolumeMounts: []corev1.VolumeMount{{Name: "ckpt", MountPath: "/ckpt"}}}}
	got := desiredJobs(js, false)[0].Spec.Template.Spec.Volumes
	want := []corev1.Volume{{Name: "ckpt", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "ckpt-js"}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("volumes (-want +got):\n%s", diff)
	}
}

// The Job watch keeps each JobSet's Jobs by the JobSet that controls them: another owner's Jobs
// and Jobs that no JobSet controls are not its; an update replaces, a delete removes.
func TestChildrenJobs(t *testing.T) {
	owned := func(name, owner string, uid types.UID, restarts string) *batchv1.Job {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
			Labels: map[string]string{jobsetv1alpha2.RestartsKey: restarts}}}
		if owner != "" {
			job.OwnerReferences = []metav1.OwnerReference{{APIVersion: jobsetv1alpha2.GroupVersion.String(), Kind: "JobSet",
				Name: owner, UID: uid, Controller: ptr.To(true)}}
		}
		return job
	}
	c := newChildren()
	c.setJob(nil, owned("js-w-0", "js", "u1", "0"))
	c.setJob(nil, owned("js-w-1", "js", "u1", "0"))
	c.setJob(nil, owned("other-w-0", "other", "u2", "0"))
	c.setJob(nil, owned("bare", "", "", "0"))
	names := func(uid types.UID) map[string]int {
		out := map[string]int{}
		js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{UID: uid}}
		for _, j := range c.view(js, false).owned {
			out[j.Name] = j.restarts
		}
		return out
	}
	if diff := cmp.Diff(map[string]int{"js-w-0": 0, "js-w-1": 0}, names("u1")); diff != "" {
		t.Errorf("Jobs of u1 (-want +got):\n%s", diff)
	}
	c.setJob(owned("js-w-1", "js", "u1", "0"), owned("js-w-1", "js", "u1", "1"))
	c.setJob(owned("js-w-0", "js", "u1", "0"), nil)
	if diff := cmp.Diff(map[string]int{"js-w-1": 1}, names("u1")); diff != "" {
		t.Errorf("Jobs of u1 after an update and a delete (-want +got):\n%s", diff)
	}
	c.setJob(owned("other-w-0", "other", "u2", "0"), nil)
	if _, ok := c.jobs["u2"]; ok {
		t.Error("u2 is still held with no Jobs left")
	}
}

// A Job is missing when no Job the JobSet controls has its name; Jobs of replicated Jobs not
// allowed to start yet do not count.
func TestAnyMissing(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: "ns", UID: "u1"},
		Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "a", Replicas: 2}, {Name: "b", Replicas: 1}}}}
	desired := desiredJobs(js, false)
	c := newChildren()
	for _, job := range desired {
		c.setJob(nil, job)
	}
	all := map[string]bool{"a": true, "b": true}
	if c.view(js, false).anyMissing(all) {
		t.Error("every Job is there, yet one is missing")
	}
	if c.view(js, false).anyMissing(map[string]bool{"b": true, "c": true}) {
		t.Error("a replicated Job the JobSet does not have counts as missing")
	}
	c.setJob(desired[0], nil)
	if !c.view(js, false).anyMissing(all) {
		t.Error("js-a-0 is gone, yet none is missing")
	}
	if c.view(js, false).anyMissing(map[string]bool{"b": true}) {
		t.Error("only b may start and its Job is there, yet one is missing")
	}
	renamed := desired[0].DeepCopy()
	renamed.Name = "js-a-0-old"
	c.setJob(nil, renamed)
	if !c.view(js, false).anyMissing(all) {
		t.Error("a Job with another name stood in for js-a-0")
	}
}

// A reconcile reuses the last view of a JobSet's Jobs only while it is current: any change of a
// Job, of the JobSet's generation, its restart attempt or (with RestartJob) a Job's own attempt
// takes a new one, and a view is never that of another JobSet.
func TestViewIsCurrent(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: "ns", UID: "u1", Generation: 1},
		Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "a", Replicas: 2}}}}
	c := newChildren()
	desired := desiredJobs(js, true)
	for _, job := range desired {
		c.setJob(nil, job)
	}
	other := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "ns", UID: "u2", Generation: 1}}
	if v := c.view(other, true); len(v.owned) != 0 || len(v.jobs.active) != 0 {
		t.Fatalf("the view of a JobSet without Jobs has %d Jobs", len(v.owned))
	}
	first := c.view(js, true)
	if len(first.jobs.active) != 2 || c.view(js, true) != first {
		t.Fatalf("%d active Jobs; an unchanged JobSet got a new view", len(first.jobs.active))
	}
	for _, change := range []struct {
		name string
		edit func()
	}{
		{"a Job's change", func() {
			ready := desired[1].DeepCopy()
			ready.Status.Active, ready.Status.Ready = 1, ptr.To[int32](1)
			c.setJob(desired[1], ready)
		}},
		{"a new generation", func() { js.Generation++ }},
		{"a JobSet restart", func() { js.Status.Restarts++ }},
		{"a Job's own restart", func() {
			js.Status.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: "a", JobRestarts: []int32{0, 1}}}
		}},
		{"the same Job's next restart", func() { js.Status.ReplicatedJobsStatus[0].JobRestarts[1]++ }},
	} {
		before := c.view(js, true)
		change.edit()
		if c.view(js, true) == before {
			t.Errorf("after %s the view is the one before", change.name)
		}
	}
	// The last view, after both Jobs' attempts fell behind the JobSet's, has them as previous.
	if v := c.view(js, true); len(v.jobs.previous) != 2 || len(v.jobs.active) != 0 {
		t.Errorf("previous %d, active %d, want 2 and 0", len(v.jobs.previous), len(v.jobs.active))
	}
	// A Job's change while a view is being taken: the view is used, not kept.
	c.mu.RLock()
	held := c.jobs[js.UID]
	c.mu.RUnlock()
	c.setJob(desired[0], desired[0])
	stale := &jobView{key: viewKeyOf(js, held.changed-1, true)}
	held.view = stale
	if c.view(js, true) == stale {
		t.Error("a view of Jobs that changed since was reused")
	}
}

// TestReplicatedJobsStatus counts each kind of Job once, by its replicated Job, and leaves out the
// Jobs of an earlier attempt.
func TestReplicatedJobsStatus(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "u-1"},
		Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "driver", Replicas: 1},
			{Name: "workers", Replicas: 5}}}}
	js.Status.Restarts = 1
	js.Status.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: "workers", JobRestarts: []int32{0, 2}}}
	job := func(rj string, index, restarts int, edit func(*batchv1.Job)) *childJob {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train-" + rj + "-" + strconv.Itoa(index), Namespace: "ml",
			Labels: map[string]string{jobsetv1alpha2.ReplicatedJobNameKey: rj, jobsetv1alpha2.JobIndexKey: strconv.Itoa(index),
				jobsetv1alpha2.RestartsKey: strconv.Itoa(restarts)}},
			Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2)}}
		edit(j)
		return newChildJob(j)
	}
	condition := func(t batchv1.JobConditionType) func(*batchv1.Job) {
		return func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue},
				{Type: t, Status: corev1.ConditionTrue}}
		}
	}
	jobs := []*childJob{
		job("driver", 0, 1, func(j *batchv1.Job) { j.Status.Active, j.Status.Ready = 2, ptr.To[int32](2) }),
		job("workers", 0, 1, condition(batchv1.JobComplete)),
		job("workers", 1, 1, condition(batchv1.JobFailed)),
		job("workers", 2, 1, func(j *batchv1.Job) { j.Status.Active, j.Status.Succeeded, j.Status.Ready = 1, 1, ptr.To[int32](1) }),
		job("workers", 3, 1, func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }),
		job("workers", 4, 0, func(j *batchv1.Job) { j.Status.Active = 2 }),         // an earlier attempt's
		job("workers", 5, 1, func(j *batchv1.Job) { j.Status.Conditions = nil }),   // its Job not yet started
		job("workers", 6, 1, condition(batchv1.JobConditionType("FailureTarget"))), // not finished yet
	}
	c := classify(js, jobs, false)
	if len(c.previous) != 1 || len(c.successful) != 1 || len(c.failed) != 1 || len(c.active) != 5 {
		t.Fatalf("previous %d, successful %d, failed %d, active %d", len(c.previous), len(c.successful), len(c.failed), len(c.active))
	}
	want := []jobsetv1alpha2.ReplicatedJobStatus{{Name: "driver", Active: 1, Ready: 1},
		{Name: "workers", Succeeded: 1, Failed: 1, Active: 1, Ready: 1, Suspended: 1, JobRestarts: []int32{0, 2}}}
	if diff := cmp.Diff(want, replicatedJobsStatus(js, c)); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}
