// Package podstatus tests the emulated kubelet's status manager (fakekubelet/status) against a
// real apiserver: coalescing, ordering, refused transitions and replaced pods.
package podstatus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet/restart"
	"github.com/restartbed/restartbed/fakekubelet/status"
)

// One control plane for the package; each test makes its own pods.
var cluster *envtest.Cluster

func TestMain(m *testing.M) { os.Exit(run(m)) }

// run starts the package's cluster, runs the tests and stops the cluster; it returns the exit
// code, so that the cluster stops before the process exits.
func run(m *testing.M) int {
	var err error
	cluster, err = envtest.Start(context.Background(), envtest.Options{DisableControllerManager: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the cluster:", err)
		return 1
	}
	code := m.Run()
	if err := cluster.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the cluster:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// startManager runs a Manager for one test.
func startManager(t *testing.T) *status.Manager {
	t.Helper()
	m, err := status.New(status.Options{Client: status.OneClient(cluster.Clientset.CoreV1()), Rules: restart.Rules{RestartAll: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx, 4) }()
	t.Cleanup(func() { cancel(); <-done })
	return m
}

// newPod creates a pod with one container "main" and the given container restart policy.
func newPod(t *testing.T, name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
		},
	}
	for _, f := range mutate {
		f(pod)
	}
	created, err := cluster.Clientset.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.Clientset.CoreV1().Pods("default").Delete(context.Background(), name, *metav1.NewDeleteOptions(0))
	})
	return created
}

func withMessage(base corev1.PodStatus, msg string) corev1.PodStatus {
	s := *base.DeepCopy()
	s.Phase = corev1.PodPending
	s.Conditions = []corev1.PodCondition{{Type: "example.com/progress", Status: corev1.ConditionTrue, Message: msg}}
	return s
}

func apiStatus(t *testing.T, pod *corev1.Pod) corev1.PodStatus {
	t.Helper()
	got, err := cluster.Clientset.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Status
}

func progress(s corev1.PodStatus) string {
	for _, c := range s.Conditions {
		if c.Type == "example.com/progress" {
			return c.Message
		}
	}
	return ""
}

// Statuses set before a writer gets to them are written once, as the latest.
func TestCoalesces(t *testing.T) {
	m, err := status.New(status.Options{Client: status.OneClient(cluster.Clientset.CoreV1())})
	if err != nil {
		t.Fatal(err)
	}
	pod := newPod(t, "coalesce")
	for i := range 100 {
		m.Set(pod, withMessage(pod.Status, fmt.Sprint(i)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx, 4) }()
	defer func() { cancel(); <-done }()

	if err := m.SetAndWait(ctx, pod, withMessage(pod.Status, "99")); err != nil {
		t.Fatal(err)
	}
	if got := progress(apiStatus(t, pod)); got != "99" {
		t.Errorf("API shows %q, want the last status, 99", got)
	}
	if got := m.Writes(); got != 1 {
		t.Errorf("%d writes, want 1 for 101 sets of which the last 2 are equal", got)
	}
}

// Concurrent setters: the API ends with the last status set, never an older one.
func TestLastWriteWins(t *testing.T) {
	m := startManager(t)
	pod := newPod(t, "order")
	var wg sync.WaitGroup
	for i := range 50 {
		m.Set(pod, withMessage(pod.Status, fmt.Sprint(i)))
		if i%10 == 0 {
			wg.Go(func() { _ = m.SetAndWait(context.Background(), pod, withMessage(pod.Status, fmt.Sprint(i))) })
			wg.Wait()
		}
	}
	if err := m.SetAndWait(context.Background(), pod, withMessage(pod.Status, "last")); err != nil {
		t.Fatal(err)
	}
	if got := progress(apiStatus(t, pod)); got != "last" {
		t.Errorf("API shows %q, want last", got)
	}
	if w := m.Writes(); w < 2 || w > 51 {
		t.Errorf("%d writes for 51 distinct statuses", w)
	}
}

// A status the apiserver would refuse is not sent, and the caller hears why.
func TestRefusesForbiddenTransitions(t *testing.T) {
	m := startManager(t)
	ctx := context.Background()
	terminated := func(pod *corev1.Pod) corev1.PodStatus {
		s := *pod.Status.DeepCopy()
		s.Phase = corev1.PodRunning
		s.ContainerStatuses = []corev1.ContainerStatus{{
			Name: "main", Image: "busybox",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}},
		}}
		return s
	}
	revived := func(s corev1.PodStatus) corev1.PodStatus {
		s = *s.DeepCopy()
		s.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		return s
	}

	t.Run("a container that may not restart stays terminated", func(t *testing.T) {
		pod := newPod(t, "never")
		dead := terminated(pod)
		if err := m.SetAndWait(ctx, pod, dead); err != nil {
			t.Fatal(err)
		}
		err := m.SetAndWait(ctx, pod, revived(dead))
		if err == nil || !strings.Contains(err.Error(), `container "main" may not be transitioned to non-terminated state`) {
			t.Fatalf("SetAndWait() = %v, want the transition refused", err)
		}
		if got := apiStatus(t, pod).ContainerStatuses[0].State.Terminated; got == nil {
			t.Error("the refused status reached the API")
		}
	})

	t.Run("a pod that can restart all its containers may revive any", func(t *testing.T) {
		pod := newPod(t, "rac", func(p *corev1.Pod) {
			p.Spec.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
			p.Spec.Containers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{
				Action:    corev1.ContainerRestartRuleActionRestartAllContainers,
				ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
			}}
		})
		dead := terminated(pod)
		if err := m.SetAndWait(ctx, pod, dead); err != nil {
			t.Fatal(err)
		}
		if err := m.SetAndWait(ctx, pod, revived(dead)); err != nil {
			t.Fatalf("the apiserver allows this; so must we: %v", err)
		}
		if apiStatus(t, pod).ContainerStatuses[0].State.Running == nil {
			t.Error("the revived status did not reach the API")
		}
	})

	t.Run("a terminal phase stays", func(t *testing.T) {
		pod := newPod(t, "terminal")
		failed := *pod.Status.DeepCopy()
		failed.Phase = corev1.PodFailed
		if err := m.SetAndWait(ctx, pod, failed); err != nil {
			t.Fatal(err)
		}
		running := *failed.DeepCopy()
		running.Phase = corev1.PodRunning
		err := m.SetAndWait(ctx, pod, running)
		if err == nil || !strings.Contains(err.Error(), "phase may not change from Failed to Running") {
			t.Fatalf("SetAndWait() = %v, want the phase change refused", err)
		}
	})
}

// A pod replaced by another of the same name never receives the old pod's status.
func TestReplacedPodIsLeftAlone(t *testing.T) {
	m := startManager(t)
	ctx := context.Background()
	old := newPod(t, "replaced")
	if err := cluster.Clientset.CoreV1().Pods("default").Delete(ctx, old.Name, *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatal(err)
	}
	replacement := newPod(t, "replaced")
	err := m.SetAndWait(ctx, old, withMessage(old.Status, "for the old pod"))
	if !errors.Is(err, status.ErrPodGone) {
		t.Fatalf("SetAndWait() = %v, want ErrPodGone", err)
	}
	if got := progress(apiStatus(t, replacement)); got != "" {
		t.Errorf("the replacement got the old pod's status %q", got)
	}
}
