package envtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/restartbed/restartbed/envtest/controlplane"
)

// componentStopGrace is how long a component has to exit after SIGTERM before it is killed.
const componentStopGrace = 10 * time.Second

// component is a control-plane process that envtest starts itself: kube-controller-manager and
// kube-scheduler (controller-runtime's envtest starts etcd and kube-apiserver). It keeps the
// last lines of the process's output, so that a component that exits early can say why.
type component struct {
	name string
	// out is where its output goes, for a start after a kill (StartComponent); cmd has the rest.
	out  io.Writer
	cmd  *exec.Cmd
	tail *tailWriter
	done chan struct{} // closed when the process has exited
	err  error         // its exit, read after done
	// killed: the process was killed on purpose (kill); its exit is no error.
	killed atomic.Bool
}

// startComponent starts path with args. It must run on the launcher's thread: the guard ties the
// process's life to the thread that started it.
func startComponent(name, path string, args []string, out io.Writer) (*component, error) {
	c := &component{name: name, out: out, tail: &tailWriter{max: 40}, done: make(chan struct{})}
	c.cmd = exec.Command(path, args...)
	// The process dies with the thread that started it (the launcher's), as the guard's do, and
	// is in a process group of its own: a terminal's Ctrl-C reaches this process, which stops
	// it in its turn.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	c.cmd.Stdout = io.MultiWriter(out, c.tail)
	c.cmd.Stderr = c.cmd.Stdout
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// exited reports, without waiting, whether the process has exited, and how.
func (c *component) exited() error {
	select {
	case <-c.done:
		why := "exit status 0"
		if c.err != nil {
			why = c.err.Error()
		}
		return fmt.Errorf("%s exited (%s); its last output:\n%s", c.name, why, c.tail)
	default:
		return nil
	}
}

// kill kills the process at once, as a machine that loses power, and waits for its exit.
func (c *component) kill() {
	c.killed.Store(true)
	_ = c.cmd.Process.Kill() // fails only when the process has already exited
	<-c.done
}

// stop sends SIGTERM and waits for the exit, killing the process after componentStopGrace.
// A process that had already exited on its own is an error, with its last output.
func (c *component) stop() error {
	if c.killed.Load() {
		return nil
	}
	if err := c.exited(); err != nil {
		return err
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM) // fails only when the process has already exited, which Wait reports
	select {
	case <-c.done:
	case <-clock.RealClock{}.After(componentStopGrace): // a process's grace is wall time, whatever clock the cluster runs on
		_ = c.cmd.Process.Kill() // fails only when the process has already exited
		<-c.done
	}
	return nil
}

// tailWriter keeps the last max lines written to it.
type tailWriter struct {
	max int

	mu      sync.Mutex
	lines   []string
	partial bytes.Buffer
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial.Write(p)
	for {
		line, err := t.partial.ReadString('\n')
		if errors.Is(err, io.EOF) {
			t.partial.WriteString(line) // keep the unfinished line
			break
		}
		t.lines = append(t.lines, strings.TrimRight(line, "\n"))
		if len(t.lines) > t.max {
			t.lines = t.lines[len(t.lines)-t.max:]
		}
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(append(t.lines[:len(t.lines):len(t.lines)], t.partial.String()), "\n")
}

// startComponents starts kube-controller-manager (unless disabled) and, when there are nodes
// (in-process or external), kube-scheduler. waitComponents then waits until they work.
func (c *Cluster) startComponents(opts Options, paths map[string]string, out io.Writer) error {
	kubeconfig, err := c.Kubeconfig()
	if err != nil {
		return err
	}
	files := map[string][]byte{
		componentKubeconfig: kubeconfig,
		componentCA:         c.env.ControlPlane.APIServer.CA,
	}
	nodes := opts.ExternalNodes
	for _, p := range opts.Nodes {
		nodes += p.Count
	}
	scheduler := len(opts.Nodes) > 0 || opts.ExternalNodes > 0
	if scheduler {
		files[schedulerConfigFile] = []byte(schedulerConfig(c.work.file(componentKubeconfig), nodes))
	}
	for name, data := range files {
		if err := os.WriteFile(c.work.file(name), data, 0o600); err != nil {
			return fmt.Errorf("writing the components' files: %w", err)
		}
	}

	type start struct {
		binary string
		args   []string
	}
	var starts []start
	if !opts.DisableControllerManager {
		starts = append(starts, start{controlplane.KubeControllerManagerBinary, c.controllerManagerArgs(
			c.work.file(componentKubeconfig), c.work.file(componentCA), nodes, opts.ControllerManagerFlags)})
	}
	if scheduler {
		starts = append(starts, start{controlplane.KubeSchedulerBinary, c.schedulerArgs(c.work.file(schedulerConfigFile), opts.SchedulerFlags)})
	}
	for _, s := range starts {
		var comp *component
		c.launcher.do(func() { comp, err = startComponent(s.binary, paths[s.binary], s.args, out) })
		if err != nil {
			return err
		}
		c.components = append(c.components, comp)
	}
	c.controllerManager = !opts.DisableControllerManager
	return nil
}

// waitComponents waits until the controller-manager works: its service-account controller has
// given the default namespace its "default" service account, which every pod needs. Start calls
// it last, so that the controller-manager starts while the in-process parts do.
func (c *Cluster) waitComponents(ctx context.Context) error {
	if !c.controllerManager {
		return nil
	}
	err := wait.PollUntilContextTimeout(ctx, componentPollInterval, componentStartTimeout, true, func(ctx context.Context) (bool, error) {
		for _, comp := range c.components {
			if err := comp.exited(); err != nil {
				return false, err
			}
		}
		return c.hasDefaultServiceAccount(ctx, metav1.NamespaceDefault)
	})
	if err != nil {
		return fmt.Errorf("waiting for kube-controller-manager %s to create the default service account: %w", c.Release.Kubernetes, err)
	}
	return nil
}

// Files in the cluster's directory that the components read.
const (
	componentKubeconfig = "admin.kubeconfig"
	componentCA         = "ca.crt"
	schedulerConfigFile = "kube-scheduler.yaml"
)

// defaultServiceAccount is the service account the controller-manager creates in every namespace.
const defaultServiceAccount = "default"

const (
	componentPollInterval = 25 * time.Millisecond
	componentStartTimeout = 2 * time.Minute
	// serviceAccountTimeout bounds the wait for a new namespace's default service account; the
	// controller-manager creates it within milliseconds of the namespace.
	serviceAccountTimeout = time.Minute
	// nodesTimeout bounds the wait for every node's not-ready taint to go: a node-monitor period
	// (5 s realistic), or at thousands of nodes the controller-manager's client rate.
	nodesTimeout = 10 * time.Minute
)
