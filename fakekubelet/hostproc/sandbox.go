package hostproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/restartbed/restartbed/internal/clockctx"
)

// SandboxSpec says what a pod's sandbox holds.
type SandboxSpec struct {
	// Hostname is the pod's hostname.
	Hostname string
	// IP is the pod's IP, on the sandbox's loopback interface.
	IP netip.Addr
	// APIServer is the address in the sandbox that reaches the apiserver, the kubernetes
	// Service's cluster IP and port that KUBERNETES_SERVICE_HOST and _PORT name; the zero value:
	// none.
	APIServer netip.AddrPort
	// APIServerReachable says whether the pod can reach the apiserver now (its node is not
	// partitioned). While it cannot, connections to APIServer are closed once accepted and the
	// ones open are cut, as the node's in-process programs are cut off. Nil: always.
	APIServerReachable func() bool
	// Dial reaches any other address the process connects to over TCP (other pods, Services):
	// the sandbox routes them to restartbed, which dials them on the pod network with Dial. A
	// connection Dial cannot make is closed once accepted. Nil: nothing else is reachable.
	Dial func(ctx context.Context, address string) (net.Conn, error)
	// DNS is the cluster DNS server's address, on the sandbox's loopback interface, where
	// AnswerDNS answers queries (UDP and TCP, port 53) in wire format. Either zero: no DNS.
	DNS       netip.Addr
	AnswerDNS func(query []byte) ([]byte, error)
}

// servesDNS reports whether the sandbox answers DNS queries.
func (spec SandboxSpec) servesDNS() bool { return spec.DNS.IsValid() && spec.AnswerDNS != nil }

// redirectPort is where, on the sandbox's 127.0.0.1, connections to other addresses arrive.
const redirectPort = 15001

// Sandbox is one pod's namespaces, held by its helper process.
type Sandbox struct {
	host *Host
	spec SandboxSpec
	cmd  *exec.Cmd
	ctl  *net.UnixConn
	// stderr collects what the helper says on its way out.
	stderr lockedBuffer
	// buf and oob receive messages; only one goroutine receives at a time (start, then read).
	buf, oob []byte

	sendMu sync.Mutex

	mu      sync.Mutex
	seq     uint64
	waiting map[string]chan reply
	procs   map[string]*Process
	// exited is closed when the helper has ended; listeners are the ones it handed over, closers
	// the rest of what it handed over.
	exited    chan struct{}
	listeners []net.Listener
	closers   []io.Closer
}

type reply struct {
	msg   message
	files []*os.File
}

// helperStartTimeout bounds the helper's set-up.
const helperStartTimeout = 30 * time.Second

func (h *Host) start(spec SandboxSpec) (*Sandbox, error) {
	if !spec.IP.Is4() {
		return nil, fmt.Errorf("hostproc: pod IP %s: only IPv4 is supported", spec.IP)
	}
	cfg := helperConfig{Hostname: spec.Hostname, Addrs: []string{spec.IP.String()}, Base: h.opts.Dir}
	if spec.APIServer.IsValid() {
		cfg.Addrs = append(cfg.Addrs, spec.APIServer.Addr().String())
		cfg.Listen = append(cfg.Listen, helperListen{Network: "tcp", Address: spec.APIServer.String()})
	}
	if spec.Dial != nil {
		cfg.DefaultRoute = true
		cfg.Listen = append(cfg.Listen, helperListen{Network: "tcp", Address: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), redirectPort).String()})
	}
	if spec.servesDNS() {
		addr := netip.AddrPortFrom(spec.DNS, 53).String()
		cfg.Addrs = append(cfg.Addrs, spec.DNS.String())
		cfg.Listen = append(cfg.Listen, helperListen{Network: "udp", Address: addr}, helperListen{Network: "tcp", Address: addr})
	}
	arg, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("hostproc: control socket: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "control"), os.NewFile(uintptr(fds[1]), "control")
	defer theirs.Close()
	conn, err := net.FileConn(ours)
	_ = ours.Close()
	if err != nil {
		return nil, fmt.Errorf("hostproc: control socket: %w", err)
	}
	s := &Sandbox{host: h, spec: spec, ctl: conn.(*net.UnixConn), waiting: map[string]chan reply{}, procs: map[string]*Process{},
		exited: make(chan struct{}), buf: make([]byte, 64<<10), oob: make([]byte, syscall.CmsgSpace(4*4))}
	s.cmd = exec.Command(h.opts.Helper, string(arg))
	s.cmd.Args[0] = "restartbed-" + HelperName
	s.cmd.ExtraFiles = []*os.File{theirs}
	s.cmd.Stderr = &s.stderr
	s.cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET | syscall.CLONE_NEWPID | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC,
		Pdeathsig:  syscall.SIGKILL,
	}
	h.spawn.do(func() { err = s.cmd.Start() })
	if err != nil {
		_ = s.ctl.Close()
		return nil, fmt.Errorf("hostproc: starting the sandbox helper: %w", err)
	}
	go func() {
		_ = s.cmd.Wait() // the helper was killed: its exit status says nothing more
		_ = s.ctl.Close()
		close(s.exited)
	}()
	first, err := s.readTimeout(helperStartTimeout)
	if err == nil && first.msg.Op != opReady {
		err = fmt.Errorf("%s", first.msg.Error)
	}
	if err == nil && len(first.files) != len(cfg.Listen) {
		err = fmt.Errorf("the helper handed over %d listeners, not %d", len(first.files), len(cfg.Listen))
	}
	if err != nil {
		closeFiles(first.files)
		s.Close()
		return nil, fmt.Errorf("hostproc: setting up the sandbox of %s: %w%s", spec.Hostname, err, s.helperSaid())
	}
	if err := s.serveListeners(first.files); err != nil {
		s.Close()
		return nil, fmt.Errorf("hostproc: the sandbox's listeners: %w", err)
	}
	if spec.Dial != nil {
		if err := redirect(s.cmd.Process.Pid, redirectPort); err != nil {
			s.Close()
			return nil, fmt.Errorf("hostproc: routing the sandbox's connections to restartbed: %w", err)
		}
	}
	go s.read()
	return s, nil
}

