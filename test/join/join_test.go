// Package join runs one controller test, unchanged, on restartbed's own control plane and on a
// cluster restartbed did not start (envtest.Options.ExistingCluster), as docs/join.md shows a
// project doing: the same JobSet restarts its group in place on the emulated nodes of both.
package join

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/restartbed/restartbed/agent"
	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
	"github.com/restartbed/restartbed/builtins"
	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/program"
	"github.com/restartbed/restartbed/join"
	"github.com/restartbed/restartbed/scenarios"
	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
	"github.com/restartbed/restartbed/timing"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// options are what the project's test asks of either cluster: two TPU nodes, restartbed's
// JobSet, its builtin agent as the sidecar's program.
func options() envtest.Options {
	profile := timing.Fast()
	return envtest.Options{Timing: &profile, JobSet: true, Nodes: []fakekubelet.NodePool{{Name: "tpu", Count: 2}},
		Programs: []program.Rule{{Container: agent.ContainerName, Builtin: builtins.Agent}}}
}

// inPlaceJobSet is JobSet's sidecar-mode example with two workers; worker 0 fails once.
func inPlaceJobSet(ns string) *jobsetv1alpha2.JobSet {
	spec := builders.SidecarModePodSpec()
	spec.Volumes = []corev1.Volume{{Name: "state", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	worker := &spec.Containers[0]
	worker.VolumeMounts = []corev1.VolumeMount{{Name: "state", MountPath: "/state"}}
	worker.Env = []corev1.EnvVar{{Name: "INDEX", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
		FieldPath: "metadata.annotations['" + jobsetv1alpha2.JobIndexKey + "']"}}}}
	worker.Command = []string{"sh", "-c", `if [ "$INDEX" = 0 ] && [ ! -f /state/failed ]; then touch /state/failed; sleep 1; exit 1; fi; sleep 3600`}
	return &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "group", Namespace: ns},
		Spec: jobsetv1alpha2.JobSetSpec{
			FailurePolicy: &jobsetv1alpha2.FailurePolicy{MaxRestarts: 3, RestartStrategy: jobsetv1alpha2.InPlaceRestart},
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "workers", Replicas: 2, Template: batchv1.JobTemplateSpec{
				Spec: batchv1.JobSpec{
					Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](math.MaxInt32),
					PodReplacementPolicy: ptr.To(batchv1.Failed),
					Template:             corev1.PodTemplateSpec{Spec: spec},
				}}}},
		},
	}
}

// groupRestartsInPlace is the project's test: a JobSet of two workers, one of which fails once,
// restarts its whole group in place.
func groupRestartsInPlace(t *testing.T, cluster *envtest.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := fmt.Sprintf("group-%d", time.Now().UnixNano())
	if err := cluster.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitForSchedulableNodes(ctx); err != nil {
		t.Fatal(err)
	}
	if err := specs.CreateAgentRBAC(ctx, cluster.Client, ns); err != nil {
		t.Fatal(err)
	}
	js := inPlaceJobSet(ns)
	if err := cluster.Client.Create(ctx, js); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var got jobsetv1alpha2.JobSet
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), &got); err != nil {
			return false, err
		}
		var pods corev1.PodList
		if err := cluster.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return false, err
		}
		ready := 0
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.Status.ContainerStatuses[0].RestartCount == 1 {
					ready++
				}
			}
		}
		return ptr.Deref(got.Status.CurrentInPlaceRestartAttempt, -1) == 1 && ready == 2, nil
	})
	if err != nil {
		t.Fatalf("the group did not restart in place: %v", err)
	}
}

func TestOnRestartbedsControlPlane(t *testing.T) {
	cluster, err := envtest.Start(context.Background(), options())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cluster.Stop() }()
	groupRestartsInPlace(t, cluster)
}

// bareCluster starts a restartbed control plane with no nodes and no JobSet of its own, waiting
// for nodes to join: "any cluster" here. The test's cleanup stops it.
func bareCluster(t *testing.T, version string) *envtest.Cluster {
	t.Helper()
	profile := timing.Fast()
	existing, err := envtest.Start(context.Background(), envtest.Options{Timing: &profile, ExternalNodes: 8, KubernetesVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = existing.Stop() }) // the test's own assertions are what it reports
	return existing
}

