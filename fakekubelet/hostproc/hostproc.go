// Package hostproc runs host executables as the processes of emulated containers, for the
// program rules that name a binary (and only when the run allowed host binaries). Each pod that
// runs one gets a sandbox: a small helper process (sandbox_main.go, built from source on first
// use) in new mount, network, PID, UTS and IPC namespaces, holding the pod's IP on its loopback
// interface, so that many pods' processes can listen on the same port. Each container gets a root
// of its own, an overlay of the host's root filesystem with the pod's files bind-mounted at their
// mount paths, and its output goes to the container's log.
//
// restartbed reaches into a sandbox through the helper: it dials the pod's ports through it
// (probes, port-forward, other pods), and accepts, on listeners the helper opened inside, the
// connections the process makes to the apiserver's Service address (forwarded to the
// apiserver), DNS queries to the cluster DNS address, and every other TCP connection, which a nat
// rule in the sandbox redirects to it (outbound.go) and it dials on the pod network.
//
// The package owns the namespaces and processes and nothing else: what a container runs, its
// environment and its files are the runtime's to say (package runtime). It does not enforce
// resource limits. Nothing outlives it: the helper dies with the thread that started it
// (PR_SET_PDEATHSIG) and takes its PID namespace with it, so a killed restartbed leaves no
// process, mount or namespace behind.
package hostproc

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	"k8s.io/utils/clock"
)

// HelperSource is the sandbox helper's source, one file of a main package that needs only the
// standard library, for whoever builds it (envtest builds it into the user cache, as it builds
// the control plane): sandbox_main.go with the protocol's types (protocol.go) appended.
var HelperSource = helperSource()

var (
	//go:embed sandbox_main.go
	helperMain []byte
	//go:embed protocol.go
	protocolSource []byte
)

func helperSource() []byte {
	_, body, _ := bytes.Cut(protocolSource, []byte("package hostproc\n"))
	return slices.Concat(helperMain, []byte("\n// protocol.go\n"), body)
}

// HelperName is the helper's name, in the cache and in process lists.
const HelperName = "sandbox"

// Options configure a Host.
type Options struct {
	// Helper is the helper executable built from HelperSource. Required.
	Helper string
	// Dir is an empty directory of the caller's that each sandbox mounts its tmpfs on, inside its
	// own mount namespace: nothing is ever written to it on the host. Required.
	Dir string
	// APIServer is the apiserver's address ("host:port"), where connections to a sandbox's
	// SandboxSpec.APIServer address are forwarded.
	APIServer string
	// Clock paces what waits on the host's processes (their output at exit, a relayed
	// connection's partition check, the helper's start). It is the host's time, not the
	// emulation's: a process does not wait for a stepped clock. Default: the real clock.
	Clock clock.WithTicker
}

// Host holds the sandboxes of every pod that runs a host binary.
type Host struct {
	opts  Options
	spawn *thread

	mu        sync.Mutex
	closed    bool
	sandboxes map[string]*Sandbox
}

// Check says what this host lacks to run host binaries; nil when it has it all. restartbed
// needs root: it creates namespaces, mounts an overlay of / for each container and adds
// addresses to the sandbox's loopback interface. An unprivileged user namespace would allow the
// namespaces but not the overlay of the host's root.
func Check() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("host binaries need Linux namespaces; this is %s", runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("host binaries need root: restartbed runs each pod's binaries in new mount, network and PID " +
			"namespaces with an overlay of / as their root, which an unprivileged user cannot mount (run restartbed " +
			"as root, for example in a VM or a privileged container)")
	}
	for _, ns := range []string{"mnt", "net", "pid", "uts", "ipc"} {
		if _, err := os.Stat("/proc/self/ns/" + ns); err != nil {
			return fmt.Errorf("host binaries need the kernel's %s namespaces: %w", ns, err)
		}
	}
	return nil
}

// New returns a Host with no sandbox.
func New(opts Options) (*Host, error) {
	if opts.Helper == "" || opts.Dir == "" {
		return nil, errors.New("hostproc: Options.Helper and Options.Dir are required")
	}
	if err := Check(); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if fi, err := os.Stat(opts.Helper); err != nil || fi.IsDir() {
		return nil, fmt.Errorf("hostproc: the sandbox helper %s is not a file", opts.Helper)
	}
	return &Host{opts: opts, spawn: newThread(), sandboxes: map[string]*Sandbox{}}, nil
}

// Sandbox returns the sandbox of key (a pod's UID), starting it with spec when there is none.
func (h *Host) Sandbox(key string, spec SandboxSpec) (*Sandbox, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errors.New("hostproc: the host is closed")
	}
	if s := h.sandboxes[key]; s != nil && !s.ended() {
		return s, nil
	}
	s, err := h.start(spec)
	if err != nil {
		return nil, err
	}
	h.sandboxes[key] = s
	return s, nil
}

// Lookup returns the sandbox of key, or nil.
func (h *Host) Lookup(key string) *Sandbox {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sandboxes[key]
}

// Remove ends the sandbox of key and every process in it.
func (h *Host) Remove(key string) {
	h.mu.Lock()
	s := h.sandboxes[key]
	delete(h.sandboxes, key)
	h.mu.Unlock()
	if s != nil {
		s.Close()
	}
}

// Close ends every sandbox.
func (h *Host) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	all := h.sandboxes
	h.sandboxes = nil
	h.mu.Unlock()
	for _, s := range all {
		s.Close()
	}
	h.spawn.stop()
}

// thread is a goroutine locked to its OS thread for the Host's life. Helpers are started from
// it because the kernel sends a child's parent-death signal when the thread that forked it
// ends, and the Go runtime may end any other thread.
type thread struct {
	requests chan func()
	done     chan struct{}
}

func newThread() *thread {
	t := &thread{requests: make(chan func()), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		defer close(t.done)
		for f := range t.requests {
			f()
		}
		// Left locked: the thread ends with the goroutine, and any helper still alive with it.
	}()
	return t
}

func (t *thread) do(f func()) {
	ran := make(chan struct{})
	t.requests <- func() { defer close(ran); f() }
	<-ran
}

func (t *thread) stop() {
	close(t.requests)
	<-t.done
}

// CheckBinary says what keeps path from running as a container's process: not an absolute path,
// no such file, a directory, no execute permission. nil when it can run.
func CheckBinary(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%q is not an absolute path", path)
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return err
	case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}
