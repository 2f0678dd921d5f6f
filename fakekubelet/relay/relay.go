package relay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/restartbed/restartbed/fakekubelet/network"
)

// request is the first line a Client sends: what to connect, or which address to ping.
type request struct {
	// Op is opDial or opPing.
	Op string `json:"op"`
	// From is the node of the source address ("" for the control plane).
	From string `json:"from"`
	// Src is the source address and port (a dial's).
	Src string `json:"src,omitempty"`
	// Dst is the destination: address and port for a dial, address for a ping.
	Dst string `json:"dst"`
}

const (
	opDial = "dial"
	opPing = "ping"
)

// answer is the Server's line in return: Error is empty when the connection is made (the
// connection's bytes follow) or the echo answered.
type answer struct {
	Error string `json:"error,omitempty"`
}

// The answers' errors, and the network's errors they stand for.
const (
	errRefused     = "refused"
	errUnreachable = "unreachable"
)

// handshakeTimeout bounds the request and answer lines, so that a peer that says nothing does
// not hold a connection or a dial forever.
const handshakeTimeout = 10 * time.Second

// Network is what a Server hands its connections to: the holder's pod network.
type Network interface {
	Accept(ctx context.Context, from string, src, dst netip.AddrPort) (net.Conn, error)
	Answers(from string, dst netip.Addr) bool
}

var _ Network = (*network.Network)(nil)

// Serve answers the requests of other shards' Clients on l until ctx ends or l fails: each
// dial is accepted by pods and its bytes copied both ways until both ends have closed, or until
// ctx ends, which closes every connection, as a shard's machine going down does.
func Serve(ctx context.Context, l net.Listener, pods Network) error {
	logger := klog.FromContext(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { _ = l.Close() })
	defer stop()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("relay: %w", err)
		}
		wg.Go(func() {
			if err := serveConn(ctx, c, pods); err != nil {
				logger.V(4).Info("Relay connection failed", "peer", c.RemoteAddr(), "err", err)
			}
		})
	}
}

func serveConn(ctx context.Context, c net.Conn, pods Network) error {
	_ = c.SetDeadline(time.Now().Add(handshakeTimeout)) //nolint:forbidigo // socket deadlines are wall-clock times by contract
	r := bufio.NewReader(c)
	line, err := r.ReadBytes('\n')
	if err != nil {
		_ = c.Close()
		return fmt.Errorf("reading the request: %w", err)
	}
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		_ = c.Close()
		return fmt.Errorf("the request %q: %w", line, err)
	}
	reply := func(a answer) error {
		b, _ := json.Marshal(a)
		_, err := c.Write(append(b, '\n'))
		return err
	}
	switch req.Op {
	case opPing:
		defer c.Close()
		dst, err := netip.ParseAddr(req.Dst)
		if err != nil {
			return fmt.Errorf("the request's dst %q: %w", req.Dst, err)
		}
		if !pods.Answers(req.From, dst) {
			return reply(answer{Error: errUnreachable})
		}
		return reply(answer{})
	case opDial:
		src, err1 := netip.ParseAddrPort(req.Src)
		dst, err2 := netip.ParseAddrPort(req.Dst)
		if err := errors.Join(err1, err2); err != nil {
			_ = c.Close()
			return fmt.Errorf("the request's addresses: %w", err)
		}
		inner, err := pods.Accept(ctx, req.From, src, dst)
		if err != nil {
			defer c.Close()
			return reply(answer{Error: errorName(err)})
		}
		if err := reply(answer{}); err != nil {
			_ = c.Close()
			_ = inner.Close()
			return err
		}
		_ = c.SetDeadline(time.Time{})
		stop := context.AfterFunc(ctx, func() {
			_ = c.Close()
			_ = inner.Close()
		})
		defer stop()
		splice(&bufferedConn{Conn: c, r: r}, inner)
		return nil
	default:
		_ = c.Close()
		return fmt.Errorf("the request's op %q: want %s or %s", req.Op, opDial, opPing)
	}
}

// errorName is the answer's name for the network's error.
func errorName(err error) string {
	if errors.Is(err, network.ErrRefused) {
		return errRefused
	}
	return errUnreachable
}

