package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
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
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/shards"
	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/timing"
)

// BenchmarkPodWatchPerShard measures the pod events the apiserver's watches send each kubelet
// process as 1, 2 and 4 processes share 40 nodes (envtest.Options.KubeletProcesses), against one
// in-process kubelet ("in-process", a single watch of every pod): 400 pods are created, run, and
// are deleted, and each process's restartbed_pod_watch_events_total is read from a node it runs.
// A shard watches only its nodes' pods (TestShardWatchesOnlyItsNodesPods),
// so its share falls as shards are added. Run it with
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

// TestShardWatchesOnlyItsNodesPods: a kubelet process watches the pods of its own nodes, not the
// cluster's: pods bound to one shard's node bring that shard their watch events and the other
// shard none at all (docs/join.md, "Shards").
func TestShardWatchesOnlyItsNodesPods(t *testing.T) {
	const pods = 10
	cluster := shardCluster(t, buildCLI(t), 2, 4)
	byShard := nodesByShard(t, cluster)
	if len(byShard) != 2 {
		t.Fatalf("the nodes are held by %d kubelet processes, want 2: %v", len(byShard), byShard)
	}
	shards := slices.Sorted(maps.Keys(byShard))
	busy, idle := shards[0], shards[1]
	ns := namespace(t, cluster, "watch")
	create(t, cluster, ns, pods, func(pod *corev1.Pod) { pod.Spec.NodeName = byShard[busy][0] })
	lives(t, cluster, ns, pods)
	events := map[string]uint64{}
	for shard, nodes := range byShard {
		events[shard] = podWatchEventsOf(t, cluster, nodes[0])
	}
	// Each pod's life is several watch events: its creation, the status writes, the deletion.
	if events[busy] < pods {
		t.Errorf("the shard running the pods saw %d pod watch events for %d pods, want at least one each: %v", events[busy], pods, events)
	}
	if events[idle] != 0 {
		t.Errorf("the shard with none of the pods saw %d pod watch events, want none: %v", events[idle], events)
	}
}

// shardCluster starts a cluster whose nodes processes kubelet processes of bin run (0: the
// in-process kubelet), stopped when the test ends.
func shardCluster(tb testing.TB, bin string, processes, nodes int) *envtest.Cluster {
	tb.Helper()
	profile := timing.Fast()
	opts := envtest.Options{Timing: &profile, Nodes: []fakekubelet.NodePool{{Name: "node", Count: nodes}}}
	if processes > 0 {
		opts.KubeletProcesses, opts.KubeletCommand = processes, []string{bin}
	}
	cluster, err := envtest.Start(context.Background(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			tb.Error(err)
		}
	})
	return cluster
}

// namespace creates a namespace that can hold pods.
func namespace(tb testing.TB, cluster *envtest.Cluster, name string) string {
	tb.Helper()
	ctx := context.Background()
	if _, err := cluster.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	if err := cluster.WaitForDefaultServiceAccount(ctx, name); err != nil {
		tb.Fatal(err)
	}
	return name
}

// create creates pods that run until deleted, and go at once then, each changed by mutate.
func create(tb testing.TB, cluster *envtest.Cluster, ns string, pods int, mutate func(*corev1.Pod)) {
	tb.Helper()
	g, gctx := errgroup.WithContext(context.Background())
	g.SetLimit(16)
	for i := range pods {
		g.Go(func() error {
			pod := builders.MakePod(fmt.Sprintf("p-%d", i), ns).RestartPolicy(corev1.RestartPolicyAlways).
				Container(builders.MakeContainer("main").Shell("sleep 3600").Obj()).Obj()
			// A shell as PID 1 ignores SIGTERM: without a grace each deletion waits 30 s.
			pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
			mutate(pod)
			_, err := cluster.Clientset.CoreV1().Pods(ns).Create(gctx, pod, metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		tb.Fatal(err)
	}
}

// lives waits until the namespace's pods run, deletes them and waits until they are gone.
func lives(tb testing.TB, cluster *envtest.Cluster, ns string, pods int) {
	tb.Helper()
	ctx := context.Background()
	cs := cluster.Clientset
	waitPods := func(what string, done func([]corev1.Pod) bool) {
		err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && done(list.Items), nil
		})
		if err != nil {
			tb.Fatalf("%s: %v", what, err)
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
		tb.Fatal(err)
	}
	waitPods("every pod gone", func(items []corev1.Pod) bool { return len(items) == 0 })
}

// nodesByShard are the cluster's nodes by the kubelet process that holds them, each sorted.
func nodesByShard(tb testing.TB, cluster *envtest.Cluster) map[string][]string {
	tb.Helper()
	list, err := cluster.Clientset.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string][]string{}
	for _, n := range list.Items {
		if shard := n.Annotations[shards.NodeAnnotation]; shard != "" {
			out[shard] = append(out[shard], n.Name)
		}
	}
	for _, nodes := range out {
		slices.Sort(nodes)
	}
	return out
}

// podWatchEventsOf reads restartbed_pod_watch_events_total of the kubelet process that runs the
// node, from the node's kubelet API itself, as the cluster's admin: the apiserver's proxy does not
// lead to a loopback address, where these processes serve it.
func podWatchEventsOf(tb testing.TB, cluster *envtest.Cluster, node string) uint64 {
	tb.Helper()
	ctx := context.Background()
	n, err := cluster.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Host = fmt.Sprintf("https://127.0.0.1:%d", n.Status.DaemonEndpoints.KubeletEndpoint.Port)
	cfg.CAData, cfg.Insecure = nil, true // the process's own CA signs its serving certificates
	client, err := rest.UnversionedRESTClientFor(withCodec(cfg))
	if err != nil {
		tb.Fatal(err)
	}
	metrics, err := client.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		tb.Fatalf("the metrics of node %s: %v", node, err)
	}
	return metricValue(tb, string(metrics), "restartbed_pod_watch_events_total")
}

// podWatchEvents runs the pods' lives on a cluster whose nodes processes kubelet processes run (0:
// the in-process kubelet) and returns each process's pod watch events, by process.
func podWatchEvents(b *testing.B, bin string, processes, nodes, pods int) map[string]uint64 {
	cluster := shardCluster(b, bin, processes, nodes)
	ns := namespace(b, cluster, "watch")
	create(b, cluster, ns, pods, func(*corev1.Pod) {})
	lives(b, cluster, ns, pods)
	out := map[string]uint64{}
	if processes == 0 {
		events, _ := cluster.Kubelet.PodWatch()
		out["in-process"] = events
		return out
	}
	for shard, nodes := range nodesByShard(b, cluster) {
		out[shard] = podWatchEventsOf(b, cluster, nodes[0])
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
func metricValue(tb testing.TB, text, name string) uint64 {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		tb.Fatalf("the metrics: %v\n%s", err, text)
	}
	f := families[name]
	if f == nil || len(f.GetMetric()) != 1 {
		tb.Fatalf("no single %s in:\n%s", name, text)
	}
	return uint64(f.GetMetric()[0].GetCounter().GetValue())
}
