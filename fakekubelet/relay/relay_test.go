package relay_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/restartbed/restartbed/fakekubelet/network"
	"github.com/restartbed/restartbed/fakekubelet/network/networktest"
	"github.com/restartbed/restartbed/fakekubelet/relay"
)

// shard is one process's pod network and its relay Server on the loopback interface.
type shard struct {
	net   *network.Network
	relay string
	// cut is the node this shard has partitioned, if any.
	cut atomic.Value
}

// twoShards are a and b, whose networks hold 10.64.0.0/24 (node-a) and 10.64.1.0/24 (node-b);
// each reaches the other's through its relay.
func twoShards(t *testing.T) (a, b *shard) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a, b = &shard{}, &shard{}
	locate := func(addr netip.Addr) (node, relay string, ok bool) {
		for _, s := range []struct {
			sh     *shard
			node   string
			prefix netip.Prefix
		}{{a, "node-a", netip.MustParsePrefix("10.64.0.0/24")}, {b, "node-b", netip.MustParsePrefix("10.64.1.0/24")}} {
			if s.prefix.Contains(addr) {
				return s.node, s.sh.relay, true
			}
		}
		return "", "", false
	}
	done := make(chan error, 2)
	for _, s := range []*shard{a, b} {
		s.cut.Store("")
		s.net = networktest.New(t, network.Options{
			Reachable: func(from, to string) bool { return from != s.cut.Load() && to != s.cut.Load() },
			Elsewhere: &relay.Client{Locate: locate},
		})
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s.relay = l.Addr().String()
		go func() { done <- relay.Serve(ctx, l, s.net) }()
	}
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	})
	return a, b
}

func attach(t *testing.T, s *shard, ip, node string) *network.Interface {
	t.Helper()
	i, err := s.net.Attach(netip.MustParseAddr(ip), node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(i.Close)
	return i
}

// TestDial: a connection to a pod another shard holds carries bytes both ways, half-closes
// included, with the pod network's addresses at both ends.
func TestDial(t *testing.T) {
	a, b := twoShards(t)
	client := attach(t, a, "10.64.0.2", "node-a")
	server := attach(t, b, "10.64.1.2", "node-b")
	l, err := server.Listen(8080)
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
			return
		}
		accepted <- c
	}()
	c, err := client.Dial(t.Context(), "10.64.1.2:8080")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := <-accepted
	defer s.Close()
	if got, want := c.RemoteAddr().String(), "10.64.1.2:8080"; got != want {
		t.Errorf("the client's remote address is %s, want %s", got, want)
	}
	if got := s.RemoteAddr().String(); !strings.HasPrefix(got, "10.64.0.2:") {
		t.Errorf("the server sees the connection from %s, want 10.64.0.2:PORT", got)
	}
	if got, want := s.RemoteAddr().String(), c.LocalAddr().String(); got != want {
		t.Errorf("the server sees the client at %s, the client is at %s", got, want)
	}
	if _, err := io.WriteString(c, "ping"); err != nil {
		t.Fatal(err)
	}
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(s)
	if err != nil || string(got) != "ping" {
		t.Fatalf("the server read %q, %v; want \"ping\" then EOF", got, err)
	}
	if _, err := io.WriteString(s, "pong"); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	got, err = io.ReadAll(c)
	if err != nil || string(got) != "pong" {
		t.Fatalf("the client read %q, %v; want \"pong\" then EOF", got, err)
	}
}

// TestRefusedAndUnreachable: the far shard's network says what a kernel would, and a partition
// on either shard cuts the two nodes apart; ping follows the same rules.
func TestRefusedAndUnreachable(t *testing.T) {
	a, b := twoShards(t)
	client := attach(t, a, "10.64.0.2", "node-a")
	attach(t, b, "10.64.1.2", "node-b")
	for _, tc := range []struct {
		name        string
		cutA, cutB  string
		address     string
		want        error
		pingAnswers bool
	}{
		{name: "nobody listens", address: "10.64.1.2:9", want: network.ErrRefused, pingAnswers: true},
		{name: "no such pod", address: "10.64.1.3:80", want: network.ErrUnreachable},
		{name: "no shard holds it", address: "10.99.0.1:80", want: network.ErrUnreachable},
		{name: "the far node is partitioned", cutB: "node-b", address: "10.64.1.2:9", want: network.ErrUnreachable},
		{name: "the near node is partitioned", cutA: "node-a", address: "10.64.1.2:9", want: network.ErrUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a.cut.Store(tc.cutA)
			b.cut.Store(tc.cutB)
			defer a.cut.Store("")
			defer b.cut.Store("")
			_, err := client.Dial(t.Context(), tc.address)
			if !errors.Is(err, tc.want) {
				t.Errorf("Dial(%s): %v, want %v", tc.address, err, tc.want)
			}
			dst := netip.MustParseAddrPort(tc.address).Addr()
			if err := client.Ping(t.Context(), dst); (err == nil) != tc.pingAnswers {
				t.Errorf("Ping(%s): %v, want an answer: %t", dst, err, tc.pingAnswers)
			}
		})
	}
}
