// Package fakekubelet is the envtest suite of the emulated kubelet: nodes, leases and the
// scheduling of the release's kube-scheduler onto them, against a real control plane.
package fakekubelet

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/images"
	"github.com/restartbed/restartbed/fakekubelet/program"
	"github.com/restartbed/restartbed/test/specs"
)

// The suite's timeouts are specs'.
const (
	Timeout  = specs.Timeout
	Interval = specs.Interval
)

var (
	cluster *envtest.Cluster
	k8s     client.Client
)

// The suite's nodes: two TPU hosts, and one tainted CPU host with its own labels.
var pools = []fakekubelet.NodePool{
	{Name: "tpu", Count: 2, Labels: map[string]string{"cloud.google.com/gke-nodepool": "tpu"}},
	{
		Name: "cpu", Count: 1,
		// A label NodeRestriction keeps from kubelets: the cluster's admin adds it after the
		// node registers.
		Labels:   map[string]string{"cloud.google.com/gke-nodepool": "cpu", "node-role.kubernetes.io/cpu": ""},
		Capacity: corev1.ResourceList{fakekubelet.TPUResource: resource.MustParse("0"), corev1.ResourceCPU: resource.MustParse("2")},
		Taints:   []corev1.Taint{{Key: "dedicated", Value: "cpu", Effect: corev1.TaintEffectNoSchedule}},
	},
}

func TestFakeKubelet(t *testing.T) {
	RegisterFailHandler(Fail)
	ctrllog.SetLogger(GinkgoLogr)
	RunSpecs(t, "fake kubelet")
}

var _ = BeforeSuite(func(ctx context.Context) {
	cluster = specs.StartCluster(ctx, envtest.Options{Nodes: pools, Programs: []program.Rule{
		{Container: "whoami", Program: whoami}, {Container: "pinger", Program: pinger}, {Container: "watcher", Program: watcher}},
		Images: []images.Rule{{Image: "not-exist-image:*", Missing: true}, {Image: "flaky.example/*", FailPulls: 1}}})
	k8s = cluster.Client
}, NodeTimeout(specs.StartTimeout))

// whoami is an in-process program that lists the pods of its namespace with the identity the
// kubelet gave it and prints the apiserver's answer; it exits 0 when the apiserver refused it as
// the pod's service account, 1 otherwise.
var whoami = program.Func(func(ctx context.Context, c *program.Container) int {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err == nil {
		_, err = cs.CoreV1().Pods(c.Pod.Namespace).List(ctx, metav1.ListOptions{})
	}
	fmt.Fprintln(c.Stdout, err)
	sa := "system:serviceaccount:" + c.Pod.Namespace + ":" + c.Pod.Spec.ServiceAccountName
	if apierrors.IsForbidden(err) && strings.Contains(err.Error(), sa) {
		return 0
	}
	return 1
})

// pinger asks the apiserver for its version (any identity may) every 100 ms and logs each change of the answer: "ok"
// or the error.
var pinger = program.Func(func(ctx context.Context, c *program.Container) int {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		fmt.Fprintln(c.Stdout, err)
		return 1
	}
	last := ""
	for {
		answer := "ok"
		if _, err := cs.Discovery().ServerVersion(); err != nil {
			answer = err.Error()
		}
		if answer != last {
			fmt.Fprintln(c.Stdout, answer)
			last = answer
		}
		select {
		case <-ctx.Done():
			return 0
		case <-c.Clock.After(100 * time.Millisecond):
		}
	}
})

// watcher watches the ConfigMaps of its namespace as its pod's service account, and watches
// again whenever a watch ends: it logs "watching" at each start and "watch ended" at each end.
var watcher = program.Func(func(ctx context.Context, c *program.Container) int {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		fmt.Fprintln(c.Stdout, err)
		return 1
	}
	for ctx.Err() == nil {
		w, err := cs.CoreV1().ConfigMaps(c.Pod.Namespace).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			fmt.Fprintln(c.Stdout, err)
			select {
			case <-ctx.Done():
			case <-c.Clock.After(100 * time.Millisecond):
			}
			continue
		}
		fmt.Fprintln(c.Stdout, "watching")
		for range w.ResultChan() {
		}
		fmt.Fprintln(c.Stdout, "watch ended")
	}
	return 0
})

func newNamespace(ctx context.Context) string {
	GinkgoHelper()
	return specs.NewNamespace(ctx, cluster)
}

// onCluster completes a kubelet's options with the suite cluster's: its apiserver, gates, timing
// and release.
func onCluster(opts fakekubelet.Options) fakekubelet.Options {
	opts.Config, opts.Timing, opts.FeatureGates = cluster.Config, cluster.Timing, cluster.FeatureGates
	opts.KubeletVersion, opts.DeclaredFeatures = cluster.Release.Kubernetes, cluster.Release.DeclaredFeatures(cluster.FeatureGates)
	return opts
}

// ownKubelet starts a kubelet of the spec's own on the suite's cluster, with the cluster's
// gates, timing and release and one tainted node, POOL-0, so that no other spec's pod lands on
// it; opts says the rest (its clock, programs, configuration file). The spec's pods bind to the
// node by name and tolerate the taint. The kubelet stops and its node goes when the spec ends.
func ownKubelet(ctx context.Context, pool string, opts fakekubelet.Options) *fakekubelet.Kubelet {
	GinkgoHelper()
	opts = onCluster(opts)
	opts.Pools = []fakekubelet.NodePool{{Name: pool, Count: 1,
		Taints: []corev1.Taint{{Key: "restartbed.dev/test", Value: pool, Effect: corev1.TaintEffectNoSchedule}}}}
	k, err := fakekubelet.New(opts)
	Expect(err).NotTo(HaveOccurred())
	Expect(k.Start(ctx)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		k.Stop()
		// The pod garbage collector deletes the pods of a node that is gone.
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: pool + "-0"}}))).To(Succeed())
	})
	return k
}

// onOwnNode binds the pod to the node of ownKubelet's pool.
func onOwnNode(pod *corev1.Pod, pool string) *corev1.Pod {
	pod.Spec.NodeName = pool + "-0"
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: "restartbed.dev/test", Operator: corev1.TolerationOpExists})
	return pod
}
