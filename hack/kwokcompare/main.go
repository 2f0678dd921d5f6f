// Command kwokcompare measures `restartbed kubelet` beside KWOK's controller on the same control
// plane and machine (make bench-kwok; docs/performance.md): for each, a fresh restartbed control
// plane with no nodes of its own, NODES Node objects annotated kwok.x-k8s.io/node=fake as KWOK's
// users write them, the fake-node process taking them over, then NODES pods, one per node (by
// hostname, through kube-scheduler), created until every one is Running and Ready, and deleted
// until every one is gone. It reports, per run, the two durations, the fake-node process's CPU
// time per pod over both phases, and its peak resident memory. Runs alternate between the two,
// so that a machine's drift favours neither.
//
// KWOK runs with the stages kwokctl gives it by default (fast node initialisation, heartbeat
// with Lease, fast pod ready, complete and delete), read from its module. It asserts nothing:
// the figures go into docs/performance.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/restartbed/restartbed/bench"
	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/internal/procfs"
	"github.com/restartbed/restartbed/timing"
)

// The fake-node processes compared.
const (
	kwok       = "kwok"
	restartbed = "restartbed kubelet"
)

// writers bounds the concurrent creations and deletions, as a load generator's client would.
const writers = 32

// kwokStages are the stage files kwokctl configures KWOK with by default, in its module.
var kwokStages = []string{
	"kustomize/stage/node/fast/node-initialize.yaml",
	"kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"kustomize/stage/pod/fast/pod-ready.yaml",
	"kustomize/stage/pod/fast/pod-complete.yaml",
	"kustomize/stage/pod/fast/pod-delete.yaml",
}

type options struct {
	nodes               int
	runs                int
	kwokBinary, kwokMod string
	restartbedBinary    string
	version             string
	only                string
	// cpuProfile, if set, is where a CPU profile of `restartbed kubelet` over the first
	// profileFor of each run's pods phase goes (the run's number is added before its extension).
	cpuProfile string
	profileFor time.Duration
}

// result is one run's figures.
type result struct {
	impl              string
	run               int
	toRunning, toGone time.Duration
	cpuPerPod         time.Duration
	peakRSS           int64
	// writes are the API writes of both phases but the test's own creations and deletions
	// (every client's, the control plane's included), by kind.
	writes bench.Writes
}

