// Package consumer shows restartbed used from a project on Kubernetes 1.37: its own controller,
// built on controller-runtime v0.25, runs in-process against a restartbed cluster of that
// release, whose emulated kubelets run the pods the controller reacts to.
package consumer

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
)

// seenLabel is what the example controller writes on a pod it saw running.
const seenLabel = "example.com/seen-running"

// runningLabeler labels every running pod: the smallest controller that needs a kubelet.
type runningLabeler struct{ client client.Client }

var _ reconcile.Reconciler = (*runningLabeler)(nil)

func (r *runningLabeler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var pod corev1.Pod
	if err := r.client.Get(ctx, req.NamespacedName, &pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pod.Status.Phase != corev1.PodRunning || pod.Labels[seenLabel] == "true" {
		return reconcile.Result{}, nil
	}
	patch := client.MergeFrom(pod.DeepCopy())
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[seenLabel] = "true"
	return reconcile.Result{}, r.client.Patch(ctx, &pod, patch)
}

func TestOwnControllerOnRestartbed(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cluster, err := envtest.Start(ctx, envtest.Options{KubernetesVersion: "1.37", Nodes: []fakekubelet.NodePool{{Name: "node", Count: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
	})

	mgr, err := ctrl.NewManager(cluster.Config, ctrl.Options{Scheme: cluster.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctrl.NewControllerManagedBy(mgr).For(&corev1.Pod{}).Complete(&runningLabeler{client: mgr.GetClient()}); err != nil {
		t.Fatal(err)
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			t.Error(err)
		}
	}()

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sleep", "3600"}}}},
	}
	if err := cluster.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		return pod.Labels[seenLabel] == "true", nil
	})
	if err != nil {
		t.Fatalf("waiting for the controller to label the running pod (phase %s, node %q): %v", pod.Status.Phase, pod.Spec.NodeName, err)
	}
	var node corev1.Node
	if err := cluster.Client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, &node); err != nil {
		t.Fatal(err)
	}
	if got := node.Status.NodeInfo.KubeletVersion; got != "v1.37.2" {
		t.Errorf("the node's kubelet reports %s, want the cluster's release v1.37.2", got)
	}
}
