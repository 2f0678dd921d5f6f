package envtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/internal/procfs"
)

// JobSetController names restartbed's JobSet controller and webhook (Options.JobSet) among the
// components: it runs in this process, so killing it stops its manager at once, as a
// controller's pod that is killed loses its in-flight work and its webhook.
const JobSetController = "jobset-controller"

// UserController names the controller the caller runs against the cluster (RunController):
// `restartbed explore --controller`'s command, say. KillComponent stops it at once, as a
// controller pod that is killed; StartComponent starts it again.
const UserController = "controller"

// ComponentNames are the components a fault can kill and start again (KillComponent): the
// control plane's binaries' names, JobSetController and UserController.
var ComponentNames = append(slices.Clip(controlplane.Binaries), JobSetController, UserController)

// StartFunc starts the caller's controller and returns how to kill it: kill stops it at once
// (SIGKILL, or a cancelled manager) and returns once it has exited.
type StartFunc func() (kill func() error, err error)

// RunController starts the caller's controller with start, and keeps start to run it again
// after a KillComponent of UserController. The cluster kills it when it stops, before the
// control plane. It fails if a controller runs already.
func (c *Cluster) RunController(start StartFunc) error {
	c.componentsMu.Lock()
	defer c.componentsMu.Unlock()
	if c.userStart != nil {
		return fmt.Errorf("%s: a controller runs already", UserController)
	}
	kill, err := start()
	if err != nil {
		return err
	}
	c.userStart, c.userKill = start, kill
	return nil
}

// KillComponent kills one of the control plane's processes at once (SIGKILL), as a machine that
// loses power kills it: name is etcd, kube-apiserver, kube-controller-manager or
// kube-scheduler. What it keeps on disk stays (etcd's data, the apiserver's certificates), and
// so does what the cluster holds of it (its address and port): StartComponent starts it again
// as it was. Until then it is down: with kube-apiserver or etcd down, every client's request
// fails or waits, and the watches break. It fails for a component the cluster does not run or
// that is down already.
func (c *Cluster) KillComponent(name string) error {
	c.componentsMu.Lock()
	defer c.componentsMu.Unlock()
	switch name {
	case UserController:
		if c.userStart == nil {
			return fmt.Errorf("%s: no controller of yours runs against this cluster (Cluster.RunController; restartbed explore --controller)", name)
		}
		if c.userKill == nil {
			return fmt.Errorf("%s is down already; StartComponent starts it", name)
		}
		err := c.userKill()
		c.userKill = nil
		if err != nil {
			return fmt.Errorf("killing %s: %w", name, err)
		}
		return nil
	case JobSetController:
		if c.jobSetLogger == nil {
			return fmt.Errorf("%s: restartbed's JobSet controller does not run in this cluster (Options.JobSet)", name)
		}
		if c.jobSet == nil {
			return fmt.Errorf("%s is down already; StartComponent starts it", name)
		}
		err := c.jobSet.stop()
		c.jobSet = nil
		if err != nil {
			return fmt.Errorf("stopping %s: %w", name, err)
		}
		return nil
	case controlplane.EtcdBinary, controlplane.KubeAPIServerBinary:
		if c.launcher == nil {
			return fmt.Errorf("%s: this cluster's control plane is not restartbed's (an existing cluster's)", name)
		}
		if c.downComponents[name] {
			return fmt.Errorf("%s is down already; StartComponent starts it", name)
		}
		pid, err := c.controlPlanePID(name)
		if err != nil {
			return err
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return fmt.Errorf("killing %s (pid %d): %w", name, pid, err)
		}
		// Its waiter in controller-runtime reaps it; until then its pid is still there.
		err = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, componentStopGrace, true,
			func(context.Context) (bool, error) { return !procfs.Alive(pid), nil })
		if err != nil {
			return fmt.Errorf("%s (pid %d) was killed but has not exited: %w", name, pid, err)
		}
		c.downComponents[name] = true
		return nil
	}
	comp, err := c.component(name)
	if err != nil {
		return err
	}
	if comp.killed.Load() {
		return fmt.Errorf("%s is down already; StartComponent starts it", name)
	}
	comp.kill()
	return nil
}

