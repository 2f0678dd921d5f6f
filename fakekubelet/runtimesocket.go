package fakekubelet

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/restartbed/restartbed/fakekubelet/cri"
	"github.com/restartbed/restartbed/fakekubelet/nodes"
	"github.com/restartbed/restartbed/fakekubelet/runtime"
)

// RuntimeSocket is the path of the node's CRI socket under Options.RuntimeSocketDir.
func RuntimeSocket(dir, node string) string { return filepath.Join(dir, node+".sock") }

// serveRuntime serves the node's container runtime over the CRI on its socket
// (Options.RuntimeSocketDir) until the node's serving closes.
func (k *Kubelet) serveRuntime(n *nodes.Node, serving *nodeServing) error {
	if k.opts.RuntimeSocketDir == "" {
		return nil
	}
	s := cri.New(nodeRuntime{rt: k.rt, images: k.images.NodeImages, node: n.Name()}, k.opts.KubeletVersion, k.clock)
	if err := s.Serve(RuntimeSocket(k.opts.RuntimeSocketDir, n.Name())); err != nil {
		return fmt.Errorf("fakekubelet: node %s: %w", n.Name(), err)
	}
	serving.stops = append(serving.stops, s.Stop)
	return nil
}

// nodeRuntime is the runtime as one node's CRI shows it (cri.Runtime).
type nodeRuntime struct {
	rt     *runtime.Runtime
	images func(node string) []corev1.ContainerImage
	node   string
}

func (r nodeRuntime) Sandboxes() []runtime.Sandbox    { return r.rt.Sandboxes(r.node) }
func (r nodeRuntime) Containers() []runtime.Container { return r.rt.Containers(r.node) }
func (r nodeRuntime) StopSandbox(id string) error     { return r.rt.StopSandboxByID(r.node, id) }
func (r nodeRuntime) RemoveContainer(id string) error { return r.rt.RemoveContainerByID(r.node, id) }
func (r nodeRuntime) Images() []corev1.ContainerImage { return r.images(r.node) }
func (r nodeRuntime) StopContainer(id string, timeout time.Duration) error {
	return r.rt.StopContainerByID(r.node, id, timeout)
}
func (r nodeRuntime) Exec(ctx context.Context, id string, argv []string) (int, string, error) {
	return r.rt.ExecByID(ctx, r.node, id, argv)
}
