package network

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// socketBuffer is how much one direction of a connection holds before a write waits for the
// reader, like a socket's send and receive buffers together.
const socketBuffer = 256 << 10

// stream is one direction of an in-memory TCP connection: a bounded buffer that the writer fills
// and the reader drains, so that a write returns once its bytes are buffered, as a socket's does.
// Deadlines on either side wake a blocked call with os.ErrDeadlineExceeded.
type stream struct {
	mu sync.Mutex
	// changed is closed and replaced whenever something a blocked call waits for happens.
	changed     chan struct{}
	buf         []byte
	writeClosed bool // the writer shut down: the reader reads EOF once buf is drained
	readClosed  bool // the reader shut down: writes fail
	readDL      time.Time
	writeDL     time.Time
}

func newStream() *stream { return &stream{changed: make(chan struct{})} }

// signal wakes every blocked call; s.mu is held.
func (s *stream) signal() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// wait releases s.mu until something changes or the deadline passes; false on the deadline.
func (s *stream) wait(deadline time.Time) bool {
	ch := s.changed
	s.mu.Unlock()
	defer s.mu.Lock()
	if deadline.IsZero() {
		<-ch
		return true
	}
	d := time.Until(deadline) //nolint:forbidigo // net.Conn deadlines are wall-clock times by contract

	if d <= 0 {
		return false
	}
	t := time.NewTimer(d) //nolint:forbidigo // as above
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

func expired(dl time.Time) bool {
	return !dl.IsZero() && !time.Now().Before(dl) //nolint:forbidigo // net.Conn deadlines are wall-clock times
}

func (s *stream) read(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		switch {
		case s.readClosed:
			return 0, net.ErrClosed
		case len(s.buf) > 0:
			n := copy(b, s.buf)
			s.buf = s.buf[n:]
			s.signal()
			return n, nil
		case s.writeClosed:
			return 0, io.EOF
		case expired(s.readDL):
			return 0, os.ErrDeadlineExceeded
		}
		s.wait(s.readDL)
	}
}

func (s *stream) write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for n < len(b) {
		switch {
		case s.writeClosed:
			return n, net.ErrClosed
		case s.readClosed:
			return n, io.ErrClosedPipe // the peer closed: EPIPE
		case expired(s.writeDL):
			return n, os.ErrDeadlineExceeded
		case len(s.buf) < socketBuffer:
			k := min(len(b)-n, socketBuffer-len(s.buf))
			s.buf = append(s.buf, b[n:n+k]...)
			n += k
			s.signal()
			continue
		}
		s.wait(s.writeDL)
	}
	return n, nil
}

func (s *stream) closeWrite() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeClosed = true
	s.signal()
}

func (s *stream) closeRead() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readClosed = true
	s.buf = nil
	s.signal()
}

func (s *stream) setReadDeadline(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readDL = t
	s.signal()
}

func (s *stream) setWriteDeadline(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeDL = t
	s.signal()
}

// conn is one end of an in-memory TCP connection: a stream each way, so that either end can
// shut down its writing half (CloseWrite) and the other reads EOF, as after TCP's FIN. Deadlines
// are on the wall clock, as a socket's are.
type conn struct {
	in, out       *stream
	local, remote net.Addr
}

// connPair connects a client at local that dialled dialled to a server at serverAddr (a
// Service's address is dialled, an endpoint's answers).
func connPair(local, dialled, serverAddr net.Addr) (client, server *conn) {
	c2s, s2c := newStream(), newStream()
	return &conn{in: s2c, out: c2s, local: local, remote: dialled},
		&conn{in: c2s, out: s2c, local: serverAddr, remote: local}
}

func (c *conn) Read(b []byte) (int, error)  { return c.in.read(b) }
func (c *conn) Write(b []byte) (int, error) { return c.out.write(b) }

// Close closes both halves.
func (c *conn) Close() error {
	c.out.closeWrite()
	c.in.closeRead()
	return nil
}

// CloseWrite shuts down the writing half: the peer reads EOF once it has read what was sent.
func (c *conn) CloseWrite() error {
	c.out.closeWrite()
	return nil
}

// CloseRead shuts down the reading half: the peer's writes fail.
func (c *conn) CloseRead() error {
	c.in.closeRead()
	return nil
}

func (c *conn) LocalAddr() net.Addr  { return c.local }
func (c *conn) RemoteAddr() net.Addr { return c.remote }

func (c *conn) SetDeadline(t time.Time) error {
	c.in.setReadDeadline(t)
	c.out.setWriteDeadline(t)
	return nil
}

func (c *conn) SetReadDeadline(t time.Time) error {
	c.in.setReadDeadline(t)
	return nil
}

func (c *conn) SetWriteDeadline(t time.Time) error {
	c.out.setWriteDeadline(t)
	return nil
}