// serveListeners serves what the helper's listeners accept, in the order start asked for them:
// the apiserver's address, the redirected connections, the DNS server's UDP and TCP ports.
func (s *Sandbox) serveListeners(files []*os.File) error {
	defer closeFiles(files)
	next := 0
	take := func() (net.Listener, error) {
		ln, err := net.FileListener(files[next])
		next++
		if err == nil {
			s.listeners = append(s.listeners, ln)
		}
		return ln, err
	}
	if s.spec.APIServer.IsValid() {
		ln, err := take()
		if err != nil {
			return err
		}
		reachable := s.spec.APIServerReachable
		if reachable == nil {
			reachable = func() bool { return true }
		}
		go s.relay(ln, func(ctx context.Context, _ net.Conn) (net.Conn, error) {
			if !reachable() {
				return nil, errors.New("the apiserver is unreachable from the pod's node")
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", s.host.opts.APIServer)
		}, reachable)
	}
	if s.spec.Dial != nil {
		ln, err := take()
		if err != nil {
			return err
		}
		go s.relay(ln, s.dialRedirected, nil)
	}
	if s.spec.servesDNS() { // UDP, then TCP
		pc, err := net.FilePacketConn(files[next])
		next++
		if err != nil {
			return err
		}
		s.closers = append(s.closers, pc)
		go serveDNSPackets(pc, s.spec.AnswerDNS)
		ln, err := take()
		if err != nil {
			return err
		}
		go serveDNSStreams(ln, s.spec.AnswerDNS)
	}
	return nil
}

func (s *Sandbox) helperSaid() string {
	select { // what it says on its way out
	case <-s.exited:
	case <-s.host.opts.Clock.After(time.Second):
	}
	said := s.stderr.String()
	if said == "" {
		return ""
	}
	return "; the helper said: " + said
}

func (s *Sandbox) ended() bool {
	select {
	case <-s.exited:
		return true
	default:
		return false
	}
}

// readTimeout reads one message, or fails after d.
func (s *Sandbox) readTimeout(d time.Duration) (reply, error) {
	_ = s.ctl.SetReadDeadline(s.host.opts.Clock.Now().Add(d)) // fails only on a closed connection, which the read then reports
	r, err := s.receive()
	_ = s.ctl.SetReadDeadline(time.Time{}) // as above
	return r, err
}

func (s *Sandbox) receive() (reply, error) {
	n, oobn, _, _, err := s.ctl.ReadMsgUnix(s.buf, s.oob)
	if err != nil {
		return reply{}, err
	}
	if n == 0 {
		return reply{}, io.EOF
	}
	var r reply
	r.files = receivedFiles(s.oob[:oobn])
	if err := json.Unmarshal(s.buf[:n], &r.msg); err != nil {
		closeFiles(r.files)
		return reply{}, fmt.Errorf("a message of the helper: %w", err)
	}
	return r, nil
}

// read delivers the helper's messages until it ends; then every process still running counts
// as killed.
func (s *Sandbox) read() {
	for {
		r, err := s.receive()
		if err != nil {
			break
		}
		s.mu.Lock()
		if r.msg.Op == opExited {
			p := s.procs[r.msg.ID]
			delete(s.procs, r.msg.ID)
			s.mu.Unlock()
			closeFiles(r.files)
			if p != nil {
				go p.exit(r.msg.Code) // it waits for the output
			}
			continue
		}
		// A reply: delivered under the lock (its channel has room for it), so that a request
		// that gave up and left s.waiting finds it, or it finds nobody.
		if ch := s.waiting[r.msg.ID]; ch != nil {
			delete(s.waiting, r.msg.ID)
			ch <- r
		} else {
			closeFiles(r.files)
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	procs, waiting := s.procs, s.waiting
	s.procs, s.waiting = map[string]*Process{}, map[string]chan reply{}
	s.mu.Unlock()
	for _, p := range procs {
		go p.exit(128 + int(syscall.SIGKILL))
	}
	for id, ch := range waiting {
		ch <- reply{msg: message{Op: opFailed, ID: id, Error: "the sandbox ended"}}
	}
}

// request sends m (with files) and waits for the reply to m.ID.
func (s *Sandbox) request(ctx context.Context, m message, files ...*os.File) (reply, error) {
	ch := make(chan reply, 1)
	s.mu.Lock()
	if s.ended() {
		s.mu.Unlock()
		return reply{}, errors.New("the sandbox ended")
	}
	s.waiting[m.ID] = ch
	s.mu.Unlock()
	if err := s.send(m, files...); err != nil {
		s.mu.Lock()
		delete(s.waiting, m.ID)
		s.mu.Unlock()
		return reply{}, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.waiting, m.ID)
		s.mu.Unlock()
		select { // a reply delivered meanwhile: close what it brought
		case r := <-ch:
			closeFiles(r.files)
		default:
		}
		return reply{}, ctx.Err()
	}
}

func (s *Sandbox) send(m message, files ...*os.File) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = syscall.UnixRights(fds...)
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	_, _, err = s.ctl.WriteMsgUnix(data, oob, nil)
	return err
}

func (s *Sandbox) nextID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return prefix + strconv.FormatUint(s.seq, 10)
}