// TestOnAnExistingCluster stands a bare restartbed control plane (no nodes, no JobSet) for "any
// cluster", runs the same test on it through ExistingCluster, and checks that Stop removes what
// it added: the CRD and the nodes.
func TestOnAnExistingCluster(t *testing.T) {
	ctx := context.Background()
	existing := bareCluster(t, "")
	opts := options()
	opts.ExistingCluster = existing.Config
	cluster, err := envtest.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if cluster.Release.Kubernetes != existing.Release.Kubernetes {
		t.Errorf("release %s, want the existing apiserver's %s", cluster.Release, existing.Release)
	}
	groupRestartsInPlace(t, cluster)
	var node corev1.Node
	if err := existing.Client.Get(ctx, client.ObjectKey{Name: "tpu-0"}, &node); err != nil {
		t.Fatal(err)
	}
	if node.Status.Addresses[0].Address != "127.0.0.1" || node.Status.DaemonEndpoints.KubeletEndpoint.Port == 10250 {
		t.Errorf("a joined node advertises %v port %d, want loopback and its own listener", node.Status.Addresses, node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	}
	// The nodes report the apiserver's version, as `restartbed kubelet`'s do.
	info, err := existing.Clientset.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v := node.Status.NodeInfo.KubeletVersion; v == "" || !strings.HasPrefix(info.GitVersion, v) {
		t.Errorf("a joined node reports kubelet %q, want the apiserver's %q", v, info.GitVersion)
	}
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	var nodes corev1.NodeList
	if err := existing.Client.List(ctx, &nodes); err != nil || len(nodes.Items) != 0 {
		t.Errorf("after Stop the existing cluster has %d nodes (%v), want none", len(nodes.Items), err)
	}
	crds, err := apiextensionsclient.NewForConfig(existing.Config)
	if err != nil {
		t.Fatal(err)
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "jobsets.jobset.x-k8s.io", metav1.GetOptions{})
		return apierrors.IsNotFound(last), nil
	})
	if err != nil {
		t.Errorf("the JobSet CRD is still installed after Stop (%v)", last)
	}
	if _, err := envtest.Start(ctx, envtest.Options{ExistingCluster: existing.Config, APIServerFlags: map[string][]string{"v": {"2"}}}); err == nil {
		t.Error("an option of restartbed's own control plane was accepted with ExistingCluster")
	}
}

// TestScenariosOnAnExistingCluster replays bundled scenarios with their nodes joined to a cluster
// restartbed's kubelets did not start — each on a bare restartbed control plane of its own — and
// expects every step to pass as it does in process (test/scenarios).
func TestScenariosOnAnExistingCluster(t *testing.T) {
	for _, file := range []string{"story1-fast-recovery.yaml", "container-restart-rules.yaml",
		"restart-all-containers-triggers.yaml", "crash-loop-backoff-realistic.yaml"} {
		t.Run(file, func(t *testing.T) {
			sc, err := scenarios.Load(filepath.Join("..", "..", "scenarios", "examples", file))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			existing := bareCluster(t, sc.Spec.KubernetesVersion)
			var report strings.Builder
			res := scenarios.Run(ctx, sc, scenarios.RunOptions{Progress: &report,
				Configure: func(o *envtest.Options) { o.ExistingCluster = existing.Config }})
			if !res.Passed() {
				t.Errorf("%s on an existing cluster:\n%s", file, report.String())
			}
		})
	}
}

// TestJoinTakesOverAndLetsGo runs package join in this process (under the race detector in
// make test) against a bare control plane: a KWOK-style node is taken over when it appears, runs
// its pod, and is let go when deleted, its container killed; the registered node stays.
func TestJoinTakesOverAndLetsGo(t *testing.T) {
	ctx := context.Background()
	profile := timing.Fast()
	existing := bareCluster(t, "")
	killed := make(chan struct{})
	waiter := program.Func(func(ctx context.Context, _ *program.Container) int {
		<-ctx.Done()
		close(killed)
		return 137
	})
	kubelets, err := join.Start(ctx, join.Options{Config: existing.Config, Timing: &profile, NodeIP: netip.MustParseAddr("127.0.0.1"),
		Programs:       []program.Rule{{Container: "main", Program: waiter}},
		NodeIdentities: true, Pools: []fakekubelet.NodePool{{Name: "reg", Count: 1}},
		Manage: fakekubelet.ManagedNodes{Annotations: labels.SelectorFromSet(labels.Set{"kwok.x-k8s.io/node": "fake"})}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = kubelets.Stop() }()
	cs := existing.Clientset
	kwok := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kwok-0", Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, kwok, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "on-kwok", Namespace: metav1.NamespaceDefault}, Spec: corev1.PodSpec{
		NodeName: "kwok-0", Containers: []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sleep", "3600"}}}}}
	if err := existing.WaitForDefaultServiceAccount(ctx, metav1.NamespaceDefault); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll := func(what string, ok func(ctx context.Context) (bool, error)) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, ok); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	poll("the taken-over node's pod running", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, "on-kwok", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
	if got := kubelets.Kubelet.NodeNames(); !slices.Equal(got, []string{"reg-0", "kwok-0"}) {
		t.Errorf("nodes %v, want the registered one and the taken-over one", got)
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, "kwok-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll("the deleted node let go", func(context.Context) (bool, error) {
		return slices.Equal(kubelets.Kubelet.NodeNames(), []string{"reg-0"}), nil
	})
	select {
	case <-killed:
	case <-time.After(time.Minute):
		t.Error("the let-go node's container still runs")
	}
}