// Client reaches the addresses other shards hold (network.Elsewhere).
type Client struct {
	// Locate is the node whose pod or own address addr is, and the address of the relay Server
	// of the shard that runs it; false when no shard does.
	Locate func(addr netip.Addr) (node, relay string, ok bool)
	// Dialer dials the Servers. Zero: a net.Dialer.
	Dialer net.Dialer
}

var _ network.Elsewhere = (*Client)(nil)

// Holder is the node that holds addr, as Locate says.
func (c *Client) Holder(addr netip.Addr) (string, bool) {
	node, _, ok := c.Locate(addr)
	return node, ok
}

// Dial connects src on node from to dst through the relay of dst's shard. The connection's
// addresses are the pod network's: src and dst.
func (c *Client) Dial(ctx context.Context, from string, src, dst netip.AddrPort) (net.Conn, error) {
	conn, r, err := c.ask(ctx, request{Op: opDial, From: from, Src: src.String(), Dst: dst.String()}, dst.Addr())
	if err != nil {
		return nil, err
	}
	return &bufferedConn{Conn: conn, r: r, local: net.TCPAddrFromAddrPort(src), remote: net.TCPAddrFromAddrPort(dst)}, nil
}

// Ping asks dst's shard whether dst answers an echo from node from.
func (c *Client) Ping(ctx context.Context, from string, dst netip.Addr) error {
	conn, _, err := c.ask(ctx, request{Op: opPing, From: from, Dst: dst.String()}, dst)
	if err != nil {
		return fmt.Errorf("no reply from %s: %w", dst, err)
	}
	return conn.Close()
}

// ask sends req to the relay of addr's shard and reads its answer: the connection, ready for a
// dial's bytes, or the network's error.
func (c *Client) ask(ctx context.Context, req request, addr netip.Addr) (net.Conn, *bufio.Reader, error) {
	_, relay, ok := c.Locate(addr)
	if !ok {
		return nil, nil, network.ErrUnreachable
	}
	conn, err := c.Dialer.DialContext(ctx, "tcp", relay)
	if err != nil {
		// The shard is gone or cut off: its nodes are, too.
		return nil, nil, fmt.Errorf("%w (relay %s: %w)", network.ErrUnreachable, relay, err)
	}
	deadline := time.Now().Add(handshakeTimeout) //nolint:forbidigo // socket deadlines are wall-clock times by contract
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) }) //nolint:forbidigo // as above
	defer stop()
	line, _ := json.Marshal(req)
	r := bufio.NewReader(conn)
	var a answer
	if _, err = conn.Write(append(line, '\n')); err == nil {
		var b []byte
		if b, err = r.ReadBytes('\n'); err == nil {
			err = json.Unmarshal(b, &a)
		}
	}
	if err != nil {
		_ = conn.Close()
		return nil, nil, fmt.Errorf("%w (relay %s: %w)", network.ErrUnreachable, relay, err)
	}
	switch a.Error {
	case "":
		_ = conn.SetDeadline(time.Time{})
		return conn, r, nil
	case errRefused:
		_ = conn.Close()
		return nil, nil, network.ErrRefused
	default:
		_ = conn.Close()
		return nil, nil, network.ErrUnreachable
	}
}

// bufferedConn is a relay's TCP connection past its answer line: reads drain what the line's
// reader buffered first; its addresses are the pod network's when set.
type bufferedConn struct {
	net.Conn
	r             *bufio.Reader
	local, remote net.Addr
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *bufferedConn) LocalAddr() net.Addr {
	if b.local != nil {
		return b.local
	}
	return b.Conn.LocalAddr()
}

func (b *bufferedConn) RemoteAddr() net.Addr {
	if b.remote != nil {
		return b.remote
	}
	return b.Conn.RemoteAddr()
}

// CloseWrite shuts down the sending half: the far end reads EOF.
func (b *bufferedConn) CloseWrite() error {
	if cw, ok := b.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return b.Close()
}

// CloseRead shuts down the receiving half.
func (b *bufferedConn) CloseRead() error {
	if cr, ok := b.Conn.(interface{ CloseRead() error }); ok {
		return cr.CloseRead()
	}
	return nil
}

// splice copies a's bytes to b and b's to a; each direction's end half-closes the other side,
// and both connections close once both directions ended.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	one := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	wg.Go(func() { one(a, b) })
	wg.Go(func() { one(b, a) })
	wg.Wait()
	_ = a.Close()
	_ = b.Close()
}