func main() {
	klog.SetLogger(logr.Discard())
	ctrllog.SetLogger(logr.Discard())
	var o options
	flag.IntVar(&o.nodes, "nodes", 1000, "nodes, and pods (one per node)")
	flag.IntVar(&o.runs, "runs", 2, "runs of each fake-node process, alternating")
	flag.StringVar(&o.kwokBinary, "kwok", "", "KWOK's kwok binary")
	flag.StringVar(&o.kwokMod, "kwok-module", "", "KWOK's module directory, for its stages")
	flag.StringVar(&o.restartbedBinary, "restartbed", "", "the restartbed binary")
	flag.StringVar(&o.version, "kubernetes-version", "", "release of the control plane (default: the newest)")
	flag.StringVar(&o.only, "only", "", "run only this fake-node process: kwok or restartbed")
	flag.StringVar(&o.cpuProfile, "restartbed-cpuprofile", "",
		"write a CPU profile of restartbed kubelet from the pods' creation, taken through its kubelet API's /debug/pprof, to this file (run-N added before the extension)")
	flag.DurationVar(&o.profileFor, "profile-for", 30*time.Second, "how long --restartbed-cpuprofile profiles")
	flag.Parse()
	if o.kwokBinary == "" || o.kwokMod == "" || o.restartbedBinary == "" || o.nodes < 1 || o.runs < 1 || o.profileFor < time.Second {
		fmt.Fprintln(os.Stderr, "kwokcompare: --kwok, --kwok-module and --restartbed are required; --nodes and --runs must be positive; --profile-for at least 1s")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var results []result
	for run := 1; run <= o.runs; run++ {
		for _, impl := range []string{kwok, restartbed} {
			if o.only != "" && !strings.HasPrefix(impl, o.only) {
				continue
			}
			r, err := measure(ctx, o, impl, run)
			if err != nil {
				fmt.Fprintf(os.Stderr, "kwokcompare: %s, run %d: %v\n", impl, run, err)
				os.Exit(1)
			}
			fmt.Fprintf(os.Stderr, "%s run %d: Running %.1fs, gone %.1fs, %.2f ms CPU/pod, peak RSS %d MiB\n",
				impl, run, r.toRunning.Seconds(), r.toGone.Seconds(), ms(r.cpuPerPod), r.peakRSS>>20)
			results = append(results, r)
		}
	}
	report(os.Stdout, o, results)
}

// measure runs one fake-node process through the pods' life on a fresh control plane.
func measure(ctx context.Context, o options, impl string, run int) (result, error) {
	// Upstream's timings, as `restartbed up` and a real cluster have them: under the fast
	// profile's node grace KWOK's heartbeats (a Lease of 40 s) let nodes go NotReady, and the
	// node lifecycle controller marks their pods NotReady for good, since KWOK marks a pod Ready
	// only once.
	profile := timing.Realistic()
	cluster, err := envtest.Start(ctx, envtest.Options{KubernetesVersion: o.version, ExternalNodes: o.nodes, Timing: &profile})
	if err != nil {
		return result{}, err
	}
	defer func() { _ = cluster.Stop() }() // the cluster's own errors are not the measurement's
	dir, err := os.MkdirTemp("", "kwokcompare-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	data, err := cluster.Kubeconfig()
	if err != nil {
		return result{}, err
	}
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		return result{}, err
	}
	cs := cluster.Clientset
	if err := forEach(ctx, o.nodes, func(ctx context.Context, i int) error {
		_, err := cs.CoreV1().Nodes().Create(ctx, node(i), metav1.CreateOptions{})
		return err
	}); err != nil {
		return result{}, fmt.Errorf("creating the nodes: %w", err)
	}

	cmd, err := fakeNodes(o, impl, dir, kubeconfig)
	if err != nil {
		return result{}, err
	}
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait() // stopped by the signal: its status says only that
	}()
	pid := cmd.Process.Pid
	// The harness watches (one informer each for nodes and pods) rather than lists: a List of
	// every pod each 100 ms took about a tenth of kube-apiserver's CPU, which both fake-node
	// processes then competed for.
	informers := kubeinformers.NewSharedInformerFactory(cs, 0)
	nodes := informers.Core().V1().Nodes().Informer().GetStore()
	pods := informers.Core().V1().Pods().Informer().GetStore()
	watchCtx, stopWatching := context.WithCancel(ctx)
	informers.Start(watchCtx.Done())
	defer func() {
		stopWatching()
		informers.Shutdown()
	}()
	informers.WaitForCacheSync(watchCtx.Done())
	if err := waitFor(ctx, "every node Ready and schedulable", func() bool { return nodesSchedulable(nodes, o.nodes) }); err != nil {
		return result{}, err
	}

	cpu0, err := procfs.CPUTime(pid)
	if err != nil {
		return result{}, err
	}
	writes0, err := bench.ReadWrites(ctx, cs)
	if err != nil {
		return result{}, err
	}
	profiled := make(chan error, 1)
	if impl == restartbed && o.cpuProfile != "" {
		go func() { profiled <- profileKubelet(ctx, cluster, o, run) }()
	} else {
		profiled <- nil
	}
	start := time.Now()
	if err := forEach(ctx, o.nodes, func(ctx context.Context, i int) error {
		_, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, pod(i), metav1.CreateOptions{})
		return err
	}); err != nil {
		return result{}, fmt.Errorf("creating the pods: %w", err)
	}
	if err := waitFor(ctx, "every pod Running and Ready", func() bool { return podsReady(pods, o.nodes) }); err != nil {
		return result{}, err
	}
	r := result{impl: impl, run: run, toRunning: time.Since(start)}

	start = time.Now()
	if err := forEach(ctx, o.nodes, func(ctx context.Context, i int) error {
		return cs.CoreV1().Pods(metav1.NamespaceDefault).Delete(ctx, pod(i).Name, metav1.DeleteOptions{})
	}); err != nil {
		return result{}, fmt.Errorf("deleting the pods: %w", err)
	}
	if err := waitFor(ctx, "every pod gone", func() bool { return len(pods.ListKeys()) == 0 }); err != nil {
		return result{}, err
	}
	r.toGone = time.Since(start)
	cpu1, err := procfs.CPUTime(pid)
	if err != nil {
		return result{}, err
	}
	r.cpuPerPod = (cpu1 - cpu0) / time.Duration(o.nodes)
	writes1, err := bench.ReadWrites(ctx, cs)
	if err != nil {
		return result{}, err
	}
	r.writes = writes1.Since(writes0)
	// The test's own: one creation and one deletion per pod.
	r.writes["CREATE pods"] -= int64(o.nodes)
	r.writes["DELETE pods"] -= int64(o.nodes)
	if r.peakRSS, err = procfs.PeakRSS(pid); err != nil {
		return result{}, err
	}
	if err := <-profiled; err != nil {
		return result{}, fmt.Errorf("profiling restartbed kubelet: %w", err)
	}
	return r, nil
}

