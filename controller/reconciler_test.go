package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// A Job that cannot be created is reported on every attempt, as upstream does, although the
// retry changes nothing in the JobSet's status.
func TestJobCreationFailedOnEveryAttempt(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, jobsetv1alpha2.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	js := &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: "ns", UID: "uid"},
		Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "workers", Replicas: 1,
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1)}}}}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(js).WithStatusSubresource(js).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*batchv1.Job); ok {
				return errors.New("quota exceeded")
			}
			return c.Create(ctx, obj, opts...)
		}}).Build()
	recorder := events.NewFakeRecorder(10)
	r := &Reconciler{client: c, recorder: recorder, opts: Options{Clock: clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0)), Gates: DefaultFeatureGates()},
		children: newChildren()}

	for attempt := 1; attempt <= 2; attempt++ {
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "js"}}); err == nil {
			t.Fatalf("attempt %d: reconciled without error although no Job can be created", attempt)
		}
	}
	var failed int
	for len(recorder.Events) > 0 {
		if e := <-recorder.Events; strings.HasPrefix(e, corev1.EventTypeWarning+" "+reasonJobCreationFailed+" ") {
			failed++
		}
	}
	if failed != 2 {
		t.Errorf("%d %s events after two failed attempts, want 2", failed, reasonJobCreationFailed)
	}
}

// BenchmarkReconcileRunningGroup measures a reconcile of a running JobSet of 1250 Jobs (5000 pods
// at four a Job) whose Jobs did not change since the last one, as during most of a group
// restart's reconciles, which its pods' changes queue:
//
//	go test ./controller/ -run '^$' -bench ReconcileRunningGroup
func BenchmarkReconcileRunningGroup(b *testing.B) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, jobsetv1alpha2.AddToScheme} {
		if err := add(scheme); err != nil {
			b.Fatal(err)
		}
	}
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: "ns", UID: "uid", Generation: 1},
		Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "workers", Replicas: 1250,
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](4), Completions: ptr.To[int32](4)}}}}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(js).WithStatusSubresource(js).Build()
	r := &Reconciler{client: c, recorder: events.NewFakeRecorder(10), children: newChildren(),
		opts: Options{Clock: clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0)), Gates: DefaultFeatureGates()}}
	for _, job := range desiredJobs(js, false) {
		job.UID = types.UID(job.Name)
		job.Spec.Suspend = ptr.To(false)
		job.Status.Active, job.Status.Ready = 4, ptr.To[int32](4)
		r.children.setJob(nil, job)
	}
	ctx := context.Background()
	if err := r.ensureService(ctx, js); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		var events []event
		if _, err := r.reconcile(ctx, js, &events); err != nil {
			b.Fatal(err)
		}
	}
	if st := js.Status.ReplicatedJobsStatus; len(st) != 1 || st[0].Ready != 1250 {
		b.Fatalf("status %+v, want 1250 ready Jobs", st)
	}
}
