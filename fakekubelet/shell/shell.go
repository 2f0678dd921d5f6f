// Package shell runs a container's command the way its image would, without the host: sh and
// bash scripts go through the mvdan.cc/sh interpreter, and the commands they call are its
// builtins or a small set of emulated utilities (sleep, touch, cat, ls, ...). Files live in the
// container's vfs tree; sleep waits on the component clock. Anything else is "not found" (127),
// as in a minimal image.
//
// It owns one behaviour of a container's main process beyond the interpreter: PID 1 semantics.
// A script ignores SIGTERM unless it traps it; the runtime's SIGKILL always ends it with 137,
// and a signal from inside the container (kill 1, Init) reaches it only if it handles it.
package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"

	"k8s.io/utils/clock"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"

	"github.com/restartbed/restartbed/fakekubelet/vfs"
)

// Exit codes with a fixed meaning.
const (
	// ExitKilled is a process ended by SIGKILL (128+9).
	ExitKilled = 137
	// ExitTerminated is a process ended by SIGTERM (128+15).
	ExitTerminated = 143
	// ExitNotFound is a command that does not exist.
	ExitNotFound = 127
	// ExitUsage is a shell that could not parse its script.
	ExitUsage = 2
)

// Env is where a command runs: the container's filesystem, environment and output.
type Env struct {
	// FS is the container's filesystem. Required.
	FS *vfs.FS
	// Vars are the environment, as KEY=VALUE.
	Vars []string
	// Dir is the working directory; default "/".
	Dir string
	// Stdout and Stderr receive the output; default discarded.
	Stdout, Stderr io.Writer
	// Clock paces sleep. Required.
	Clock clock.Clock
	// Hostname is what hostname prints (the pod's name).
	Hostname string
	// Net is the network the pod's sandbox is on; nil: none, so no name resolves and no address
	// is reachable.
	Net Net
	// Stdin is what the process reads; nil: an empty input. A shell with no script reads its
	// commands from it (kubectl exec -i ... sh).
	Stdin io.Reader
	// TTY: Stdin and Stdout are a terminal, so an interactive shell prompts and echoes its input.
	TTY bool
	// MainStdout and MainStderr are the container's log streams: what its main process's stdout
	// and stderr reach, and so what /proc/1/fd/1 and /proc/1/fd/2 write to from any process.
	// Default: Stdout and Stderr.
	MainStdout, MainStderr io.Writer
	// Commands are the executables the container's image holds beyond the shell and its
	// utilities; nil: none.
	Commands Commands
	// Init is the container's PID 1, which kill 1 signals; nil: kill 1 finds no process.
	// RunMain makes the process it runs handle it.
	Init *Init
}

// Net is what a container reaches through its sandbox's interface: TCP dials and listeners, ICMP
// echo, and DNS questions to a nameserver (package network's Interface).
type Net interface {
	Dial(ctx context.Context, address string) (net.Conn, error)
	Listen(port uint16) (net.Listener, error)
	Ping(ctx context.Context, addr netip.Addr) error
	Query(ctx context.Context, server netip.Addr, name string) ([]netip.Addr, error)
}

// ErrNotFound reports a command that no image of restartbed's has: the runtime reports it as a
// start error, as containerd does when the entrypoint is missing.
var ErrNotFound = errors.New("executable file not found in $PATH")

// shells are the interpreters a container's command may name.
var shells = []string{"sh", "bash", "ash", "dash"}

// Check reports whether argv can start: its program is a shell, an emulated utility or one of
// the image's commands.
func Check(argv []string, commands Commands) error {
	if len(argv) == 0 {
		return errors.New("no command")
	}
	name := path.Base(argv[0])
	if slices.Contains(shells, name) || utilities[name] != nil || interp.IsBuiltin(name) || commands.lookup(name) != nil {
		return nil
	}
	return fmt.Errorf("exec: %q: %w", argv[0], ErrNotFound)
}

