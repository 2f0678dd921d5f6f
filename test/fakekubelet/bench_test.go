package fakekubelet

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/timing"
)

// BenchmarkStartPods measures one kubelet serving 2000 pods on 500 nodes: pods started per
// second (from the first create to every pod Running and Ready, as the API shows it), status
// patches per pod start, and heap per running pod. Run it with
//
//	go test ./test/fakekubelet/ -run '^$' -bench StartPods -benchtime 1x
func BenchmarkStartPods(b *testing.B) {
	const nodes, pods = 500, 2000
	cluster := benchCluster(b, nodes)

	b.StopTimer()
	for i := range b.N {
		ns := createNamespace(b, cluster, fmt.Sprintf("bench-%d", i))
		var ready atomic.Int64
		done := make(chan struct{})
		var once sync.Once
		seen := sync.Map{}
		factory := informers.NewSharedInformerFactoryWithOptions(cluster.Clientset, 0, informers.WithNamespace(ns))
		count := func(obj any) {
			p := obj.(*corev1.Pod)
			if p.Status.Phase != corev1.PodRunning {
				return
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					if _, dup := seen.LoadOrStore(p.UID, true); !dup && ready.Add(1) == pods {
						once.Do(func() { close(done) })
					}
				}
			}
		}
		_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: count, UpdateFunc: func(_, obj any) { count(obj) }})
		stop := make(chan struct{})
		factory.Start(stop)
		factory.WaitForCacheSync(stop)

		goruntime.GC()
		var before goruntime.MemStats
		goruntime.ReadMemStats(&before)
		writesBefore := cluster.Kubelet.StatusWrites()

		b.StartTimer()
		start := time.Now()
		createPods(b, cluster, ns, pods, builders.MakeContainer("worker").Shell("sleep 3600").Obj())
		select {
		case <-done:
		case <-time.After(5 * time.Minute):
			b.Fatalf("only %d of %d pods ready after 5 minutes", ready.Load(), pods)
		}
		elapsed := time.Since(start)
		b.StopTimer()

		goruntime.GC()
		var after goruntime.MemStats
		goruntime.ReadMemStats(&after)
		close(stop)
		b.ReportMetric(float64(pods)/elapsed.Seconds(), "pods/s")
		b.ReportMetric(float64(cluster.Kubelet.StatusWrites()-writesBefore)/pods, "writes/pod")
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/pods, "heapB/pod")
	}
}

// BenchmarkFailingStartupProbes measures what a kubelet spends on a startup probe that keeps
// failing, as every JobSet agent's does while it waits at the barrier of a group restart: 1000
// pods on 250 nodes, each with a startup probe every second that nothing answers, so that every
// probe fails and makes an Unhealthy event. Once every pod's event has been written 25 times (the
// spam filter's burst), each further failure is correlated and dropped; the benchmark then
// reports this process's CPU per failed probe, less what the idle nodes cost before the pods came.
// A restart's barrier wait costs the kubelets pods × seconds of these. Run it with
//
//	go test ./test/fakekubelet/ -run '^$' -bench FailingStartupProbes -benchtime 1x
func BenchmarkFailingStartupProbes(b *testing.B) {
	const nodes, pods, window = 250, 1000, 30 * time.Second
	ctx := context.Background()
	cluster := benchCluster(b, nodes)

	b.StopTimer()
	time.Sleep(10 * time.Second) // the nodes registered and heartbeating
	idle := cpuOver(b, window)
	for i := range b.N {
		ns := createNamespace(b, cluster, fmt.Sprintf("probes-%d", i))
		waiter := builders.MakeContainer("waiter").Shell("sleep 3600").Obj()
		waiter.StartupProbe = &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 100000, ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/barrier", Port: intstr.FromInt32(8080)}}}
		createPods(b, cluster, ns, pods, waiter)
		// Every pod's Unhealthy event is written with a count past the spam filter's burst: from
		// here on, the failures are counted and dropped.
		deadline := time.Now().Add(10 * time.Minute)
		for spent := 0; spent < pods; {
			if time.Now().After(deadline) {
				b.Fatalf("only %d of %d pods' Unhealthy events past the burst after 10 minutes", spent, pods)
			}
			time.Sleep(2 * time.Second)
			list, err := cluster.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Unhealthy"})
			if err != nil {
				b.Fatal(err)
			}
			spent = 0
			for _, ev := range list.Items {
				if ev.Count >= 25 {
					spent++
				}
			}
		}

		b.StartTimer()
		busy := cpuOver(b, window)
		b.StopTimer()
		b.ReportMetric(float64((busy-idle).Microseconds())/(pods*window.Seconds()), "cpu-µs/probe")
	}
}

// cpuOver is the CPU this process uses over the next window.
func cpuOver(b *testing.B, window time.Duration) time.Duration {
	before := processCPU(b)
	time.Sleep(window)
	return processCPU(b) - before
}

// processCPU is the user and system CPU this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchCluster starts a cluster of the nodes without kube-controller-manager, in realistic
// timing: its heartbeats (a lease renewal per node every 10 s) load the apiserver as a real
// cluster's do; the fast profile's would cost a write per node every 2 s.
func benchCluster(b *testing.B, nodes int) *envtest.Cluster {
	profile := timing.Realistic()
	cluster, err := envtest.Start(context.Background(), envtest.Options{DisableControllerManager: true, Timing: &profile,
		Nodes: []fakekubelet.NodePool{{Name: "bench", Count: nodes}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			b.Error(err)
		}
	})
	return cluster
}

// createNamespace creates the namespace and returns its name.
func createNamespace(b *testing.B, cluster *envtest.Cluster, name string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cluster.Clientset.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	return name
}

// createPods creates n pods w-0 ... in the namespace, 32 at a time, each of the one container.
// They tolerate every taint: no node lifecycle controller runs to lift the nodes' not-ready one.
func createPods(b *testing.B, cluster *envtest.Cluster, ns string, n int, c corev1.Container) {
	var g errgroup.Group
	g.SetLimit(32)
	for j := range n {
		g.Go(func() error {
			pod := builders.MakePod(fmt.Sprintf("w-%d", j), ns).Container(c).Obj()
			pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			_, err := cluster.Clientset.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}