// TestTenantsShareAControlPlane runs the project's test in two tenants of one control plane at
// once (envtest.Options.Tenants), both with a pool named tpu: each has nodes of its own, and each
// namespace's pods run on its tenant's nodes only. A tenant's Stop removes its namespaces, nodes
// and their Leases, and the other goes on. What belongs to the control plane is refused.
func TestTenantsShareAControlPlane(t *testing.T) {
	ctx := context.Background()
	profile := timing.Fast()
	host, err := envtest.Start(ctx, envtest.Options{Timing: &profile, JobSet: true, Tenants: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = host.Stop() }()
	one, err := host.Tenant(ctx, "one", options())
	if err != nil {
		t.Fatal(err)
	}
	two, err := host.Tenant(ctx, "two", options())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = two.Stop() }()
	if got, want := one.NodeName("tpu-1"), "tpu-t1-1"; got != want {
		t.Errorf("tenant one's tpu-1 is node %s, want %s", got, want)
	}
	done := make(chan struct{})
	go func() { defer close(done); groupRestartsInPlace(t, two) }()
	groupRestartsInPlace(t, one)
	<-done

	// Every pod of a tenant's namespaces ran on its nodes: those its node selector lists.
	for _, tenant := range []*envtest.Cluster{one, two} {
		var nodes corev1.NodeList
		if err := host.Client.List(ctx, &nodes, client.MatchingLabelsSelector{Selector: tenant.NodeSelector()}); err != nil {
			t.Fatal(err)
		}
		own := map[string]bool{}
		for _, n := range nodes.Items {
			own[n.Name] = true
		}
		if want := []string{tenant.NodeName("tpu-0"), tenant.NodeName("tpu-1")}; len(own) != 2 || !own[want[0]] || !own[want[1]] {
			t.Errorf("the tenant's nodes are %v, want %v", own, want)
		}
		var pods corev1.PodList
		if err := host.Client.List(ctx, &pods); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			var ns corev1.Namespace
			if err := host.Client.Get(ctx, client.ObjectKey{Name: p.Namespace}, &ns); err != nil {
				t.Fatal(err)
			}
			if mine := tenant.NodeSelector().Matches(labels.Set(ns.Labels)); mine && !own[p.Spec.NodeName] {
				t.Errorf("pod %s/%s of the tenant runs on node %s, not one of the tenant's %v", p.Namespace, p.Name, p.Spec.NodeName, own)
			}
		}
	}

	if err := one.Stop(); err != nil {
		t.Fatal(err)
	}
	var nodes corev1.NodeList
	if err := host.Client.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if !two.NodeSelector().Matches(labels.Set(n.Labels)) {
			t.Errorf("node %s is left after its tenant stopped", n.Name)
		}
	}
	var leases coordinationv1.LeaseList
	if err := host.Client.List(ctx, &leases, client.InNamespace(corev1.NamespaceNodeLease)); err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		if strings.Contains(l.Name, "-t1-") {
			t.Errorf("Lease %s is left after its tenant stopped", l.Name)
		}
	}
	var namespaces corev1.NamespaceList
	if err := host.Client.List(ctx, &namespaces, client.MatchingLabels{envtest.TenantLabel: "t1"}); err != nil {
		t.Fatal(err)
	}
	if len(namespaces.Items) != 0 {
		t.Errorf("namespaces %v are left after their tenant stopped", namespaces.Items)
	}
	// The other tenant goes on.
	groupRestartsInPlace(t, two)

	for name, opts := range map[string]envtest.Options{
		"another timing":        {Timing: ptr.To(timing.Realistic())},
		"another release":       {KubernetesVersion: "1.35"},
		"the tenancy's label":   {Nodes: []fakekubelet.NodePool{{Name: "p", Count: 1, Labels: map[string]string{envtest.TenantLabel: "x"}}}},
		"CRDs":                  {CRDDirectoryPaths: []string{"testdata"}},
		"a control plane's own": {Tenants: true},
	} {
		if name == "another release" && host.Release.Minor() == "1.35" {
			opts.KubernetesVersion = "1.37"
		}
		if _, err := host.Tenant(ctx, "refused-"+strings.ReplaceAll(name, " ", "-"), opts); err == nil {
			t.Errorf("a tenant with %s was accepted", name)
		}
	}
	if _, err := one.Tenant(ctx, "nested", options()); err == nil {
		t.Error("a tenant of a cluster without Options.Tenants was accepted")
	}
}
