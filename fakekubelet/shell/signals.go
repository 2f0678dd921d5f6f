package shell

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Init is a container's PID 1 as the container's other processes reach it: kill 1 from an exec
// or a script signals it through Init. The runtime makes one for each container instance and
// puts it in the instance's Env; the main process says which signals it handles (Handle).
//
// Signals reach it as the kernel delivers them to a PID namespace's init from inside the
// namespace: only those it has a handler for. Any other, SIGKILL included, is discarded, and the
// sender is not told.
type Init struct {
	mu      sync.Mutex
	handler func(syscall.Signal) error
	running bool
}

// Handle makes h the main process's handler for signals sent to it, from its start; nil says the
// process has exited. h returns an error only for a signal restartbed cannot deliver as the
// process would take it; a signal the process ignores is not an error.
func (i *Init) Handle(h func(syscall.Signal) error) {
	if i == nil {
		return
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.handler, i.running = h, h != nil
}

// errNoProcess is kill's error for a process that does not exist.
var errNoProcess = errors.New("No such process") //nolint:staticcheck // the kernel's message (strerror(ESRCH)), printed as is

// Signal sends sig to PID 1; signal 0 only checks that it exists.
func (i *Init) Signal(sig syscall.Signal) error {
	if i == nil {
		return errNoProcess
	}
	i.mu.Lock()
	h, running := i.handler, i.running
	i.mu.Unlock()
	if !running {
		return errNoProcess
	}
	if sig == 0 {
		return nil
	}
	return h(sig)
}

// StopsOn is the signal handler of a process that stops on SIGTERM and SIGINT, as a Go program
// or a server such as nginx does: stop delivers the stop (Init.Handle).
func StopsOn(stop func()) func(syscall.Signal) error {
	return func(sig syscall.Signal) error {
		if sig == syscall.SIGTERM || sig == syscall.SIGINT {
			stop()
		}
		return nil
	}
}

type namedSignal struct {
	name string
	sig  syscall.Signal
}

// signals are the signals kill knows, by name without SIG, in kill -l's order.
var signals = []namedSignal{
	{"HUP", syscall.SIGHUP}, {"INT", syscall.SIGINT}, {"QUIT", syscall.SIGQUIT}, {"KILL", syscall.SIGKILL},
	{"USR1", syscall.SIGUSR1}, {"USR2", syscall.SIGUSR2}, {"TERM", syscall.SIGTERM},
}

// signalName is sig as kill -l names it, with SIG.
func signalName(sig syscall.Signal) string {
	for _, x := range signals {
		if x.sig == sig {
			return "SIG" + x.name
		}
	}
	return strconv.Itoa(int(sig))
}

// parseSignal reads a signal as kill takes it: a name with or without SIG, any case, or a number.
func parseSignal(s string) (syscall.Signal, bool) {
	if n, err := strconv.Atoi(s); err == nil {
		if n == 0 {
			return 0, true
		}
		known := slices.ContainsFunc(signals, func(x namedSignal) bool { return int(x.sig) == n })
		return syscall.Signal(n), known
	}
	name := strings.TrimPrefix(strings.ToUpper(s), "SIG")
	for _, x := range signals {
		if x.name == name {
			return x.sig, true
		}
	}
	return 0, false
}

// kill is busybox's kill: kill [-SIG | -s SIG | -n NUM] PID..., and kill -l. The processes a
// container's scripts can name are its PID 1 (Env.Init); a background job's $! is the
// interpreter's ("g1"), which restartbed's shell cannot signal.
func kill(_ context.Context, c *call) int {
	args := c.args[1:]
	sig := syscall.SIGTERM
	switch {
	case len(args) > 0 && args[0] == "-l":
		var names []string
		for _, x := range signals {
			names = append(names, x.name)
		}
		return say(c, strings.Join(names, " "))
	case len(args) > 1 && (args[0] == "-s" || args[0] == "-n"):
		s, ok := parseSignal(args[1])
		if !ok {
			return c.fail("bad signal name '%s'", args[1])
		}
		sig, args = s, args[2:]
	case len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' && args[0] != "--":
		s, ok := parseSignal(args[0][1:])
		if !ok {
			return c.fail("bad signal name '%s'", args[0][1:])
		}
		sig, args = s, args[1:]
	}
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(c.hc.Stderr, "Usage: kill [-l] [-SIG] PID...")
		return 1
	}
	status := 0
	for _, pid := range args {
		var err error
		switch {
		case pid == "1":
			err = c.p.env.Init.Signal(sig)
		case strings.HasPrefix(pid, "g"):
			err = errors.New("a background job cannot be signalled by restartbed's shell")
		default:
			err = errNoProcess
		}
		if err != nil {
			c.fail("can't kill pid %s: %v", pid, err)
			status = 1
		}
	}
	return status
}