// RunMain runs argv as a container's main process and returns its exit code. term is cancelled
// by SIGTERM, kill by SIGKILL (after the grace period); kill must end when term does not
// end the process. A script that does not trap TERM runs on through SIGTERM, as PID 1 does.
// While it runs, it is env.Init: kill 1 from the container's other processes reaches it.
func RunMain(term, kill context.Context, argv []string, env Env) int {
	// SIGTERM from the container itself (kill 1) joins the runtime's.
	term, sigterm := context.WithCancel(term)
	defer sigterm()
	if len(argv) > 0 {
		if cmd := env.Commands.lookup(argv[0]); cmd != nil {
			// The image's executables are programs with handlers for SIGTERM and SIGINT.
			env.Init.Handle(StopsOn(sigterm))
			defer env.Init.Handle(nil)
			return runCommand(term, kill, cmd, argv, env)
		}
	}
	p := &process{env: env}
	runCtx, cancelRun := context.WithCancel(kill)
	defer cancelRun()
	stop := context.AfterFunc(term, func() {
		if p.trapsTerm() {
			cancelRun()
		}
	})
	defer stop()
	env.Init.Handle(func(sig syscall.Signal) error {
		switch {
		case sig == syscall.SIGTERM && p.trapsTerm():
			sigterm()
		case sig != syscall.SIGTERM && p.traps(sig):
			return fmt.Errorf("the script traps %s, which restartbed's shell does not deliver", signalName(sig))
		}
		return nil
	})
	defer env.Init.Handle(nil)
	code := p.run(runCtx, argv)
	switch {
	case kill.Err() != nil:
		return ExitKilled
	case term.Err() != nil && p.trapsTerm():
		return p.runTrap(kill)
	}
	return code
}

// Exec runs argv in the container as kubectl exec or an exec probe would, until it ends or ctx
// is done (137).
func Exec(ctx context.Context, argv []string, env Env) int {
	p := &process{env: env}
	code := p.run(ctx, argv)
	if ctx.Err() != nil {
		return ExitKilled
	}
	return code
}

// process is one running command and the shell state it accumulates.
type process struct {
	env Env

	mu sync.Mutex
	// termTrap is the TERM trap's command; trapped says a trap was set.
	termTrap string
	trapped  bool
	// otherTraps are the other signals the script has a handler for (a trap with a command).
	otherTraps map[syscall.Signal]bool
	runner     *interp.Runner
}

func (p *process) trapsTerm() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.trapped && p.termTrap != ""
}

// traps reports whether the script has a handler for sig other than TERM.
func (p *process) traps(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.otherTraps[sig]
}

// runTrap runs the TERM trap after SIGTERM interrupted the script; the process exits with the
// trap's exit status, or 143 if the trap does not exit.
func (p *process) runTrap(kill context.Context) int {
	p.mu.Lock()
	runner, script := p.runner, p.termTrap
	p.mu.Unlock()
	if runner == nil {
		return ExitTerminated
	}
	file, err := parse(script, "trap")
	if err != nil {
		return ExitTerminated
	}
	sub := runner.Subshell()
	err = sub.Run(kill, file)
	if kill.Err() != nil {
		return ExitKilled
	}
	if sub.Exited() {
		return exitCode(err)
	}
	return ExitTerminated
}

