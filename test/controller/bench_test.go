package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
	"github.com/restartbed/restartbed/builtins"
	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/program"
	"github.com/restartbed/restartbed/test/specs"
)

// BenchmarkGroupRestart measures an in-place group restart of a sidecar-mode JobSet of N pods:
// from one worker's exit to every worker running again with its restart count raised, as the API
// shows it. Run it with
//
//	go test ./test/controller/ -run '^$' -bench GroupRestart -benchtime 3x
func BenchmarkGroupRestart(b *testing.B) {
	ctx := context.Background()
	ctrllog.SetLogger(logr.Discard())
	c, err := envtest.Start(ctx, envtest.Options{JobSet: true,
		Nodes:    []fakekubelet.NodePool{{Name: "bench", Count: 128}},
		Programs: []program.Rule{{Container: "in-place-restart-agent", Builtin: builtins.Agent}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := c.Stop(); err != nil {
			b.Error(err)
		}
	})
	for _, n := range []int32{8, 64, 512} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) { benchmarkGroupRestart(ctx, b, c, n) })
	}
}

func benchmarkGroupRestart(ctx context.Context, b *testing.B, c *envtest.Cluster, n int32) {
	b.StopTimer()
	ns := fmt.Sprintf("bench-%d-%d", n, b.N) // the benchmark runs again with a larger b.N
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	if err := specs.CreateAgentRBAC(ctx, c.Client, ns); err != nil {
		b.Fatal(err)
	}
	js := sidecarModeJobSet(ns, "bench", n, int32(b.N)+5)
	if err := c.Client.Create(ctx, js); err != nil {
		b.Fatal(err)
	}
	// ready reports whether every pod is Ready with its worker restarted the given number of times.
	ready := func(restarts int32) (string, bool) {
		var pods corev1.PodList
		if err := c.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: "bench"}); err != nil {
			return "", false
		}
		count := int32(0)
		for _, p := range pods.Items {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Name == "worker" && cs.Ready && cs.RestartCount == restarts && cs.State.Running != nil {
					count++
				}
			}
		}
		if len(pods.Items) == 0 {
			return "", false
		}
		return pods.Items[0].Name, count == n
	}
	waitReady := func(restarts int32, timeout time.Duration) string {
		var victim string
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
			name, ok := ready(restarts)
			victim = name
			return ok, nil
		})
		if err != nil {
			b.Fatalf("%d pods not running with %d restarts: %v", n, restarts, err)
		}
		return victim
	}
	victim := waitReady(0, 5*time.Minute)
	for i := range b.N {
		b.StartTimer()
		if err := c.Kubelet.ExitContainer(ns, victim, "worker", 1); err != nil {
			b.Fatal(err)
		}
		victim = waitReady(int32(i+1), 5*time.Minute)
		b.StopTimer()
	}
}
