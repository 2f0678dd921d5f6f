// Command agent is JobSet's in-place-restart agent as a container binary: the same code as the
// fake kubelet's builtin program "agent" (package agent). It reads its configuration from the
// environment (POD_NAME, JOBSET_NAME, IN_PLACE_RESTART_EXIT_CODE, WORKER_COMMAND,
// STARTUP_PROBE_PATH, STARTUP_PROBE_PORT; the namespace from the service-account files or
// NAMESPACE), reaches the apiserver with the pod's in-cluster identity, and exits with the restart
// code when its group restarts in place, 128+signal on SIGTERM or SIGINT, 1 on a bad
// configuration. Outside a pod it uses $KUBECONFIG, for trying it against a test cluster.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/restartbed/restartbed/agent"
)

func main() { os.Exit(run()) }

func run() int {
	cfg, err := agent.ConfigFromEnv(agent.OSEnv())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	restConfig, err := config.GetConfig() // in a pod: its service account; elsewhere: $KUBECONFIG
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent: no apiserver to talk to (not in a pod with a service account, no $KUBECONFIG): %v\n", err)
		return 1
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	ctx, cancel := context.WithCancel(context.Background())
	received := make(chan os.Signal, 1)
	go func() {
		sig := <-signals
		received <- sig
		cancel()
	}()
	code, stopped := agent.Run(klog.NewContext(ctx, klog.Background()), agent.Options{
		Config: cfg, RESTConfig: restConfig, Serve: serve, RunWorker: runWorker,
	})
	if stopped {
		return 128 + int((<-received).(syscall.Signal))
	}
	return code
}

// serve answers on the port in the background; a failure to listen is reported at once.
func serve(port int32, h http.Handler) error {
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(int(port)))
	if err != nil {
		return err
	}
	go func() {
		if err := http.Serve(ln, h); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Startup probe server stopped")
			os.Exit(1)
		}
	}()
	return nil
}

// runWorker runs the worker command with $SHELL, else bash, as the released agent does, and
// returns its exit code.
func runWorker(ctx context.Context, command string) int {
	sh := os.Getenv("SHELL")
	if sh == "" {
		var err error
		if sh, err = exec.LookPath("bash"); err != nil {
			klog.ErrorS(err, "No shell to run WORKER_COMMAND: set SHELL or install bash")
			return 1
		}
	}
	cmd := exec.CommandContext(ctx, sh, "-c", command)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exitErr):
		return exitErr.ExitCode()
	}
	klog.ErrorS(err, "Running the worker failed")
	return 1
}