// run executes argv: a shell with its flags, or a utility.
func (p *process) run(ctx context.Context, argv []string) int {
	if err := Check(argv, p.env.Commands); err != nil {
		fmt.Fprintf(p.stderr(), "%s\n", err)
		return ExitNotFound
	}
	name := path.Base(argv[0])
	if !slices.Contains(shells, name) {
		// A utility or builtin as the entrypoint: run it as a one-word script would.
		return p.script(ctx, quoteArgs(argv), "", nil)
	}
	var script, scriptName string
	var params []string
	args := argv[1:]
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" {
		flag := args[0]
		args = args[1:]
		for _, f := range flag[1:] {
			switch f {
			case 'c':
				if len(args) == 0 {
					fmt.Fprintf(p.stderr(), "%s: -c requires an argument\n", name)
					return ExitUsage
				}
				script, args = args[0], args[1:]
				scriptName = name
			default:
				params = append(params, "-"+string(f)) // -e, -x, -u ...: shell options
			}
		}
		if script != "" {
			break
		}
	}
	if script == "" && scriptName == "" {
		if len(args) == 0 {
			return p.interactive(ctx, params)
		}
		data, err := p.env.FS.ReadFile(p.abs(args[0]))
		if err != nil {
			fmt.Fprintf(p.stderr(), "%s: can't open '%s': No such file or directory\n", name, args[0])
			return ExitNotFound
		}
		script, scriptName, args = string(data), args[0], args[1:]
	} else if len(args) > 0 {
		scriptName, args = args[0], args[1:] // sh -c 'script' $0 $1 ...
	}
	return p.script(ctx, script, scriptName, append(params, append([]string{"--"}, args...)...))
}

func quoteArgs(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}

func parse(script, name string) (*syntax.File, error) {
	// Bash syntax for sh too: busybox's ash accepts the bashisms scripts use ([[ ]], ${x//a/b}).
	return syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(script), name)
}

func (p *process) script(ctx context.Context, script, name string, params []string) int {
	file, err := parse(script, name)
	if err != nil {
		fmt.Fprintf(p.stderr(), "%s: syntax error: %v\n", orDefault(name, "sh"), err)
		return ExitUsage
	}
	if reason := unsupported(file); reason != "" {
		fmt.Fprintf(p.stderr(), "%s: %s is not supported by restartbed's shell\n", orDefault(name, "sh"), reason)
		return ExitUsage
	}
	runner, err := p.newRunner(p.env.Stdin, params)
	if err != nil {
		fmt.Fprintf(p.stderr(), "sh: %v\n", err)
		return ExitUsage
	}
	return exitCode(runner.Run(ctx, file))
}

// newRunner is an interpreter for the process reading stdin, with positional parameters params.
func (p *process) newRunner(stdin io.Reader, params []string) (*interp.Runner, error) {
	opts := []interp.RunnerOption{
		interp.Env(expand.ListEnviron(p.vars()...)),
		func(r *interp.Runner) error { r.Dir = p.dir(); return nil },
		interp.StdIO(stdin, p.stdout(), p.stderr()),
		interp.CallHandler(p.call),
		interp.ExecHandlers(func(interp.ExecHandlerFunc) interp.ExecHandlerFunc { return p.exec }),
		interp.OpenHandler(p.open),
		interp.StatHandler(p.stat),
		interp.ReadDirHandler2(p.readDir),
		interp.AccessHandler(p.access),
	}
	if len(params) > 0 {
		opts = append(opts, interp.Params(params...))
	}
	runner, err := interp.New(opts...)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.runner = runner
	p.mu.Unlock()
	return runner, nil
}

// unsupported names a construct that would reach the host (process substitution makes a FIFO
// in the host's temporary directory), or "".
func unsupported(file *syntax.File) string {
	found := ""
	syntax.Walk(file, func(n syntax.Node) bool {
		if _, ok := n.(*syntax.ProcSubst); ok {
			found = "process substitution"
		}
		return found == ""
	})
	return found
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if status := interp.ExitStatus(0); errors.As(err, &status) {
		return int(status)
	}
	return 1
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (p *process) vars() []string {
	vars := slices.Clone(p.env.Vars)
	for _, def := range []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"} {
		key := def[:strings.IndexByte(def, '=')+1]
		if !slices.ContainsFunc(vars, func(v string) bool { return strings.HasPrefix(v, key) }) {
			vars = append(vars, def)
		}
	}
	if p.env.Hostname != "" {
		vars = append(vars, "HOSTNAME="+p.env.Hostname)
	}
	return vars
}

func (p *process) dir() string {
	if p.env.Dir == "" {
		return "/"
	}
	return p.env.Dir
}

func (p *process) stdout() io.Writer { return orDiscard(p.env.Stdout) }

