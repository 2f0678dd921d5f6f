//go:build ignore

// restartbed-sandbox is the first process of one pod's sandbox when the pod runs host
// executables. restartbed starts it in new mount, network, PID, UTS and IPC namespaces, and it
// holds them: when it ends, the kernel kills every process left in the PID namespace and the
// namespaces go with it. It asks for SIGKILL when restartbed dies (PR_SET_PDEATHSIG, set by its
// parent), and it ends when restartbed closes the control socket.
//
// It needs nothing but the standard library: package hostproc builds it from this file (the
// build tag keeps it out of the package) and starts it with its configuration as the only
// argument and the control socket as fd 3.
//
// Inside, it brings up the loopback interface with the sandbox's addresses on it, sets the
// hostname, mounts a tmpfs on the sandbox's base directory (volumes and container roots live
// there, so they vanish with it), opens the listeners restartbed asked for and hands them over,
// and then serves restartbed's requests: start a container (it re-executes itself as "init" in
// a mount namespace of the container's own), run a command in a running container (an exec:
// chrooted into the container's root, /proc/PID/root of its process), signal either, dial a port
// of the sandbox. It reaps
// every process, as a PID 1 must, and reports each container's exit.
//
// The messages are JSON, one per SOCK_SEQPACKET packet, file descriptors as SCM_RIGHTS; their
// types are hostproc's protocol.go, which is appended to this file when it is built
// (HelperSource), so both sides share one definition.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "init" {
		initContainer(os.Args[2])
		return
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "restartbed-sandbox: started by restartbed only")
		os.Exit(2)
	}
	var cfg helperConfig
	if err := json.Unmarshal([]byte(os.Args[1]), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "restartbed-sandbox: configuration: %v\n", err)
		os.Exit(2)
	}
	conn, err := net.FileConn(os.NewFile(3, "control"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "restartbed-sandbox: control socket: %v\n", err)
		os.Exit(2)
	}
	s := &sandbox{cfg: cfg, ctl: conn.(*net.UnixConn), procs: map[int]string{}, byID: map[string]int{},
		early: map[int]int{}, failed: map[int]bool{}}
	files, err := s.setup()
	if err != nil {
		s.send(message{Op: opFailed, Error: err.Error()})
		os.Exit(1)
	}
	s.send(message{Op: opReady}, files...)
	for _, f := range files {
		_ = f.Close()
	}
	go s.reap()
	s.serve()
}

type sandbox struct {
	cfg    helperConfig
	ctl    *net.UnixConn
	sendMu sync.Mutex

	mu sync.Mutex
	// procs are the running containers' processes, by PID; byID the same by container ID.
	procs map[int]string
	byID  map[string]int
	// early holds exits reaped before their start was recorded; failed the PIDs of inits that
	// failed, whose exit nobody waits for.
	early  map[int]int
	failed map[int]bool
}

