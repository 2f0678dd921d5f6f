package shards

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func nodes(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("tpu-%d", i)
	}
	return out
}

// TestOwner: the rule spreads nodes evenly, and a member that joins or leaves moves only the
// nodes it gains or had.
func TestOwner(t *testing.T) {
	all := nodes(3000)
	three := []string{"shard-0", "shard-1", "shard-2"}
	count := map[string]int{}
	for _, n := range all {
		count[Owner(three, n)]++
	}
	for _, m := range three {
		if count[m] < 850 || count[m] > 1150 {
			t.Errorf("%s runs %d of 3000 nodes, want about 1000: %v", m, count[m], count)
		}
	}
	four := append(slices.Clone(three), "shard-3")
	moved := 0
	for _, n := range all {
		before, after := Owner(three, n), Owner(four, n)
		if before != after {
			moved++
			if after != "shard-3" {
				t.Errorf("%s moved from %s to %s when shard-3 joined", n, before, after)
			}
		}
	}
	if moved < 600 || moved > 900 {
		t.Errorf("%d nodes moved to the fourth shard, want about 750", moved)
	}
	two := []string{"shard-0", "shard-2"}
	for _, n := range all {
		if before, after := Owner(three, n), Owner(two, n); before != "shard-1" && before != after {
			t.Errorf("%s moved from %s to %s when shard-1 left", n, before, after)
		}
	}
	if Owner(nil, "tpu-0") != "" {
		t.Error("a group without members has an owner")
	}
}

type member struct {
	*Shard
	cancel  context.CancelFunc
	changed atomic.Int32
}

func start(t *testing.T, client *fake.Clientset, clk *testingclock.FakeClock, identity string, takeover bool) *member {
	t.Helper()
	m := &member{}
	s, err := New(Options{Client: client, Group: "tpus", Identity: identity, Clock: clk, Takeover: takeover,
		Relay: identity + ".relay:7000", Changed: func() { m.changed.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.Shard, m.cancel = s, cancel
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		s.Wait()
	})
	return m
}

// eventually waits, in wall time, for the shards' informers to see what the test did.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestGroup(t *testing.T) {
	for _, takeover := range []bool{false, true} {
		t.Run(fmt.Sprintf("takeover=%t", takeover), func(t *testing.T) {
			client := fake.NewClientset()
			clk := testingclock.NewFakeClock(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC))
			a := start(t, client, clk, "shard-a", takeover)
			b := start(t, client, clk, "shard-b", takeover)
			both := []string{"shard-a", "shard-b"}
			eventually(t, "both shards in both views", func() bool {
				return slices.Equal(a.Members(), both) && slices.Equal(b.Members(), both)
			})
			for _, n := range nodes(200) {
				if a.Owns(n) == b.Owns(n) || a.Owner(n) != b.Owner(n) {
					t.Fatalf("%s: a owns %t, b owns %t (owners %q, %q)", n, a.Owns(n), b.Owns(n), a.Owner(n), b.Owner(n))
				}
			}
			if relay, ok := a.Relay("shard-b"); relay != "shard-b.relay:7000" || !ok {
				t.Errorf("a reads b's relay as %q, %t; want shard-b.relay:7000", relay, ok)
			}
			if relay, ok := a.Relay("shard-gone"); ok {
				t.Errorf("a reads a relay %q for a shard without a Lease", relay)
			}

			// shard-a stops renewing, as a killed process does; b's renewals tick on.
			a.cancel()
			a.Wait()
			changes := b.changed.Load()
			for range 6 {
				clk.Step(DefaultLeaseDuration / 4)
				eventually(t, "b's renewal", func() bool {
					l, err := client.CoordinationV1().Leases(DefaultNamespace).Get(context.Background(), "tpus-shard-b", metav1.GetOptions{})
					return err == nil && l.Spec.RenewTime.Time.Equal(clk.Now())
				})
			}
			if !takeover {
				if got := b.Members(); !slices.Equal(got, both) {
					t.Fatalf("without takeover, the stopped shard left the group: %v", got)
				}
				return
			}
			eventually(t, "b alone", func() bool { return slices.Equal(b.Members(), []string{"shard-b"}) })
			if b.changed.Load() == changes {
				t.Error("Changed was not called when shard-a's Lease expired")
			}
			for _, n := range nodes(200) {
				if !b.Owns(n) {
					t.Fatalf("b does not run %s after a's Lease expired", n)
				}
			}

			// shard-a comes back under its name: it renews its own Lease and gets its nodes back.
			a = start(t, client, clk, "shard-a", takeover)
			eventually(t, "a back in b's view", func() bool { return slices.Equal(b.Members(), both) })
		})
	}
}