// FilesDir is the directory, in the sandbox's tmpfs, that Mount sources are relative to, as a
// path restartbed can write (through /proc/PID/root of the helper).
func (s *Sandbox) FilesDir() string {
	return filepath.Join("/proc", strconv.Itoa(s.cmd.Process.Pid), "root", s.host.opts.Dir, "files")
}

// Dial connects to port of the pod's IP from inside the sandbox. A refused connection is
// syscall.ECONNREFUSED.
func (s *Sandbox) Dial(ctx context.Context, port uint16) (net.Conn, error) {
	r, err := s.request(ctx, message{Op: opDial, ID: s.nextID("dial-"), Port: int(port)})
	if err != nil {
		return nil, err
	}
	defer closeFiles(r.files)
	if r.msg.Error != "" {
		if r.msg.Error == syscall.ECONNREFUSED.Error() {
			return nil, syscall.ECONNREFUSED
		}
		return nil, errors.New(r.msg.Error)
	}
	if len(r.files) != 1 {
		return nil, errors.New("the helper handed over no connection")
	}
	return net.FileConn(r.files[0])
}

// Close ends the helper, and with it every process of the sandbox.
func (s *Sandbox) Close() {
	_ = s.ctl.Close()
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill() // fails only when the process has already exited
	}
	<-s.exited
	for _, ln := range s.listeners {
		_ = ln.Close()
	}
	for _, c := range s.closers {
		_ = c.Close()
	}
}

func receivedFiles(oob []byte) []*os.File {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var files []*os.File
	for i := range msgs {
		fds, err := syscall.ParseUnixRights(&msgs[i])
		if err != nil {
			continue
		}
		for _, fd := range fds {
			syscall.CloseOnExec(fd)
			files = append(files, os.NewFile(uintptr(fd), "from-sandbox"))
		}
	}
	return files
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// relay accepts connections on ln and splices each with the connection dial makes for it; a
// connection dial cannot make is closed. With reachable, a spliced pair is cut as soon as it
// reports false (checked every cutCheck).
func (s *Sandbox) relay(ln net.Listener, dial func(ctx context.Context, c net.Conn) (net.Conn, error), reachable func() bool) {
	serveEach(ln, func(c net.Conn) {
		ctx, cancel := clockctx.WithTimeout(context.Background(), s.host.opts.Clock, 10*time.Second)
		up, err := dial(ctx, c)
		cancel()
		if err != nil {
			return
		}
		defer up.Close()
		if reachable != nil {
			done := make(chan struct{})
			defer close(done)
			go s.cutWhenUnreachable(done, reachable, c, up)
		}
		Splice(c, up)
	})
}

// cutCheck is how often a relayed connection checks that its ends still reach each other.
const cutCheck = 100 * time.Millisecond

// cutWhenUnreachable closes conns once reachable reports false, until done.
func (s *Sandbox) cutWhenUnreachable(done <-chan struct{}, reachable func() bool, conns ...net.Conn) {
	tick := s.host.opts.Clock.NewTicker(cutCheck)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C():
			if !reachable() {
				for _, c := range conns {
					_ = c.Close()
				}
				return
			}
		}
	}
}

// serveEach handles each connection ln accepts in a goroutine of its own, and closes it after,
// until ln is closed.
func serveEach(ln net.Listener, handle func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			handle(c)
		}()
	}
}

// Splice copies both ways between a and b until both directions end, passing on each half-close.
func Splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	half := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src) // a splice's copy ends when either side closes
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite() // the peer may have gone
		} else {
			_ = dst.Close()
		}
	}
	go half(a, b)
	go half(b, a)
	wg.Wait()
}

// lockedBuffer is a bytes.Buffer that the helper's stderr and a reader share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(bytes.TrimSpace(l.buf.Bytes()))
}