func (s *sandbox) setup() ([]*os.File, error) {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("making the mounts private: %w", err)
	}
	if err := syscall.Mount("tmpfs", s.cfg.Base, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755"); err != nil {
		return nil, fmt.Errorf("mounting a tmpfs on %s: %w", s.cfg.Base, err)
	}
	// The sandbox's own /proc, whose PIDs are the ones ForkExec returns here (the /proc this
	// process inherited numbers the host's PIDs).
	if err := os.Mkdir(s.proc(), 0o555); err != nil {
		return nil, fmt.Errorf("creating the sandbox's /proc: %w", err)
	}
	if err := syscall.Mount("proc", s.proc(), "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return nil, fmt.Errorf("mounting the sandbox's /proc: %w", err)
	}
	if err := loopback(s.cfg.Addrs); err != nil {
		return nil, err
	}
	if s.cfg.DefaultRoute {
		if err := defaultRoute(); err != nil {
			return nil, err
		}
	}
	if err := syscall.Sethostname([]byte(s.cfg.Hostname)); err != nil {
		return nil, fmt.Errorf("setting the hostname: %w", err)
	}
	var files []*os.File
	for _, l := range s.cfg.Listen {
		f, err := listenFile(l)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// proc is where the sandbox's own /proc is mounted.
func (s *sandbox) proc() string { return filepath.Join(s.cfg.Base, "proc") }

func listenFile(l helperListen) (*os.File, error) {
	switch l.Network {
	case "tcp":
		ln, err := net.Listen("tcp", l.Address)
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		return ln.(*net.TCPListener).File()
	case "udp":
		pc, err := net.ListenPacket("udp", l.Address)
		if err != nil {
			return nil, err
		}
		defer pc.Close()
		return pc.(*net.UDPConn).File()
	}
	return nil, fmt.Errorf("listen on %s: unknown network %q", l.Address, l.Network)
}

// loopback brings lo up and puts each address on it as a /32 alias (lo:1, lo:2, ...).
func loopback(addrs []string) error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("configuring lo: %w", err)
	}
	defer syscall.Close(fd)
	var flags struct {
		name  [16]byte
		flags uint16
		_     [22]byte
	}
	copy(flags.name[:], "lo")
	if err := ioctl(fd, syscall.SIOCGIFFLAGS, unsafe.Pointer(&flags)); err != nil {
		return fmt.Errorf("reading lo's flags: %w", err)
	}
	flags.flags |= syscall.IFF_UP | syscall.IFF_RUNNING
	if err := ioctl(fd, syscall.SIOCSIFFLAGS, unsafe.Pointer(&flags)); err != nil {
		return fmt.Errorf("bringing lo up: %w", err)
	}
	for i, a := range addrs {
		ip := net.ParseIP(a).To4()
		if ip == nil {
			return fmt.Errorf("address %q: only IPv4 is supported", a)
		}
		var req struct {
			name [16]byte
			addr syscall.RawSockaddrInet4
			_    [8]byte
		}
		copy(req.name[:], "lo:"+strconv.Itoa(i+1))
		req.addr.Family = syscall.AF_INET
		copy(req.addr.Addr[:], ip)
		if err := ioctl(fd, syscall.SIOCSIFADDR, unsafe.Pointer(&req)); err != nil {
			return fmt.Errorf("adding %s to lo: %w", a, err)
		}
		copy(req.addr.Addr[:], []byte{255, 255, 255, 255})
		if err := ioctl(fd, syscall.SIOCSIFNETMASK, unsafe.Pointer(&req)); err != nil {
			return fmt.Errorf("setting the netmask of %s: %w", a, err)
		}
	}
	return nil
}

// defaultRoute adds 0.0.0.0/0 dev lo (SIOCADDRT: struct rtentry).
func defaultRoute() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("adding the default route: %w", err)
	}
	defer syscall.Close(fd)
	dev := []byte("lo\x00")
	var rt struct {
		pad1                  uintptr
		dst, gateway, genmask syscall.RawSockaddrInet4
		flags                 uint16
		pad2                  int16
		pad3                  uintptr
		pad4                  unsafe.Pointer
		metric                int16
		dev                   *byte
		mtu, window           uintptr
		irtt                  uint16
	}
	rt.dst.Family, rt.genmask.Family, rt.gateway.Family = syscall.AF_INET, syscall.AF_INET, syscall.AF_INET
	rt.flags = syscall.RTF_UP
	rt.dev = &dev[0]
	if err := ioctl(fd, syscall.SIOCADDRT, unsafe.Pointer(&rt)); err != nil {
		return fmt.Errorf("adding the default route: %w", err)
	}
	return nil
}

func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), req, uintptr(arg)); errno != 0 {
		return errno
	}
	return nil
}

func (s *sandbox) send(m message, files ...*os.File) {
	data, _ := json.Marshal(m) // a struct of strings and numbers always marshals
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
	if _, _, err := s.ctl.WriteMsgUnix(data, oob, nil); err != nil {
		os.Exit(1) // restartbed is gone
	}
}

