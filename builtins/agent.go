package builtins

import (
	"context"
	"fmt"
	"net/http"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/restartbed/restartbed/agent"
	"github.com/restartbed/restartbed/fakekubelet/program"
	"github.com/restartbed/restartbed/fakekubelet/shell"
)

// Agent is the name of JobSet's in-place-restart agent among the builtins.
const Agent = "agent"

// AgentOptions tune the agent as a container program; the builtin Agent uses the zero value.
type AgentOptions struct {
	// Backoff paces the agent's retries; the zero value means DefaultBackoff. A Jitter of 0 makes
	// agents that fail together retry together (restartbed bench's jitter-off runs).
	Backoff wait.Backoff
}

// AgentProgram returns the agent as an in-process container program: its configuration from the
// container's environment and service-account files, its identity the pod's service account, its
// probe endpoint served on the pod's port, its worker run by restartbed's shell, and its log the
// container's.
func AgentProgram(opts AgentOptions) program.Program {
	return program.Func(func(ctx context.Context, c *program.Container) int {
		logger := funcr.New(func(prefix, args string) { fmt.Fprintln(c.Stderr, prefix, args) }, funcr.Options{})
		cfg, err := agent.ConfigFromEnv(c.LookupEnv, c.FS.ReadFile)
		if err != nil {
			fmt.Fprintln(c.Stderr, err)
			return 1
		}
		code, stopped := agent.Run(klog.NewContext(ctx, logger), agent.Options{
			Config: cfg, RESTConfig: c.Config, Clock: c.Clock, Backoff: opts.Backoff,
			Serve: func(port int32, h http.Handler) error {
				c.Serve(port, h)
				return nil
			},
			RunWorker: func(ctx context.Context, command string) int {
				env := shell.Env{FS: c.FS, Vars: c.Env, Stdout: c.Stdout, Stderr: c.Stderr, Clock: c.Clock, Hostname: c.Pod.Name}
				return shell.RunMain(ctx, ctx, []string{"sh", "-c", command}, env)
			},
		})
		if stopped {
			return shell.ExitTerminated // SIGTERM: 128+15, as the released agent exits
		}
		return code
	})
}
