package nodectl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// This file is the control API's faults: what a scenario step does to a node or a pod that no
// API request can, served for the kubelets of another process (restartbed kubelet
// --control-socket) so that a scenario or a benchmark can drive nodes wherever they run.

// Faults are the faults a Server can inject into its kubelets' nodes and pods; a Kubelets that
// also implements Faults (fakekubelet.Kubelet does) gets the fault routes. Each method means
// what fakekubelet.Kubelet's of the same name does (docs/fakekubelet.md).
type Faults interface {
	FailNode(node string) error
	RecoverNode(ctx context.Context, node string) error
	RestartKubelet(node string) error
	RebootNode(ctx context.Context, node string) error
	ResetConnections(node string) (int, error)
	ExitContainer(namespace, pod, container string, code int32) error
	OOMKill(namespace, pod, container string) error
	Exec(ctx context.Context, namespace, pod, container string, argv []string) (int, string, error)
}

// Node faults, the verbs of POST /v1/nodes/NODE/VERB.
const (
	NodeFail           = "fail"
	NodeRecover        = "recover"
	NodeRestartKubelet = "restart-kubelet"
	NodeReboot         = "reboot"
	// NodeStopKubelet and NodeStartKubelet are the unit's stop and start, strict: stopping a
	// stopped kubelet, or starting a running one, is refused as fakekubelet refuses it.
	NodeStopKubelet  = "stop-kubelet"
	NodeStartKubelet = "start-kubelet"
	// NodeResetConnections resets the node's pods' connections to the apiserver.
	NodeResetConnections = "reset-connections"
)

// Container faults, the verbs of POST /v1/pods/NAMESPACE/POD/containers/CONTAINER/VERB.
const (
	ContainerExit    = "exit"
	ContainerOOMKill = "oom-kill"
	ContainerExec    = "exec"
)

// ExitRequest is the body of a container's exit: the code its process exits with.
type ExitRequest struct {
	Code int32 `json:"code"`
}

// ExecRequest is the body of a container's exec: the command.
type ExecRequest struct {
	Command []string `json:"command"`
}

// ExecResult is the answer to an exec: the command's exit code and output.
type ExecResult struct {
	ExitCode int    `json:"exitCode"`
	Output   string `json:"output"`
}

// done is the answer to a fault that has nothing more to say.
type done struct {
	Done bool `json:"done"`
}

// serveFaults adds the fault routes:
//
//	POST /v1/nodes/NODE/VERB                                VERB: fail, recover, restart-kubelet, reboot,
//	                                                        stop-kubelet, start-kubelet, reset-connections
//	POST /v1/pods/NAMESPACE/POD/containers/CONTAINER/VERB   VERB: exit {"code"}, oom-kill, exec {"command"}
//
// A fault the kubelet refuses (an unknown node or pod, a container not running, a node already
// partitioned) answers 409 with the kubelet's message.
func (s *Server) serveFaults(f Faults) {
	s.mux.HandleFunc("POST /v1/nodes/{node}/{verb}", func(w http.ResponseWriter, r *http.Request) {
		node := r.PathValue("node")
		var err error
		switch verb := r.PathValue("verb"); verb {
		case NodeFail:
			err = f.FailNode(node)
		case NodeRecover:
			err = f.RecoverNode(r.Context(), node)
		case NodeRestartKubelet:
			err = f.RestartKubelet(node)
		case NodeReboot:
			err = f.RebootNode(r.Context(), node)
		case NodeStopKubelet:
			err = s.kubelets.StopKubelet(node)
		case NodeStartKubelet:
			err = s.kubelets.StartKubelet(r.Context(), node)
		case NodeResetConnections:
			_, err = f.ResetConnections(node)
		default:
			writeError(w, http.StatusBadRequest, fmt.Errorf("unknown node fault %q: one of %s", verb,
				strings.Join([]string{NodeFail, NodeRecover, NodeRestartKubelet, NodeReboot, NodeStopKubelet, NodeStartKubelet, NodeResetConnections}, ", ")))
			return
		}
		answer(w, done{true}, err)
	})
	s.mux.HandleFunc("POST /v1/pods/{namespace}/{pod}/containers/{container}/{verb}", func(w http.ResponseWriter, r *http.Request) {
		ns, pod, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
		switch verb := r.PathValue("verb"); verb {
		case ContainerExit:
			var req ExitRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				writeError(w, http.StatusBadRequest, fmt.Errorf("the body of an exit: %w", err))
				return
			}
			answer(w, done{true}, f.ExitContainer(ns, pod, container, req.Code))
		case ContainerOOMKill:
			answer(w, done{true}, f.OOMKill(ns, pod, container))
		case ContainerExec:
			var req ExecRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				writeError(w, http.StatusBadRequest, fmt.Errorf("the body of an exec: %w", err))
				return
			}
			if len(req.Command) == 0 {
				writeError(w, http.StatusBadRequest, errors.New("the body of an exec must name a command"))
				return
			}
			code, out, err := f.Exec(r.Context(), ns, pod, container, req.Command)
			answer(w, ExecResult{ExitCode: code, Output: out}, err)
		default:
			writeError(w, http.StatusBadRequest, fmt.Errorf("unknown container fault %q: one of %s, %s, %s", verb, ContainerExit, ContainerOOMKill, ContainerExec))
		}
	})
}

// answer writes v, or err as a conflict: the kubelet refused the fault.
func answer(w http.ResponseWriter, v any, err error) {
	if err != nil {
		writeError(w, http.StatusConflict, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// NodeFault injects one of the node faults (NodeFail, ...) into a node.
func (c *Client) NodeFault(ctx context.Context, node, verb string) error {
	return c.do(ctx, http.MethodPost, "/v1/nodes/"+url.PathEscape(node)+"/"+url.PathEscape(verb), nil, &done{})
}

// ExitContainer makes a container's process exit with code.
func (c *Client) ExitContainer(ctx context.Context, namespace, pod, container string, code int32) error {
	return c.do(ctx, http.MethodPost, containerPath(namespace, pod, container, ContainerExit), ExitRequest{Code: code}, &done{})
}

// OOMKill ends a container as the OOM killer does.
func (c *Client) OOMKill(ctx context.Context, namespace, pod, container string) error {
	return c.do(ctx, http.MethodPost, containerPath(namespace, pod, container, ContainerOOMKill), nil, &done{})
}

// Exec runs a command in a running container and returns its exit code and output.
func (c *Client) Exec(ctx context.Context, namespace, pod, container string, argv []string) (int, string, error) {
	var res ExecResult
	err := c.do(ctx, http.MethodPost, containerPath(namespace, pod, container, ContainerExec), ExecRequest{Command: argv}, &res)
	return res.ExitCode, res.Output, err
}

func containerPath(namespace, pod, container, verb string) string {
	return "/v1/pods/" + url.PathEscape(namespace) + "/" + url.PathEscape(pod) + "/containers/" + url.PathEscape(container) + "/" + verb
}
