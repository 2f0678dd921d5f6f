package hostproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// ProcessSpec is one container's process.
type ProcessSpec struct {
	// ID names the container instance; it is unique in the sandbox.
	ID string
	// Binary is the host executable (an absolute path); it appears at the same path inside.
	Binary string
	// Argv is the process's argument list, its name first.
	Argv []string
	// Env is the resolved environment, KEY=VALUE.
	Env []string
	// Dir is the working directory ("" is /).
	Dir string
	// Mounts are the pod's files at the container's paths.
	Mounts []Mount
	// Stdout and Stderr receive the process's output.
	Stdout, Stderr io.Writer
}

// logDrain bounds how long an exit waits for the rest of the process's output.
const logDrain = 2 * time.Second

// Process is a running container process.
type Process struct {
	sb   *Sandbox
	id   string
	logs sync.WaitGroup
	once sync.Once
	code int
	done chan struct{}
}

// Start starts the container's process. The error says what kept it from starting (the binary
// is missing, a mount failed); the process then never ran.
func (s *Sandbox) Start(ctx context.Context, spec ProcessSpec) (*Process, error) {
	if !path.IsAbs(spec.Binary) {
		return nil, fmt.Errorf("binary %q: not an absolute path", spec.Binary)
	}
	for _, m := range spec.Mounts {
		if !path.IsAbs(m.Target) {
			return nil, fmt.Errorf("mount path %q: not an absolute path", m.Target)
		}
	}
	init := &initSpec{Root: filepath.Join(s.host.opts.Dir, "roots", spec.ID), Binary: spec.Binary, Argv: spec.Argv,
		Env: spec.Env, Dir: spec.Dir}
	for _, m := range spec.Mounts {
		m.Source = filepath.Join(s.host.opts.Dir, "files", m.Source)
		init.Mounts = append(init.Mounts, m)
	}
	return s.launch(ctx, message{Op: opStart, ID: spec.ID, Init: init}, nil, spec.Stdout, spec.Stderr)
}

// launch asks the helper to start the process m describes, handing it the files of stdin (an
// exec's stdin, if any) and pipes for its stdout and stderr, whose output goes to stdout and
// stderr. The Process is registered before the request, so that its exit is never missed.
func (s *Sandbox) launch(ctx context.Context, m message, stdin []*os.File, stdout, stderr io.Writer) (*Process, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeFiles([]*os.File{outR, outW})
		return nil, err
	}
	p := &Process{sb: s, id: m.ID, done: make(chan struct{})}
	p.logs.Add(2) // before the exit can be reported
	s.mu.Lock()
	s.procs[m.ID] = p
	s.mu.Unlock()
	r, err := s.request(ctx, m, append(stdin, outW, errW)...)
	closeFiles([]*os.File{outW, errW})
	if err == nil && r.msg.Op != opStarted {
		err = errors.New(r.msg.Error)
	}
	closeFiles(r.files)
	if err != nil {
		s.mu.Lock()
		delete(s.procs, m.ID)
		s.mu.Unlock()
		closeFiles([]*os.File{outR, errR})
		return nil, err
	}
	go p.copy(stdout, outR)
	go p.copy(stderr, errR)
	return p, nil
}

func (p *Process) copy(w io.Writer, r *os.File) {
	defer p.logs.Done()
	defer r.Close()
	if w == nil {
		w = io.Discard
	}
	_, _ = io.Copy(w, r) // ends when either side closes
}

// exit records the exit code once the output has been read (or logDrain has passed: a process
// the container started may hold the pipes).
func (p *Process) exit(code int) {
	p.once.Do(func() {
		drained := make(chan struct{})
		go func() { p.logs.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-p.sb.host.opts.Clock.After(logDrain):
		}
		p.code = code
		close(p.done)
	})
}

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error {
	return p.sb.send(message{Op: opSignal, ID: p.id, Signal: int(sig)})
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitCode is the process's exit code once Done is closed: 128+N for a process killed by
// signal N.
func (p *Process) ExitCode() int {
	<-p.done
	return p.code
}

// ExecSpec is a command to run in a running container, as kubectl exec, an exec probe or an exec
// hook runs one.
type ExecSpec struct {
	// Container is the ID of the container's process (ProcessSpec.ID).
	Container string
	// Argv is the command; a name without a slash is looked up in the container's PATH.
	Argv []string
	// Env is the container's environment; Dir its working directory.
	Env []string
	Dir string
	// Stdin, if set, is copied to the command's standard input until it ends; Stdout and Stderr
	// receive its output.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Exec runs a command in a running container, in the container's root and the sandbox's
// namespaces, and returns its exit code when it ends; when ctx ends first it is killed.
func (s *Sandbox) Exec(ctx context.Context, spec ExecSpec) (int, error) {
	if len(spec.Argv) == 0 {
		return 0, errors.New("exec: no command")
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	m := message{Op: opExec, ID: s.nextID("exec-"), Exec: &execSpec{Container: spec.Container, Argv: spec.Argv, Env: spec.Env, Dir: spec.Dir}}
	p, err := s.launch(ctx, m, []*os.File{inR}, spec.Stdout, spec.Stderr)
	_ = inR.Close()
	if err != nil {
		_ = inW.Close()
		return 0, err
	}
	go func() {
		defer inW.Close()
		if spec.Stdin != nil {
			_, _ = io.Copy(inW, spec.Stdin) // ends when either side closes
		}
	}()
	select {
	case <-p.Done():
	case <-ctx.Done():
		_ = p.Signal(syscall.SIGKILL) // fails only when the process has already exited
		<-p.Done()
	}
	return p.ExitCode(), nil
}
