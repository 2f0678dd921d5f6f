package hostproc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// A process in a sandbox reaches the pod network as a pod reaches a cluster's: its connections
// to addresses that are not the sandbox's own follow the default route (through lo, the helper
// adds it), and a nat rule in the sandbox's network namespace redirects them to a listener of
// restartbed's on the sandbox's 127.0.0.1, as Istio's sidecars catch a pod's traffic. restartbed
// reads where each was going (SO_ORIGINAL_DST) and dials that on the pod network, which routes
// it as kube-proxy and CNI would: to a pod, a Service's endpoint, another sandbox's process.

// redirect adds the nat rule to the network namespace of the helper pid: TCP to any address
// that is not local goes to port of 127.0.0.1.
func redirect(pid int, port uint16) error {
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return err
	}
	defer ns.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(ns.Fd())))
	if err != nil {
		return err
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "restartbed"})
	ch := c.AddChain(&nftables.Chain{Name: "output", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest})
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{ // the sandbox's own addresses stay
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}})
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.Redir{RegisterProtoMin: 1},
	}})
	return c.Flush()
}

// dialRedirected dials, on the pod network, where a redirected connection was going.
func (s *Sandbox) dialRedirected(ctx context.Context, c net.Conn) (net.Conn, error) {
	dst, err := originalDestination(c)
	if err != nil {
		return nil, err
	}
	return s.spec.Dial(ctx, dst.String())
}

// originalDestination is where a redirected connection was going (SO_ORIGINAL_DST).
func originalDestination(c net.Conn) (netip.AddrPort, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, errors.New("not a TCP connection")
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var dst netip.AddrPort
	var serr error
	err = raw.Control(func(fd uintptr) {
		// The kernel writes a sockaddr_in; this getsockopt has room for one.
		var mreq *unix.IPv6Mreq
		if mreq, serr = unix.GetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IP, unix.SO_ORIGINAL_DST); serr == nil {
			b := mreq.Multiaddr
			dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:4]))
		}
	})
	return dst, errors.Join(err, serr)
}

// serveDNSPackets answers DNS queries over UDP.
func serveDNSPackets(pc net.PacketConn, answer func([]byte) ([]byte, error)) {
	buf := make([]byte, 64<<10)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp, err := answer(buf[:n]); err == nil {
			_, _ = pc.WriteTo(resp, from) // UDP: a lost answer is retried by the asker
		}
	}
}

// serveDNSStreams answers DNS queries over TCP, each message after its two-byte length.
func serveDNSStreams(ln net.Listener, answer func([]byte) ([]byte, error)) {
	serveEach(ln, func(c net.Conn) {
		for {
			var size [2]byte
			if _, err := io.ReadFull(c, size[:]); err != nil {
				return
			}
			query := make([]byte, binary.BigEndian.Uint16(size[:]))
			if _, err := io.ReadFull(c, query); err != nil {
				return
			}
			resp, err := answer(query)
			if err != nil {
				return
			}
			out := binary.BigEndian.AppendUint16(nil, uint16(len(resp)))
			if _, err := c.Write(append(out, resp...)); err != nil {
				return
			}
		}
	})
}
