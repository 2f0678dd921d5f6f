package fakekubelet

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	ctx := context.Background()
	// Realistic timing: its heartbeats (a lease renewal per node every 10 s) load the apiserver
	// as a real cluster's do; the fast profile's would cost 500 writes a second here.
	profile := timing.Realistic()
	cluster, err := envtest.Start(ctx, envtest.Options{DisableControllerManager: true, Timing: &profile,
		Nodes: []fakekubelet.NodePool{{Name: "bench", Count: nodes}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			b.Error(err)
		}
	})

	b.StopTimer()
	for i := range b.N {
		ns := fmt.Sprintf("bench-%d", i)
		if _, err := cluster.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
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
		var g errgroup.Group
		g.SetLimit(32)
		for j := range pods {
			g.Go(func() error {
				pod := builders.MakePod(fmt.Sprintf("w-%d", j), ns).
					Container(builders.MakeContainer("worker").Shell("sleep 3600").Obj()).Obj()
				// No node lifecycle controller here to lift the not-ready taint.
				pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
				_, err := cluster.Clientset.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
				return err
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
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
