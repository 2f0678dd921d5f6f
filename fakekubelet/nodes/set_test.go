package nodes

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/internal/clocktest"
	"github.com/restartbed/restartbed/timing"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func newSet(t *testing.T, specs ...Spec) (*Set, *fake.Clientset, *clocktesting.FakeClock) {
	t.Helper()
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	s, err := New(Options{Client: func(string) Client { return client }, Clock: clk, Timing: timing.Realistic(), KubeletVersion: "v1.37.2",
		DeclaredFeatures: []string{"RestartAllContainersOnContainerExits"}, Nodes: specs})
	if err != nil {
		t.Fatal(err)
	}
	return s, client, clk
}

func TestNewRefusesWhatTheAddressPlanCannotNumber(t *testing.T) {
	if _, err := New(Options{Nodes: []Spec{{Name: "a"}, {Name: "a"}}}); err == nil || !strings.Contains(err.Error(), "two nodes are named a") {
		t.Errorf("duplicate names: %v", err)
	}
	if _, err := New(Options{Nodes: make([]Spec, MaxNodes+1)}); err == nil || !strings.Contains(err.Error(), "at most 16384") {
		t.Errorf("too many nodes: %v", err)
	}
}

func TestAddresses(t *testing.T) {
	specs := make([]Spec, 300)
	for i := range specs {
		specs[i].Name = "n" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	s, _, _ := newSet(t, specs...)
	all := s.All()
	for _, tc := range []struct {
		n        *Node
		ip, cidr string
	}{
		{all[0], "172.16.0.1", "10.64.0.0/24"},
		{all[1], "172.16.0.2", "10.64.1.0/24"},
		{all[299], "172.16.1.44", "10.65.43.0/24"},
	} {
		if got := tc.n.InternalIP().String(); got != tc.ip {
			t.Errorf("%s: internal IP %s, want %s", tc.n.Name(), got, tc.ip)
		}
		if got := tc.n.PodCIDR().String(); got != tc.cidr {
			t.Errorf("%s: pod CIDR %s, want %s", tc.n.Name(), got, tc.cidr)
		}
	}
}

func TestRegister(t *testing.T) {
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	s, client, _ := newSet(t,
		Spec{Name: "tpu-0", Labels: map[string]string{"pool": "tpu"}, Capacity: capacity},
		Spec{Name: "cpu-0", Taints: []corev1.Taint{{Key: "dedicated", Value: "cpu", Effect: corev1.TaintEffectNoSchedule}}})
	// A node left over from an earlier kubelet is taken over.
	if _, err := client.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-0", UID: "old"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	tpu, err := client.CoreV1().Nodes().Get(context.Background(), "tpu-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tpu.Labels["pool"] != "tpu" || tpu.Labels[corev1.LabelHostname] != "tpu-0" || tpu.Spec.PodCIDR != "10.64.0.0/24" ||
		tpu.Status.Addresses[0].Address != "172.16.0.1" || !tpu.Status.Allocatable.Cpu().Equal(resource.MustParse("2")) ||
		tpu.Status.NodeInfo.KubeletVersion != "v1.37.2" || len(tpu.Status.DeclaredFeatures) != 1 {
		t.Errorf("registered node: %+v", tpu)
	}
	if s.Get("cpu-0").UID() != "old" {
		t.Errorf("the taken-over node's UID is %q, want the existing object's", s.Get("cpu-0").UID())
	}
	lease, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(context.Background(), "cpu-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *lease.Spec.HolderIdentity != "cpu-0" || *lease.Spec.LeaseDurationSeconds != 40 || lease.OwnerReferences[0].UID != "old" {
		t.Errorf("lease: %+v", lease)
	}
}

// TestHeartbeat renews the Leases of connected nodes each renew interval and of none that is
// partitioned.
func TestHeartbeat(t *testing.T) {
	s, client, clk := newSet(t, Spec{Name: "a"}, Spec{Name: "b"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Register(ctx); err != nil {
		t.Fatal(err)
	}
	s.Get("b").Partition()
	factory := informers.NewSharedInformerFactory(client, 0)
	lister := factory.Core().V1().Nodes().Lister()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	client.ClearActions()
	done := make(chan struct{})
	waiters := clk.Waiters()
	go func() { s.Heartbeat(ctx, lister); close(done) }()
	clocktest.WaitForWaiters(t, clk, waiters+2, "the heartbeat's lease and status tickers")
	clk.Step(timing.Realistic().NodeLeaseRenewInterval)
	renewed := func() []string {
		var names []string
		for _, a := range client.Actions() {
			if u, ok := a.(clienttesting.UpdateAction); ok && a.GetResource().Resource == "leases" {
				names = append(names, u.GetObject().(*coordinationv1.Lease).Name)
			}
		}
		return names
	}
	for deadline := time.Now().Add(10 * time.Second); len(renewed()) == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if got := renewed(); len(got) != 1 || got[0] != "a" {
		t.Errorf("renewed leases %v, want [a]: a partitioned node renews nothing", got)
	}
}

// TestReconnectedMovesChangedConditionsOnly: after a partition the node controller's Unknown
// moves back with a new transition time; a condition that did not change keeps its time.
func TestReconnectedMovesChangedConditionsOnly(t *testing.T) {
	s, client, clk := newSet(t, Spec{Name: "a"})
	ctx := context.Background()
	if err := s.Register(ctx); err != nil {
		t.Fatal(err)
	}
	n, _ := client.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			n.Status.Conditions[i].Status = corev1.ConditionUnknown
		}
	}
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	lister := factory.Core().V1().Nodes().Lister()
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	clk.Step(time.Minute)
	client.ClearActions()
	if err := s.Reconnected(ctx, s.Get("a"), lister); err != nil {
		t.Fatal(err)
	}
	var patch string
	for _, a := range client.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetResource().Resource == "nodes" {
			patch = string(p.GetPatch())
		}
	}
	if strings.Count(patch, "lastTransitionTime") != 1 || !strings.Contains(patch, `"lastTransitionTime":"2026-03-01T10:01:00Z","message":"kubelet is posting ready status"`) {
		t.Errorf("status patch %s: want a new transition time on Ready only", patch)
	}
}