// serve reads requests until restartbed closes the socket, then ends the sandbox.
func (s *sandbox) serve() {
	buf := make([]byte, 1<<20)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := s.ctl.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			os.Exit(0)
		}
		files, _ := receivedFiles(oob[:oobn]) // a message without files carries none
		var m message
		if err := json.Unmarshal(buf[:n], &m); err != nil {
			closeAll(files)
			continue
		}
		switch m.Op {
		case opStart:
			go s.start(m, files)
		case opExec:
			go s.exec(m, files)
		case opSignal:
			closeAll(files)
			s.signal(m.ID, syscall.Signal(m.Signal))
		case opDial:
			closeAll(files)
			go s.dial(m)
		default:
			closeAll(files)
		}
	}
}

func receivedFiles(oob []byte) ([]*os.File, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var files []*os.File
	for _, msg := range msgs {
		fds, err := syscall.ParseUnixRights(&msg)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "received"))
		}
	}
	return files, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// start starts a container's init with the stdout and stderr it was handed, and reports
// whether its executable started.
func (s *sandbox) start(m message, files []*os.File) {
	defer closeAll(files)
	if m.Init == nil || len(files) != 2 {
		s.send(message{Op: opFailed, ID: m.ID, Error: "a start needs a container and two log descriptors"})
		return
	}
	spec, _ := json.Marshal(m.Init) // a struct of strings and numbers always marshals
	r, w, err := os.Pipe()
	if err != nil {
		s.send(message{Op: opFailed, ID: m.ID, Error: err.Error()})
		return
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		s.send(message{Op: opFailed, ID: m.ID, Error: err.Error()})
		return
	}
	pid, err := syscall.ForkExec("/proc/self/exe", []string{"restartbed-sandbox", "init", string(spec)}, &syscall.ProcAttr{
		Files: []uintptr{devnull.Fd(), files[0].Fd(), files[1].Fd(), w.Fd()},
		Sys:   &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Setsid: true, Pdeathsig: syscall.SIGKILL},
	})
	_ = devnull.Close()
	_ = w.Close()
	if err != nil {
		_ = r.Close()
		s.send(message{Op: opFailed, ID: m.ID, Error: err.Error()})
		return
	}
	why, _ := readAll(r) // what was read before an error is the reason given
	_ = r.Close()
	s.mu.Lock()
	if len(why) > 0 {
		if _, ok := s.early[pid]; ok {
			delete(s.early, pid)
		} else {
			s.failed[pid] = true
		}
		s.mu.Unlock()
		s.send(message{Op: opFailed, ID: m.ID, Error: string(why)})
		return
	}
	s.procs[pid], s.byID[m.ID] = m.ID, pid
	code, exited := s.early[pid]
	delete(s.early, pid)
	s.mu.Unlock()
	s.send(message{Op: opStarted, ID: m.ID})
	if exited {
		s.exited(pid, code)
	}
}