// StartComponent starts a component KillComponent killed, with the flags, addresses and data it
// had, and returns once it serves: etcd and kube-apiserver answer their health checks;
// kube-controller-manager and kube-scheduler run (they take their leases again as they start).
// The cluster's clients, the kubelets and the controllers reconnect on their own, as they do on
// a cluster. It fails for a component that runs.
func (c *Cluster) StartComponent(ctx context.Context, name string) error {
	c.componentsMu.Lock()
	defer c.componentsMu.Unlock()
	switch name {
	case UserController:
		if c.userStart == nil {
			return fmt.Errorf("%s: no controller of yours runs against this cluster (Cluster.RunController; restartbed explore --controller)", name)
		}
		if c.userKill != nil {
			return fmt.Errorf("%s runs; KillComponent kills it", name)
		}
		kill, err := c.userStart()
		if err != nil {
			return fmt.Errorf("starting %s again: %w", name, err)
		}
		c.userKill = kill
		return nil
	case JobSetController:
		if c.jobSetLogger == nil {
			return fmt.Errorf("%s: restartbed's JobSet controller does not run in this cluster (Options.JobSet)", name)
		}
		if c.jobSet != nil {
			return fmt.Errorf("%s runs; KillComponent kills it", name)
		}
		// It runs until the cluster stops, not until the caller's ctx ends.
		return c.startJobSet(context.WithoutCancel(ctx), *c.jobSetLogger)
	case controlplane.EtcdBinary, controlplane.KubeAPIServerBinary:
		if !c.downComponents[name] {
			return fmt.Errorf("%s runs; KillComponent kills it", name)
		}
		var err error
		c.launcher.do(func() {
			if name == controlplane.EtcdBinary {
				err = c.env.ControlPlane.Etcd.Start()
			} else {
				err = c.env.ControlPlane.APIServer.Start()
			}
		})
		if err != nil {
			return fmt.Errorf("starting %s again: %w", name, err)
		}
		delete(c.downComponents, name)
		return nil
	}
	old, err := c.component(name)
	if err != nil {
		return err
	}
	if !old.killed.Load() {
		return fmt.Errorf("%s runs; KillComponent kills it", name)
	}
	var comp *component
	c.launcher.do(func() { comp, err = startComponent(old.name, old.cmd.Path, old.cmd.Args[1:], old.out) })
	if err != nil {
		return err
	}
	c.components[slices.Index(c.components, old)] = comp
	// A process that cannot start (its port still held, a flag refused) exits at once.
	select {
	case <-comp.done:
		return comp.exited()
	case <-clock.RealClock{}.After(time.Second): // a process start is wall time, whatever clock the cluster runs on
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// component is kube-controller-manager's or kube-scheduler's process; componentsMu is held.
func (c *Cluster) component(name string) (*component, error) {
	for _, comp := range c.components {
		if comp.name == name {
			return comp, nil
		}
	}
	if !slices.Contains(ComponentNames, name) {
		return nil, fmt.Errorf("no control-plane component is named %q; they are %s", name, strings.Join(ComponentNames, ", "))
	}
	return nil, fmt.Errorf("this cluster runs no %s", name)
}

// controlPlanePID finds the process of etcd or kube-apiserver, which controller-runtime started
// and does not name: this process's child running the release's binary (the guard has replaced
// itself with it) with this cluster's own directory (its data or certificates) on its command
// line.
func (c *Cluster) controlPlanePID(name string) (int, error) {
	binary, dir := c.Assets.Path(name), c.env.ControlPlane.APIServer.CertDir
	if name == controlplane.EtcdBinary {
		dir = c.env.ControlPlane.Etcd.DataDir
	}
	if resolved, err := filepath.EvalSymlinks(binary); err == nil {
		binary = resolved
	}
	for _, pid := range procfs.Children(os.Getpid()) {
		if procfs.Alive(pid) && procfs.Executable(pid) == binary &&
			slices.ContainsFunc(procfs.CommandLine(pid), func(arg string) bool { return strings.Contains(arg, dir) }) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("finding %s's process: no child of this process runs %s with %s", name, binary, dir)
}