// TestNetworkOfAPartitionedNode: requests fail while the node is cut off, and a response opened
// before (a watch) breaks at its next read.
func TestNetworkOfAPartitionedNode(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	s, _, _ := newSet(t, Spec{Name: "a"})
	n := s.Get("a")
	c := &http.Client{Transport: n.Network(http.DefaultTransport)}
	open, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Body.Close()
	if !n.Partition() || n.Partition() {
		t.Fatal("Partition: want true, then false once partitioned")
	}
	if _, err := c.Get(srv.URL); err == nil || !strings.Contains(err.Error(), "network is unreachable (restartbed: node a is partitioned)") {
		t.Errorf("request while partitioned: %v", err)
	}
	if _, err := io.ReadAll(open.Body); err == nil {
		t.Error("an open response still reads while partitioned")
	}
	if !n.Reconnect() || n.Reconnect() {
		t.Fatal("Reconnect: want true, then false once connected")
	}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatalf("request after the partition: %v", err)
	}
	resp.Body.Close()
}

// TestAdopt takes over a KWOK-style Node: its declared capacity, labels and taints stay, its
// addresses, kubelet endpoint, node info and conditions become the kubelet's, its existing Lease
// is held by it; Release lets it go and never lets a registered node go.
func TestAdopt(t *testing.T) {
	s, client, _ := newSet(t, Spec{Name: "registered"})
	ctx := context.Background()
	if err := s.Register(ctx); err != nil {
		t.Fatal(err)
	}
	declared := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), "google.com/tpu": resource.MustParse("4")}
	kwok := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "kwok-0", UID: "kwok-uid", Labels: map[string]string{"type": "kwok"}},
		Spec:       corev1.NodeSpec{PodCIDR: "10.244.7.0/24", Taints: []corev1.Taint{{Key: "kwok.x-k8s.io/node", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Capacity: declared,
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.9"}}},
	}
	if _, err := client.CoreV1().Nodes().Create(ctx, kwok, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kwok-0", Namespace: corev1.NamespaceNodeLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("kwok-controller")}}
	if _, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, stale, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n, err := s.Prepare(kwok, Spec{Address: netip.MustParseAddr("127.0.0.1"), KubeletPort: 40001, Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Get("kwok-0") != nil {
		t.Error("a prepared node is in the set before it is adopted")
	}
	if err := s.Adopt(ctx, n, kwok); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().Nodes().Get(ctx, "kwok-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Status.Capacity.Cpu().Equal(resource.MustParse("32")) || !got.Status.Allocatable.Cpu().Equal(resource.MustParse("32")) {
		t.Errorf("capacity %v, allocatable %v: want the declared capacity for both", got.Status.Capacity, got.Status.Allocatable)
	}
	if got.Labels["type"] != "kwok" || len(got.Spec.Taints) != 1 {
		t.Errorf("labels %v, taints %v: want the manifest's", got.Labels, got.Spec.Taints)
	}
	if len(got.Status.Addresses) != 2 || got.Status.Addresses[0].Address != "127.0.0.1" || got.Status.DaemonEndpoints.KubeletEndpoint.Port != 40001 ||
		got.Status.NodeInfo.KubeletVersion != "v1.37.2" || got.Status.Phase != corev1.NodeRunning {
		t.Errorf("status after the take-over: %+v", got.Status)
	}
	if n.PodCIDR().String() != "10.244.7.0/24" || n.InternalIP().String() != "172.16.0.2" || n.Index() != 1 {
		t.Errorf("pod CIDR %s, pod-network address %s, index %d: want the node's CIDR and the next address", n.PodCIDR(), n.InternalIP(), n.Index())
	}
	lease, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "kwok-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *lease.Spec.HolderIdentity != "kwok-0" || lease.Spec.RenewTime == nil {
		t.Errorf("lease after the take-over: %+v", lease.Spec)
	}
	if len(s.All()) != 2 || s.Get("kwok-0") != n {
		t.Errorf("set after the adoption: %d nodes", len(s.All()))
	}
	if s.Release("registered") != nil || s.Get("registered") == nil {
		t.Error("a registered node was released")
	}
	if s.Release("kwok-0") != n || s.Get("kwok-0") != nil || s.Len() != 1 {
		t.Error("the adopted node was not released")
	}
	// A node adopted again gets a new address: indexes are never reused.
	again, err := s.Prepare(kwok, Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Index() != 2 {
		t.Errorf("index %d after a release, want 2", again.Index())
	}
}

// TestKubeletMaySet follows NodeRestriction: a kubelet sets any label outside kubernetes.io and
// k8s.io, the kubelet's own within them, and none of node-restriction.kubernetes.io.
func TestKubeletMaySet(t *testing.T) {
	for key, want := range map[string]bool{
		"restartbed.dev/pool":                      true,
		"cloud.google.com/gke-nodepool":            true,
		"plain":                                    true,
		corev1.LabelHostname:                       true,
		corev1.LabelTopologyZone:                   true,
		"node.kubernetes.io/exclude-from-lb":       true,
		"kubelet.kubernetes.io/anything":           true,
		"node-role.kubernetes.io/worker":           false,
		"node-restriction.kubernetes.io/dedicated": false,
		"example.k8s.io/thing":                     false,
	} {
		if got := kubeletMaySet(key); got != want {
			t.Errorf("kubeletMaySet(%q) = %v, want %v", key, got, want)
		}
	}
}

// TestImagesChangePostedAtTheNextRenewal: the node registers with its images; a change is posted
// at the next renewal, and an unchanged list posts nothing but the Lease.
func TestImagesChangePostedAtTheNextRenewal(t *testing.T) {
	s, client, clk := newSet(t, Spec{Name: "a"})
	var mu sync.Mutex
	have := []corev1.ContainerImage{{Names: []string{"docker.io/library/pause@sha256:1", "docker.io/library/pause:3.10"}, SizeBytes: 300 << 10}}
	s.opts.Images = func(string) []corev1.ContainerImage {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(have)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := client.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{}); len(n.Status.Images) != 1 || n.Status.Images[0].Names[1] != "docker.io/library/pause:3.10" {
		t.Fatalf("registered with images %v, want pause", n.Status.Images)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	lister := factory.Core().V1().Nodes().Lister()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	waiters := clk.Waiters()
	done := make(chan struct{})
	go func() { s.Heartbeat(ctx, lister); close(done) }()
	defer func() { cancel(); <-done }()
	clocktest.WaitForWaiters(t, clk, waiters+2, "the heartbeat's lease and status tickers")

	// renewal steps the clock to the next renewal and returns the status patches it brought.
	// Heartbeat ends a renewal's writes before it takes the next tick, so it steps once more:
	// every patch of the first renewal comes before the second renewal's Lease update, and
	// none of the second's does (it renews the Lease first).
	renewal := func() []string {
		t.Helper()
		client.ClearActions()
		leaseUpdates := func() (int, []clienttesting.Action) {
			actions := client.Actions()
			n := 0
			for _, a := range actions {
				if a.GetResource().Resource == "leases" && a.GetVerb() == "update" {
					n++
				}
			}
			return n, actions
		}
		for want := 1; want <= 2; want++ {
			clk.Step(timing.Realistic().NodeLeaseRenewInterval)
			if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				n, _ := leaseUpdates()
				return n >= want, nil
			}); err != nil {
				t.Fatalf("no lease renewal %d: %v", want, err)
			}
		}
		_, actions := leaseUpdates()
		var status []string
		leases := 0
		for _, a := range actions {
			switch p, ok := a.(clienttesting.PatchAction); {
			case a.GetResource().Resource == "leases" && a.GetVerb() == "update":
				leases++
			case ok && a.GetResource().Resource == "nodes" && leases == 1:
				status = append(status, string(p.GetPatch()))
			}
		}
		return status
	}
	if got := renewal(); len(got) != 0 {
		t.Errorf("unchanged images: status patches %v, want none", got)
	}
	mu.Lock()
	have = append(have, corev1.ContainerImage{Names: []string{"docker.io/library/busybox@sha256:2", "docker.io/library/busybox:1.36"}, SizeBytes: 4 << 20})
	mu.Unlock()
	if got := renewal(); len(got) != 1 || !strings.Contains(got[0], "busybox:1.36") || !strings.Contains(got[0], "pause:3.10") {
		t.Errorf("a pulled image: status patches %v, want one listing both images", got)
	}
	if n, _ := client.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{}); len(n.Status.Images) != 2 {
		t.Errorf("node images %v, want two", n.Status.Images)
	}
}

// TestLeaseRenewal renews as the kubelet's lease controller: an update of the Lease it last
// wrote, no read; after a conflict it reads the Lease and updates that, keeping what another
// writer set but the duration; a deleted Lease is created again, owned by the node; a kubelet
// that restarted reads the Lease first.
func TestLeaseRenewal(t *testing.T) {
	s, client, clk := newSet(t, Spec{Name: "a"})
	ctx := context.Background()
	// The fake apiserver gives no UIDs: the node's is set beforehand.
	if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "uid-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Register(ctx); err != nil {
		t.Fatal(err)
	}
	n := s.Get("a")
	leases := client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	verbs := func() []string {
		var out []string
		for _, a := range client.Actions() {
			if a.GetResource().Resource == "leases" {
				out = append(out, a.GetVerb())
			}
		}
		client.ClearActions()
		return out
	}
	renew := func(step string, want ...string) *coordinationv1.Lease {
		t.Helper()
		clk.Step(10 * time.Second)
		if err := s.renewLease(ctx, n); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if got := verbs(); !slices.Equal(got, want) {
			t.Errorf("%s: lease requests %v, want %v", step, got, want)
		}
		lease, err := leases.Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		client.ClearActions()
		if !lease.Spec.RenewTime.Time.Equal(clk.Now()) || *lease.Spec.LeaseDurationSeconds != 40 {
			t.Errorf("%s: renew time %v, duration %d; want %v, 40", step, lease.Spec.RenewTime, *lease.Spec.LeaseDurationSeconds, clk.Now())
		}
		return lease
	}
	client.ClearActions()
	renew("renewal", "update")

	// Another writer moves the Lease; the apiserver refuses the kubelet's stale update once.
	moved, _ := leases.Get(ctx, "a", metav1.GetOptions{})
	moved.Spec.HolderIdentity, moved.Spec.LeaseDurationSeconds = ptr.To("someone"), ptr.To[int32](1)
	if _, err := leases.Update(ctx, moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	conflicts := 1
	client.PrependReactor("update", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		return true, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), "a", errors.New("the object has been modified"))
	})
	client.ClearActions()
	if got := renew("after a conflict", "update", "get", "update"); *got.Spec.HolderIdentity != "someone" {
		t.Errorf("after a conflict: holder %q, want the other writer's kept", *got.Spec.HolderIdentity)
	}

	if err := leases.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	got := renew("deleted", "update", "update", "update", "update", "update", "get", "create")
	if *got.Spec.HolderIdentity != "a" || len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != n.UID() || got.OwnerReferences[0].Kind != "Node" {
		t.Errorf("the Lease created again: holder %q, owners %+v; want node a's", *got.Spec.HolderIdentity, got.OwnerReferences)
	}

	n.KubeletRestarted()
	renew("after the kubelet restarted", "get", "update")
}