// mainOutput is the main process's stdout (fd 1) or stderr (fd 2).
func (p *process) mainOutput(fd int) io.Writer {
	switch {
	case fd == 1 && p.env.MainStdout != nil:
		return p.env.MainStdout
	case fd == 2 && p.env.MainStderr != nil:
		return p.env.MainStderr
	case fd == 1:
		return p.stdout()
	}
	return p.stderr()
}
func (p *process) stderr() io.Writer { return orDiscard(p.env.Stderr) }

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

func (p *process) abs(name string) string {
	if path.IsAbs(name) {
		return path.Clean(name)
	}
	return path.Join(p.dir(), name)
}

// call intercepts the builtins that would consult the host: command -v, type and hash look up
// the host's PATH, trap rejects TERM, which restartbed delivers itself, and kill signals host
// processes (the interpreter has none to offer: it is the utility of the same name).
func (p *process) call(ctx context.Context, args []string) ([]string, error) {
	switch args[0] {
	case "kill":
		return append([]string{"/bin/kill"}, args[1:]...), nil
	case "command":
		if len(args) > 1 && (args[1] == "-v" || args[1] == "-V") {
			return append([]string{lookupCommand}, args[2:]...), nil
		}
	case "type", "hash", "which":
		return append([]string{lookupCommand}, args[1:]...), nil
	case "trap":
		return p.trap(args), nil
	}
	return args, nil
}

// trap records a TERM trap and passes the other signals on to the interpreter.
func (p *process) trap(args []string) []string {
	if len(args) < 3 {
		return args
	}
	handler, signals := args[1], args[2:]
	var rest []string
	for _, sig := range signals {
		switch strings.TrimPrefix(strings.ToUpper(sig), "SIG") {
		case "TERM", "15":
			p.mu.Lock()
			p.trapped = true
			p.termTrap = handler
			if handler == "-" {
				p.trapped = false
			}
			p.mu.Unlock()
		case "INT", "2", "HUP", "1", "QUIT", "3", "USR1", "USR2", "10", "12":
			// Signals only kill sends, and restartbed's shell does not deliver to a script: the
			// trap is accepted and kill reports it (process.traps).
			if s, ok := parseSignal(strings.TrimPrefix(strings.ToUpper(sig), "SIG")); ok {
				p.mu.Lock()
				if p.otherTraps == nil {
					p.otherTraps = map[syscall.Signal]bool{}
				}
				p.otherTraps[s] = handler != "" && handler != "-"
				p.mu.Unlock()
			}
		default:
			rest = append(rest, sig)
		}
	}
	if len(rest) == 0 {
		return []string{":"}
	}
	return append([]string{"trap", handler}, rest...)
}

// lookupCommand is the internal name of restartbed's command -v / type / which.
const lookupCommand = "restartbed-lookup-command"

// exec runs a command that is not a builtin or function.
func (p *process) exec(ctx context.Context, args []string) error {
	hc := interp.HandlerCtx(ctx)
	if args[0] == lookupCommand {
		status := 0
		for _, name := range args[1:] {
			switch {
			case interp.IsBuiltin(name):
				fmt.Fprintln(hc.Stdout, name)
			case utilities[path.Base(name)] != nil || slices.Contains(shells, path.Base(name)):
				fmt.Fprintln(hc.Stdout, "/bin/"+path.Base(name))
			case p.env.Commands.lookup(name) != nil:
				fmt.Fprintln(hc.Stdout, "/"+path.Base(name)) // an image's own executable, at its root
			default:
				status = 1
			}
		}
		return statusErr(status)
	}
	name := path.Base(args[0])
	if slices.Contains(shells, name) {
		sub := &process{env: childEnv(p.env, hc)}
		return statusErr(sub.run(ctx, args))
	}
	if cmd := p.env.Commands.lookup(name); cmd != nil {
		// The image's executable, started by a script: its signals are the script's.
		return statusErr(cmd(ctx, &Invocation{Args: args, Env: childEnv(p.env, hc)}))
	}
	util := utilities[name]
	if util == nil && slices.Contains(appletBuiltins, name) {
		// /bin/echo, /bin/false ...: busybox's applets of the same name as the shell's builtins.
		sub := &process{env: childEnv(p.env, hc)}
		return statusErr(sub.script(ctx, quoteArgs(append([]string{name}, args[1:]...)), name, nil))
	}
	if util == nil {
		fmt.Fprintf(hc.Stderr, "sh: %s: not found\n", args[0])
		return statusErr(ExitNotFound)
	}
	return statusErr(util(ctx, &call{p: p, hc: hc, args: args}))
}