// exec runs a command in a running container with the stdin, stdout and stderr it was handed:
// chrooted into the container's root, so it sees the container's files and mounts, in the
// sandbox's other namespaces. Its exit is reported like a container's.
func (s *sandbox) exec(m message, files []*os.File) {
	defer closeAll(files)
	if m.Exec == nil || len(files) != 3 || len(m.Exec.Argv) == 0 {
		s.send(message{Op: opFailed, ID: m.ID, Error: "an exec needs a container, a command and three descriptors"})
		return
	}
	s.mu.Lock()
	target, running := s.byID[m.Exec.Container]
	s.mu.Unlock()
	if !running {
		s.send(message{Op: opFailed, ID: m.ID, Error: "container is not running"})
		return
	}
	root := filepath.Join(s.proc(), strconv.Itoa(target), "root")
	path, err := lookPath(root, m.Exec.Argv[0], m.Exec.Env)
	if err != nil {
		s.send(message{Op: opFailed, ID: m.ID, Error: err.Error()})
		return
	}
	dir := m.Exec.Dir
	if dir == "" {
		dir = "/"
	}
	s.mu.Lock() // held across the fork, so that the reaper cannot see the exit first
	pid, err := syscall.ForkExec(path, m.Exec.Argv, &syscall.ProcAttr{Dir: dir, Env: m.Exec.Env,
		Files: []uintptr{files[0].Fd(), files[1].Fd(), files[2].Fd()},
		Sys:   &syscall.SysProcAttr{Chroot: root, Setsid: true, Pdeathsig: syscall.SIGKILL}})
	if err != nil {
		s.mu.Unlock()
		s.send(message{Op: opFailed, ID: m.ID, Error: fmt.Sprintf("exec %q: %v", m.Exec.Argv[0], err)})
		return
	}
	s.procs[pid], s.byID[m.ID] = m.ID, pid
	s.mu.Unlock()
	s.send(message{Op: opStarted, ID: m.ID})
}

// lookPath finds name in the container whose root is root, as a shell would: a name with a
// slash as it is, else the first executable file of PATH's directories (the container's PATH,
// else the usual one). It returns the path inside the container.
func lookPath(root, name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(filepath.Join(root, p)); err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", name)
}

func readAll(f *os.File) ([]byte, error) {
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := f.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return out, nil
		}
	}
}

func (s *sandbox) signal(id string, sig syscall.Signal) {
	s.mu.Lock()
	pid, ok := s.byID[id]
	s.mu.Unlock()
	if ok {
		_ = syscall.Kill(pid, sig) // fails only when the process has already exited
	}
}

func (s *sandbox) dial(m message) {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(s.cfg.Addrs[0], strconv.Itoa(m.Port)), 5*time.Second)
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			err = errno
		}
		s.send(message{Op: opDialed, ID: m.ID, Error: err.Error()})
		return
	}
	defer c.Close()
	f, err := c.(*net.TCPConn).File()
	if err != nil {
		s.send(message{Op: opDialed, ID: m.ID, Error: err.Error()})
		return
	}
	defer f.Close()
	s.send(message{Op: opDialed, ID: m.ID}, f)
}

// reap waits for every child, as the PID 1 of the namespace must, and reports the containers'.
func (s *sandbox) reap() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	for {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if err != nil || pid <= 0 {
				break
			}
			code := ws.ExitStatus()
			if ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
			s.mu.Lock()
			_, known := s.procs[pid]
			switch {
			case known:
			case s.failed[pid]:
				delete(s.failed, pid)
			default:
				s.early[pid] = code
			}
			s.mu.Unlock()
			if known {
				s.exited(pid, code)
			}
		}
		<-sigs
	}
}

// exited reports a container's exit and kills what is left of its process group, as the end of
// a container's cgroup would.
func (s *sandbox) exited(pid, code int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL) // fails only when the group has already exited
	s.mu.Lock()
	id := s.procs[pid]
	delete(s.procs, pid)
	delete(s.byID, id)
	s.mu.Unlock()
	s.send(message{Op: opExited, ID: id, Code: code})
}

// initContainer runs in the container's own mount namespace: it builds the container's root,
// moves into it and executes the binary. Whatever fails before the exec is written to fd 3,
// which the exec closes.
func initContainer(arg string) {
	report := os.NewFile(3, "report")
	fail := func(format string, args ...any) {
		fmt.Fprintf(report, format, args...)
		os.Exit(1)
	}
	syscall.CloseOnExec(3)
	var spec initSpec
	if err := json.Unmarshal([]byte(arg), &spec); err != nil {
		fail("init: %v", err)
	}
	if err := buildRoot(spec); err != nil {
		fail("%v", err)
	}
	dir := spec.Dir
	if dir == "" {
		dir = "/"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fail("creating the working directory: %v", err)
	}
	if err := syscall.Chdir(dir); err != nil {
		fail("changing to the working directory: %v", err)
	}
	if err := syscall.Exec(spec.Binary, spec.Argv, spec.Env); err != nil {
		fail("exec %s: %v", spec.Binary, err)
	}
}

