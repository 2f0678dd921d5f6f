package shell

import (
	"context"
	"net"
	"path"
	"time"
)

// Command is an executable an image holds beyond the shell and its utilities (package
// knownimages: agnhost, pause, nginx). It returns its exit status. ctx ends with SIGKILL, after
// which the command must return soon.
type Command func(ctx context.Context, inv *Invocation) int

// Commands are an image's executables, by name: a command line names one by its name or by any
// path ending in it (/agnhost, agnhost).
type Commands map[string]Command

// lookup returns the command argv0 names, or nil.
func (c Commands) lookup(argv0 string) Command {
	if c == nil {
		return nil
	}
	return c[path.Base(argv0)]
}

// Invocation is one run of a Command.
type Invocation struct {
	// Args are the command line, Args[0] the command as named.
	Args []string
	// Env is the process's: its variables, directory, input and output, filesystem, network,
	// clock and hostname.
	Env Env
	// Term is closed when the process is sent SIGTERM: only a container's main process is, so a
	// command a script runs never sees it (nil).
	Term <-chan struct{}
}

// Exec replaces the command with argv, as exec(3) does, and returns its exit status: another
// command of the image, which gets the process's signals, or a shell or a utility.
func (inv *Invocation) Exec(ctx context.Context, argv []string) int {
	if cmd := inv.Env.Commands.lookup(argv[0]); cmd != nil {
		next := *inv
		next.Args = argv
		return cmd(ctx, &next)
	}
	p := &process{env: inv.Env}
	return p.run(ctx, argv)
}

// runCommand runs a command as the container's main process: SIGTERM reaches it through Term;
// SIGKILL reports 137 at once and leaves the command to return on its own.
func runCommand(term, kill context.Context, cmd Command, argv []string, env Env) int {
	result := make(chan int, 1)
	go func() { result <- cmd(kill, &Invocation{Args: argv, Env: env, Term: term.Done()}) }()
	select {
	case code := <-result:
		return code
	case <-kill.Done():
		return ExitKilled
	}
}

// Sleep waits d on the container's clock; false when ctx ended first.
func (e Env) Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := e.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// Dial opens a TCP connection from the container to address (host:port), resolving the host as
// the container's C library does: the hosts file, then /etc/resolv.conf's nameservers.
func (e Env) Dial(ctx context.Context, address string) (net.Conn, error) {
	return (&call{p: &process{env: e}}).dialer()(ctx, "tcp", address)
}