// childEnv is the environment of a process the script starts: the container's, with the
// script's exported variables, directory and standard streams at the call.
func childEnv(env Env, hc interp.HandlerContext) Env {
	env.Vars = envList(hc.Env)
	env.Dir = hc.Dir
	env.Stdin, env.Stdout, env.Stderr = hc.Stdin, hc.Stdout, hc.Stderr
	return env
}

// appletBuiltins are the shell builtins that busybox also has as commands, which scripts call by
// path (/bin/echo -n, /bin/false).
var appletBuiltins = []string{"echo", "false", "true", "printf", "test", "[", "pwd"}

// statusErr is how an exec handler reports an exit status: nil for 0.
func statusErr(code int) error {
	if code == 0 {
		return nil
	}
	return interp.ExitStatus(uint8(code))
}

func envList(env expand.Environ) []string {
	var vars []string
	for name, v := range env.Each {
		if v.Exported && v.IsSet() {
			vars = append(vars, name+"="+v.String())
		}
	}
	return vars
}

func (p *process) open(ctx context.Context, name string, flag int, perm os.FileMode) (io.ReadWriteCloser, error) {
	hc := interp.HandlerCtx(ctx)
	switch name {
	case "/dev/null":
		return nullFile{}, nil
	case "/dev/stdout":
		return writeOnly{hc.Stdout}, nil
	case "/dev/stderr":
		return writeOnly{hc.Stderr}, nil
	case "/proc/1/fd/1":
		return writeOnly{p.mainOutput(1)}, nil
	case "/proc/1/fd/2":
		return writeOnly{p.mainOutput(2)}, nil
	}
	return p.env.FS.Open(pathIn(hc.Dir, name), flag, perm)
}

func (p *process) stat(ctx context.Context, name string, _ bool) (fs.FileInfo, error) {
	return p.env.FS.Stat(pathIn(interp.HandlerCtx(ctx).Dir, name))
}

func (p *process) readDir(ctx context.Context, name string) ([]fs.DirEntry, error) {
	return p.env.FS.ReadDir(pathIn(interp.HandlerCtx(ctx).Dir, name))
}

// access answers as for root: everything that exists may be read and written, and executed if
// any execute bit is set.
func (p *process) access(ctx context.Context, name string, mode interp.AccessMode) error {
	info, err := p.env.FS.Stat(pathIn(interp.HandlerCtx(ctx).Dir, name))
	if err != nil {
		return err
	}
	if mode&interp.AccessExec != 0 && !info.IsDir() && info.Mode().Perm()&0o111 == 0 {
		return &fs.PathError{Op: "access", Path: name, Err: fs.ErrPermission}
	}
	return nil
}

func pathIn(dir, name string) string {
	if path.IsAbs(name) {
		return path.Clean(name)
	}
	return path.Join(dir, name)
}

type nullFile struct{}

func (nullFile) Read([]byte) (int, error)    { return 0, io.EOF }
func (nullFile) Write(b []byte) (int, error) { return len(b), nil }
func (nullFile) Close() error                { return nil }

type writeOnly struct{ w io.Writer }

func (w writeOnly) Read([]byte) (int, error)    { return 0, syscall.EBADF }
func (w writeOnly) Write(b []byte) (int, error) { return w.w.Write(b) }
func (w writeOnly) Close() error                { return nil }