func TestLeaseOfAnother(t *testing.T) {
	client := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "tpus-shard-a", Namespace: DefaultNamespace, Labels: map[string]string{GroupLabel: "tpus"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("someone-else")},
	})
	s, err := New(Options{Client: client, Group: "tpus", Identity: "shard-a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err == nil || !strings.Contains(err.Error(), `held by "someone-else"`) {
		t.Errorf("Start: %v", err)
	}
}

func TestNewRefuses(t *testing.T) {
	_, err := New(Options{Group: "TPUs", Identity: "", LeaseDuration: time.Millisecond})
	for _, want := range []string{"Client is required", `Group "TPUs"`, `Identity ""`, "LeaseDuration 1ms"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v, want %q", err, want)
		}
	}
}

// A node changes hands only once its holder let go or is no longer live.
func TestFree(t *testing.T) {
	client := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: LeaseName("tpus", "impostor"), Labels: map[string]string{GroupLabel: "tpus"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("someone-else"), LeaseDurationSeconds: ptr.To[int32](40)},
	})
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	a := start(t, client, clk, "shard-a", false)
	b := start(t, client, clk, "shard-b", false)
	eventually(t, "b in a's view", func() bool { return slices.Contains(a.Members(), "shard-b") })
	for _, c := range []struct {
		holder string
		free   bool
	}{
		{"", true},           // no shard runs it
		{"shard-a", true},    // a ran it before
		{"shard-b", false},   // b runs it and renews: b lets go first
		{"shard-gone", true}, // no Lease: no live shard of the group
		{"impostor", true},   // the Lease of that name is not the shard's own
	} {
		free, wait := a.Free(c.holder)
		if free != c.free {
			t.Errorf("Free(%q) = %t, want %t", c.holder, free, c.free)
		}
		if !free && (wait <= 0 || wait > DefaultLeaseDuration+time.Second) {
			t.Errorf("Free(%q): ask again in %s, want within the Lease's %s", c.holder, wait, DefaultLeaseDuration)
		}
	}
	// b stops: once its Lease runs out unrenewed, its nodes are free, takeover or not.
	b.cancel()
	b.Wait()
	_, wait := a.Free("shard-b")
	clk.Step(wait)
	if free, _ := a.Free("shard-b"); !free {
		t.Errorf("a node of shard-b is not free %s after b stopped renewing", wait)
	}
}

// Two shards number nodes from blocks of their own, never the same index, skip what the cluster
// uses, and a shard that comes back keeps its block.
func TestAllocateIndex(t *testing.T) {
	client := fake.NewClientset()
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	a := start(t, client, clk, "shard-a", false)
	b := start(t, client, clk, "shard-b", false)
	const size = 3 * BlockSize
	used := func(i int) bool { return i == 0 || i == 5 } // nodes that have these ranges already
	given := map[int]string{}
	for n := range BlockSize + 10 {
		for _, s := range []*member{a, b} {
			if n >= BlockSize-2 && s == b {
				continue // b needs fewer than a block
			}
			i, err := s.AllocateIndex(context.Background(), size, used)
			if err != nil {
				t.Fatalf("%s's %dth index: %v", s.Identity(), n, err)
			}
			if used(i) {
				t.Fatalf("%s gave index %d, which a node has", s.Identity(), i)
			}
			if other, ok := given[i]; ok {
				t.Fatalf("%s gave index %d, which %s gave", s.Identity(), i, other)
			}
			given[i] = s.Identity()
		}
	}
	// a holds blocks 0 and 2 (b took 1); every block is taken now.
	if _, err := b.AllocateIndex(context.Background(), size, func(i int) bool { return true }); err == nil || !strings.Contains(err.Error(), "every block") {
		t.Errorf("b with its block full: %v, want every block taken", err)
	}
	b.ReleaseIndex(BlockSize + 3)
	if i, err := b.AllocateIndex(context.Background(), size, used); err != nil || i != BlockSize+3 {
		t.Errorf("after ReleaseIndex(%d): %d, %v", BlockSize+3, i, err)
	}
	// b restarts: it finds its block again, and what its nodes have is used.
	b.cancel()
	b.Wait()
	b = start(t, client, clk, "shard-b", false)
	if i, err := b.AllocateIndex(context.Background(), size, func(i int) bool { return given[i] != "" }); err != nil || i/BlockSize != 1 {
		t.Errorf("b after its restart gave %d, %v; want an index of its block 1", i, err)
	}
}
