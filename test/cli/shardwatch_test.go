package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/shards"
	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/timing"
)

// BenchmarkPodWatchPerShard measures the pod events the apiserver's watches send each kubelet
// process as 1, 2 and 4 processes share 40 nodes (envtest.Options.KubeletProcesses), against one
// in-process kubelet ("in-process", a single watch of every pod): 400 pods are created, run, and
// are deleted, and each process's restartbed_pod_watch_events_total is read from a node it runs
// through the apiserver's proxy to its kubelet API. A shard watches only its nodes' pods, so its
// share falls as shards are added. Run it with
//
//	go test ./test/cli/ -run '^$' -bench PodWatchPerShard -benchtime 1x
func BenchmarkPodWatchPerShard(b *testing.B) {
	const nodes, pods = 40, 400
	bin := buildCLI(b)
	for _, processes := range []int{0, 1, 2, 4} {
		name := "in-process"
		if processes > 0 {
			name = fmt.Sprintf("shards=%d", processes)
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				perShard := podWatchEvents(b, bin, processes, nodes, pods)
				var total, most uint64
				for _, n := range perShard {
					total += n
					most = max(most, n)
				}
				b.ReportMetric(float64(total)/float64(len(perShard)), "events/process")
				b.ReportMetric(float64(most), "max-events/process")
				b.ReportMetric(float64(total)/pods, "events/pod")
				b.Logf("%s: pod watch events per process %v", name, perShard)
			}
		})
	}
}

// podWatchEvents runs the pods' lives on a cluster whose nodes processes kubelet processes run (0:
// the in-process kubelet) and returns each process's pod watch events, by process.
func podWatchEvents(b *testing.B, bin string, processes, nodes, pods int) map[string]uint64 {
	ctx := context.Background()
	profile := timing.Fast()
	opts := envtest.Options{Timing: &profile, Nodes: []fakekubelet.NodePool{{Name: "node", Count: nodes}}}
	if processes > 0 {
		opts.KubeletProcesses, opts.KubeletCommand = processes, []string{bin}
	}
	cluster, err := envtest.Start(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			b.Error(err)
		}
	}()
	cs := cluster.Clientset
	const ns = "watch"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := cluster.WaitForDefaultServiceAccount(ctx, ns); err != nil {
		b.Fatal(err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range pods {
		g.Go(func() error {
			pod := builders.MakePod(fmt.Sprintf("p-%d", i), ns).RestartPolicy(corev1.RestartPolicyAlways).
				Container(builders.MakeContainer("main").Shell("sleep 3600").Obj()).Obj()
			_, err := cs.CoreV1().Pods(ns).Create(gctx, pod, metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	waitPods := func(what string, done func([]corev1.Pod) bool) {
		err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && done(list.Items), nil
		})
		if err != nil {
			b.Fatalf("%s: %v", what, err)
		}
	}
	waitPods("every pod running", func(items []corev1.Pod) bool {
		running := 0
		for _, p := range items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == pods
	})
	if err := cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		b.Fatal(err)
	}
	waitPods("every pod gone", func(items []corev1.Pod) bool { return len(items) == 0 })

	out := map[string]uint64{}
	if processes == 0 {
		events, _ := cluster.Kubelet.PodWatch()
		out["in-process"] = events
		return out
	}
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range list.Items {
		shard := n.Annotations[shards.NodeAnnotation]
		if _, done := out[shard]; done || shard == "" {
			continue
		}
		// The node's kubelet API itself, as the cluster's admin: the apiserver's proxy does not
		// lead to a loopback address, where these shards serve it.
		cfg := rest.CopyConfig(cluster.Config)
		cfg.Host = fmt.Sprintf("https://127.0.0.1:%d", n.Status.DaemonEndpoints.KubeletEndpoint.Port)
		cfg.CAData, cfg.Insecure = nil, true // the shard's own CA signs its serving certificates
		client, err := rest.UnversionedRESTClientFor(withCodec(cfg))
		if err != nil {
			b.Fatal(err)
		}
		metrics, err := client.Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			b.Fatalf("the metrics of node %s (shard %s): %v", n.Name, shard, err)
		}
		out[shard] = metricValue(b, string(metrics), "restartbed_pod_watch_events_total")
	}
	if len(out) != processes {
		b.Fatalf("%d of %d kubelet processes run nodes: %v", len(out), processes, out)
	}
	return out
}

// withCodec gives a config the codec an unversioned REST client needs.
func withCodec(cfg *rest.Config) *rest.Config {
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return cfg
}

// metricValue is the value of the unlabelled metric name in Prometheus' text format.
func metricValue(b *testing.B, text, name string) uint64 {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		b.Fatalf("the metrics: %v\n%s", err, text)
	}
	f := families[name]
	if f == nil || len(f.GetMetric()) != 1 {
		b.Fatalf("no single %s in:\n%s", name, text)
	}
	return uint64(f.GetMetric()[0].GetCounter().GetValue())
}