// buildRoot makes the container's root an overlay of the host's root filesystem with a
// writable layer in the sandbox's tmpfs, gives it its own /proc, /tmp and /run, the host's /dev
// and /sys, the binary at its host path and the volumes at their mount paths, and pivots into
// it. Mount paths resolve inside the new root, so a symbolic link in them never leads out.
func buildRoot(s initSpec) error {
	upper, work, merged := filepath.Join(s.Root, "upper"), filepath.Join(s.Root, "work"), filepath.Join(s.Root, "merged")
	for _, d := range []string{upper, work, merged} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating the container's root: %w", err)
		}
	}
	opts := "lowerdir=/,upperdir=" + upper + ",workdir=" + work
	if err := syscall.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mounting an overlay of the host's root filesystem on %s: %w "+
			"(host binaries need a kernel that mounts overlayfs over /, as root)", merged, err)
	}
	old := filepath.Join(merged, ".restartbed-host")
	if err := os.MkdirAll(old, 0o700); err != nil {
		return fmt.Errorf("creating the host's mount point: %w", err)
	}
	if err := syscall.PivotRoot(merged, old); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := syscall.Chdir("/"); err != nil {
		return err
	}
	const host = "/.restartbed-host"
	type m struct {
		source, target, fstype string
		flags                  uintptr
		readOnly               bool
	}
	mounts := []m{
		{source: "proc", target: "/proc", fstype: "proc", flags: syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC},
		{source: host + "/dev", target: "/dev", flags: syscall.MS_BIND | syscall.MS_REC},
		{source: host + "/sys", target: "/sys", flags: syscall.MS_BIND | syscall.MS_REC, readOnly: true},
		{source: "tmpfs", target: "/tmp", fstype: "tmpfs", flags: syscall.MS_NOSUID | syscall.MS_NODEV},
		{source: "tmpfs", target: "/run", fstype: "tmpfs", flags: syscall.MS_NOSUID | syscall.MS_NODEV},
		{source: host + s.Binary, target: s.Binary, flags: syscall.MS_BIND, readOnly: true},
	}
	for _, v := range s.Mounts {
		mounts = append(mounts, m{source: host + v.Source, target: v.Target, flags: syscall.MS_BIND | syscall.MS_REC, readOnly: v.ReadOnly})
	}
	for _, mt := range mounts {
		if err := mountPoint(mt.source, mt.target, mt.fstype == ""); err != nil {
			return err
		}
		if err := syscall.Mount(mt.source, mt.target, mt.fstype, mt.flags, ""); err != nil {
			return fmt.Errorf("mounting %s: %w", mt.target, err)
		}
		if mt.readOnly {
			if err := syscall.Mount("", mt.target, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
				return fmt.Errorf("making %s read-only: %w", mt.target, err)
			}
		}
	}
	if err := syscall.Unmount(host, syscall.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the host's root: %w", err)
	}
	_ = os.Remove(host) // best effort: the sandbox's directory goes with it
	return nil
}

// mountPoint creates target, a directory or (for a bind mount of a file) an empty file.
func mountPoint(source, target string, bind bool) error {
	file := false
	if bind {
		fi, err := os.Stat(source)
		if err != nil {
			return fmt.Errorf("mount source for %s: %w", target, err)
		}
		file = !fi.IsDir()
	}
	if !file {
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("creating mount point %s: %w", target, err)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return fmt.Errorf("creating mount point %s: %w", target, err)
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		return fmt.Errorf("creating mount point %s: %w", target, err)
	}
	return f.Close()
}
