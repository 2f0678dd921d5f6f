// Package consumer shows restartbed used from a project on Kubernetes 1.35: a cluster of that
// release with emulated nodes, and a Job run by its Job controller and placed by its scheduler.
package consumer

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
)

func TestAJobIsScheduled(t *testing.T) {
	ctx := context.Background()
	cluster, err := envtest.Start(ctx, envtest.Options{KubernetesVersion: "1.35", Nodes: []fakekubelet.NodePool{{Name: "node", Count: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
	})

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
			}},
		},
	}
	if err := cluster.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := cluster.Client.List(ctx, &pods, client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
			return false, err
		}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == 2, nil
	})
	if err != nil {
		t.Fatalf("waiting for the Job's two pods to be bound to nodes: %v", err)
	}
}