// profileKubelet writes a CPU profile of restartbed kubelet over o.profileFor, asked of the first
// node's kubelet API (every node's kubelet is that process) with the cluster admin's credentials.
// Not through the apiserver's node proxy: it refuses a node on a loopback address.
func profileKubelet(ctx context.Context, cluster *envtest.Cluster, o options, run int) error {
	ext := filepath.Ext(o.cpuProfile)
	file := fmt.Sprintf("%s-run-%d%s", strings.TrimSuffix(o.cpuProfile, ext), run, ext)
	n, err := cluster.Clientset.CoreV1().Nodes().Get(ctx, node(0).Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var address string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			address = a.Address
		}
	}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Host = "https://" + net.JoinHostPort(address, strconv.Itoa(int(n.Status.DaemonEndpoints.KubeletEndpoint.Port)))
	// The kubelet's serving certificate is of a CA the admin's configuration does not hold.
	cfg.Insecure, cfg.CAData, cfg.CAFile = true, nil, ""
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	client, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		return err
	}
	data, err := client.Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(int(o.profileFor/time.Second))).
		Timeout(o.profileFor + time.Minute).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("%w: %.300s", err, data)
	}
	return os.WriteFile(file, data, 0o644)
}

// fakeNodes is the command of the fake-node process, taking over the annotated nodes.
func fakeNodes(o options, impl, dir, kubeconfig string) (*exec.Cmd, error) {
	const selector = "kwok.x-k8s.io/node=fake"
	var cmd *exec.Cmd
	switch impl {
	case kwok:
		var stages []string
		for _, f := range kwokStages {
			b, err := os.ReadFile(filepath.Join(o.kwokMod, f))
			if err != nil {
				return nil, fmt.Errorf("KWOK's stages: %w", err)
			}
			stages = append(stages, string(b))
		}
		config := filepath.Join(dir, "kwok.yaml")
		if err := os.WriteFile(config, []byte(strings.Join(stages, "\n---\n")), 0o600); err != nil {
			return nil, err
		}
		cmd = exec.Command(o.kwokBinary, "--kubeconfig", kubeconfig, "--config", config,
			"--manage-nodes-with-annotation-selector", selector, "--node-lease-duration-seconds", "40",
			"--node-ip", "127.0.0.1", "--cidr", "10.64.0.0/10")
	case restartbed:
		cmd = exec.Command(o.restartbedBinary, "kubelet", "--kubeconfig", kubeconfig,
			"--manage-nodes-with-annotation-selector", selector, "--node-ip", "127.0.0.1")
	}
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	return cmd, nil
}

// node is the i-th Node as a KWOK user writes it.
func node(i int) *corev1.Node {
	name := fmt.Sprintf("kwok-node-%d", i)
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{"type": "kwok", corev1.LabelHostname: name}},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}

// pod is the i-th pod: a pause container on the i-th node.
func pod(i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{corev1.LabelHostname: fmt.Sprintf("kwok-node-%d", i)},
			Tolerations:                   []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists}},
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			Containers:                    []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
}

// nodesSchedulable reports whether n nodes are Ready and free of the node lifecycle
// controller's not-ready and unreachable taints: until then kube-scheduler refuses pods to them
// and retries after a backoff, which would be counted against the fake nodes.
func nodesSchedulable(store cache.Store, n int) bool {
	ready := 0
	for _, obj := range store.List() {
		node := obj.(*corev1.Node)
		if slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable
		}) {
			continue
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return ready == n
}

func podsReady(store cache.Store, n int) bool {
	ready := 0
	for _, obj := range store.List() {
		p := obj.(*corev1.Pod)
		for _, c := range p.Status.Conditions {
			if p.Status.Phase == corev1.PodRunning && c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return ready == n
}

// forEach runs f for 0..n-1 with writers at a time.
func forEach(ctx context.Context, n int, f func(context.Context, int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(writers)
	for i := range n {
		g.Go(func() error { return f(gctx, i) })
	}
	return g.Wait()
}

// waitFor checks ok, which reads the informers' stores, every 100 ms for 10 minutes.
func waitFor(ctx context.Context, what string, ok func() bool) error {
	deadline := time.Now().Add(10 * time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not after 10 minutes", what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// report prints the runs as docs/performance.md's table.
func report(w io.Writer, o options, results []result) {
	fmt.Fprintf(w, "%d nodes, %d pods (one per node): created → Running and Ready → deleted → gone\n\n", o.nodes, o.nodes)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "fake nodes\trun\tto Running\tto gone\tCPU per pod\tpeak RSS\tAPI writes per pod")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%.1f s\t%.1f s\t%.2f ms\t%d MiB\t%.2f\n", r.impl, r.run, r.toRunning.Seconds(), r.toGone.Seconds(),
			ms(r.cpuPerPod), r.peakRSS>>20, float64(r.writes.Total())/float64(o.nodes))
	}
	_ = tw.Flush() // a failed write to stdout has nowhere else to go
	fmt.Fprintln(w, "\nAPI writes per pod by kind (beside the test's creation and deletion; heartbeats apart):")
	for _, r := range results {
		var kinds []string
		for k, v := range r.writes {
			if v != 0 {
				kinds = append(kinds, fmt.Sprintf("%s %.2f", k, float64(v)/float64(o.nodes)))
			}
		}
		slices.Sort(kinds)
		fmt.Fprintf(w, "  %s run %d: %s\n", r.impl, r.run, strings.Join(kinds, ", "))
	}
}
