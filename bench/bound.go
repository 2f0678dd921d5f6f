package bench

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/fakekubelet/status"
)

// Bound is the control plane's write throughput measured in the run: pods created, then each
// given a kubelet-sized status patch, at restartbed's own client concurrency, while the emulated
// nodes heartbeat as they do during the restarts.
type Bound struct {
	// Concurrency is the number of requests in flight (the fake kubelet's status writers).
	Concurrency int `json:"concurrency"`
	// Pods is how many pods were created and patched.
	Pods int `json:"pods"`
	// CreatesPerSecond and PatchesPerSecond are the rates sustained.
	CreatesPerSecond float64 `json:"createsPerSecond"`
	PatchesPerSecond float64 `json:"patchesPerSecond"`
	// CPU is what each process used while the bound's creates and patches ran: what 2×Pods
	// writes cost with nothing else to do.
	CPU CPU `json:"cpu"`
}

// unscheduled is the scheduler name of the bound's pods: kube-scheduler leaves them alone,
// so they cost the apiserver and nothing else.
const unscheduled = "restartbed-bench-unscheduled"

// measureBound creates pods copies of the benchmark's worker pod in namespace, patches each one's
// status to Running as a kubelet's first status write does; deleteBoundPods removes them.
func measureBound(ctx context.Context, cs kubernetes.Interface, namespace string, pods, concurrency int) (Bound, error) {
	b := Bound{Concurrency: concurrency, Pods: pods}
	template := benchJobSet(namespace, 1, 1, InPlace).Spec.ReplicatedJobs[0].Template.Spec.Template
	template.Spec.SchedulerName = unscheduled

	names := make([]string, pods)
	uids := make([]types.UID, pods)
	start := time.Now()
	err := eachBoundPod(ctx, pods, concurrency, func(ctx context.Context, i int) error {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: boundPodName(i), Namespace: namespace}, Spec: template.Spec}
		created, err := cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating pod %d of the write bound: %w", i, err)
		}
		names[i], uids[i] = created.Name, created.UID
		return nil
	})
	if err != nil {
		return b, err
	}
	b.CreatesPerSecond = float64(pods) / time.Since(start).Seconds()

	start = time.Now()
	err = eachBoundPod(ctx, pods, concurrency, func(ctx context.Context, i int) error {
		patch, err := runningPatch(uids[i], &template.Spec)
		if err != nil {
			return err
		}
		if _, err := cs.CoreV1().Pods(namespace).Patch(ctx, names[i], types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			return fmt.Errorf("patching the status of pod %s of the write bound: %w", names[i], err)
		}
		return nil
	})
	if err != nil {
		return b, err
	}
	b.PatchesPerSecond = float64(pods) / time.Since(start).Seconds()
	return b, nil
}

// deleteBoundPods removes the bound's pods from namespace, concurrency at a time. Unbound pods
// go at once. One short request each, as for their creates, not one DeleteCollection for them
// all: the apiserver deletes a collection's items within that one request (one at a time, with
// its default --delete-collection-workers), under the one-minute timeout of requests that are
// not long-running, and a 5000-pod run ended there with the request's stream reset.
func deleteBoundPods(ctx context.Context, cs kubernetes.Interface, namespace string, pods, concurrency int) error {
	return eachBoundPod(ctx, pods, concurrency, func(ctx context.Context, i int) error {
		name := boundPodName(i)
		err := cs.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting pod %s of the write bound: %w", name, err)
		}
		return nil
	})
}

// eachBoundPod calls f for each of the bound's pods by index, concurrency at a time, and returns
// the first error; f's context ends with it.
func eachBoundPod(ctx context.Context, pods, concurrency int, f func(ctx context.Context, i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for i := range pods {
		g.Go(func() error { return f(gctx, i) })
	}
	return g.Wait()
}

// boundPodName is the name of the bound's pod i.
func boundPodName(i int) string { return fmt.Sprintf("bound-%d", i) }

// runningPatch is the strategic merge patch a kubelet sends when a pod's containers have started:
// phase, conditions, addresses and a status for each container, with the pod's UID as a guard.
func runningPatch(uid types.UID, spec *corev1.PodSpec) ([]byte, error) {
	now := metav1.Now()
	st := corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "10.0.0.1", PodIP: "10.1.0.1", StartTime: &now,
		HostIPs: []corev1.HostIP{{IP: "10.0.0.1"}}, PodIPs: []corev1.PodIP{{IP: "10.1.0.1"}}, QOSClass: corev1.PodQOSBestEffort}
	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	running := func(c corev1.Container) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: "docker-pullable://" + c.Image, ContainerID: "restartbed://" + string(uid) + "-" + c.Name,
			Ready: true, Started: ptr.To(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}
	}
	for _, c := range spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, running(c))
	}
	for _, c := range spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, running(c))
	}
	patch, _, err := status.Patch(uid, corev1.PodStatus{}, st) // the kubelet's own patch, from an empty status
	return patch, err
}
