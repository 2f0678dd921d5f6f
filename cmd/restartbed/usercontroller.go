package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/scenarios"
)

// userController is --controller and --crds, which run and explore share: the user's
// controller in place of restartbed's JobSet controller, and the CRDs it needs.
type userController struct {
	command string
	crds    []string
}

func (u *userController) addFlags(fl *pflag.FlagSet, each string) {
	fl.StringVar(&u.command, "controller", "", "a command (run by sh -c) that runs your controller against "+each+" cluster, its kubeconfig in $KUBECONFIG, instead of restartbed's JobSet controller")
	fl.StringArrayVar(&u.crds, "crds", nil, "install these CustomResourceDefinitions (a file, or a directory's .yaml files) in "+each+" cluster, before its controllers start (with --controller: your JobSet CRD)")
}

// readCRDs reads --crds; an error is bad input.
func (u userController) readCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, path := range u.crds {
		more, err := scenarios.ReadCRDs(path)
		if err != nil {
			return nil, fmt.Errorf("--crds: %w", err)
		}
		crds = append(crds, more...)
	}
	return crds, nil
}

// apply makes opts install the CRDs and, with --controller, run the user's controller instead
// of restartbed's JobSet controller (controllerCommand); wait returns once every controller it
// started has exited.
func (u userController) apply(opts *scenarios.RunOptions, crds []*apiextensionsv1.CustomResourceDefinition, stderr io.Writer) (wait func()) {
	configure := opts.Configure
	opts.Configure = func(o *envtest.Options) {
		if configure != nil {
			configure(o)
		}
		o.CRDs = append(o.CRDs, crds...)
		if u.command != "" {
			o.JobSet = false
		}
	}
	if u.command == "" {
		return func() {}
	}
	started, wait := controllerCommand(u.command, stderr)
	opts.Started = started
	return wait
}

// flags are the command-line flags that give another command the same controller and CRDs.
func (u userController) flags() []string {
	var out []string
	if u.command != "" {
		out = append(out, "--controller", u.command)
	}
	for _, c := range u.crds {
		out = append(out, "--crds", c)
	}
	return out
}

// controllerCommand starts the user's controller for each cluster: sh -c command in a process
// group of its own, with the cluster's admin kubeconfig in $KUBECONFIG and its output to
// stderr. It is the cluster's envtest.UserController, so the restart-controller fault and the
// killComponent step kill its group (SIGKILL) and start it again. When the scenario's steps end
// the group gets SIGTERM (SIGKILL for the shell 10 s later); wait returns once every controller
// started has exited, so that none outlives restartbed.
func controllerCommand(command string, stderr io.Writer) (started func(context.Context, *envtest.Cluster) error, wait func()) {
	var running sync.WaitGroup
	started = func(ctx context.Context, c *envtest.Cluster) error {
		kubeconfig, err := c.Kubeconfig()
		if err != nil {
			return err
		}
		path := filepath.Join(c.Dir(), "controller.kubeconfig")
		if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
			return fmt.Errorf("--controller: writing its kubeconfig: %w", err)
		}
		return c.RunController(func() (func() error, error) {
			// Started again after a kill, it still ends with the scenario, not with the step.
			proc := exec.CommandContext(ctx, "sh", "-c", command)
			proc.Env = append(os.Environ(), "KUBECONFIG="+path)
			proc.Stdout, proc.Stderr = stderr, stderr
			proc.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			proc.Cancel = func() error { return syscall.Kill(-proc.Process.Pid, syscall.SIGTERM) }
			proc.WaitDelay = 10 * time.Second
			if err := proc.Start(); err != nil {
				return nil, fmt.Errorf("--controller %q: %w", command, err)
			}
			done := make(chan struct{})
			running.Go(func() {
				_ = proc.Wait() // its exit status is its own business
				close(done)
			})
			kill := func() error {
				if err := syscall.Kill(-proc.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
					return err
				}
				<-done
				return nil
			}
			return kill, nil
		})
	}
	return started, running.Wait
}

// shellWords quotes each argument for sh where it needs it, and joins them.
func shellWords(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./,:@%+") == "" {
			quoted[i] = a
			continue
		}
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}
