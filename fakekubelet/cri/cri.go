// Package cri serves one emulated node's container runtime over the CRI, on a Unix socket, as
// containerd serves a node's: what crictl and upstream's node e2e specs ask of a node's runtime
// behind the kubelet's back — list and inspect its sandboxes, containers and images, run a
// command in a container, stop a sandbox (a node's reboot stops them all), stop or remove a
// container.
//
// It owns the translation between package runtime's views and the CRI's messages, and nothing
// else: it decides nothing (the kubelet's syncs react to what a call changed, as a kubelet reacts
// to containerd's events), and it never creates a sandbox, a container or an image: those are the
// kubelet's (RunPodSandbox, CreateContainer, PullImage and the like answer Unimplemented, saying
// so).
package cri

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/restartbed/restartbed/fakekubelet/container"
	"github.com/restartbed/restartbed/fakekubelet/images"
	"github.com/restartbed/restartbed/fakekubelet/runtime"
	"github.com/restartbed/restartbed/internal/clockctx"
)

// Runtime is what the server reads and changes of the node's runtime (package runtime's
// *Runtime, with the node's name bound).
type Runtime interface {
	Sandboxes() []runtime.Sandbox
	Containers() []runtime.Container
	StopSandbox(id string) error
	StopContainer(id string, timeout time.Duration) error
	RemoveContainer(id string) error
	// Exec runs argv in the running instance with the ID and returns its exit code and output.
	Exec(ctx context.Context, id string, argv []string) (int, string, error)
	// Images are the images the node holds, as its status reports them.
	Images() []corev1.ContainerImage
}

// Server is one node's CRI endpoint.
type Server struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	rt    Runtime
	clock clock.Clock
	// version is the kubelet's version, which the node reports its runtime's as (restartbed://v1.x.y).
	version string
	grpc    *grpc.Server
}

// runtimeName is the runtime's name in Version, as the node's status names it.
const runtimeName = "restartbed"

// New returns a server for the node's runtime; version is the emulated kubelet's, and clk
// paces ExecSync's timeout (the component clock).
func New(rt Runtime, version string, clk clock.Clock) *Server {
	s := &Server{rt: rt, version: version, clock: clk, grpc: grpc.NewServer()}
	runtimeapi.RegisterRuntimeServiceServer(s.grpc, s)
	runtimeapi.RegisterImageServiceServer(s.grpc, s)
	return s
}

// Serve listens on the Unix socket at path (replacing a stale socket file, mode 0600) and serves
// until Stop. It returns once the socket listens.
func (s *Server) Serve(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cri: %w", err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("cri: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = l.Close() // the chmod's error is the one to report
		return fmt.Errorf("cri: %w", err)
	}
	go func() { _ = s.grpc.Serve(l) }() // returns when Stop closes the listener
	return nil
}

// Stop closes the socket and every connection at once.
func (s *Server) Stop() { s.grpc.Stop() }

// Version answers with the node's runtime name and version and the CRI's version.
func (s *Server) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: runtimeName, RuntimeVersion: s.version, RuntimeApiVersion: "v1"}, nil
}

// Status says the runtime and its network are ready, as they are while the node runs.
func (s *Server) Status(context.Context, *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}}, nil
}

// ListPodSandbox lists the node's sandboxes that match the filter.
func (s *Server) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f := req.GetFilter()
	var out []*runtimeapi.PodSandbox
	for _, sb := range s.rt.Sandboxes() {
		st := sandboxState(sb)
		if (f.GetId() != "" && f.GetId() != sb.ID) || (f.GetState() != nil && f.GetState().GetState() != st) || !matches(sb.Labels, f.GetLabelSelector()) {
			continue
		}
		out = append(out, &runtimeapi.PodSandbox{Id: sb.ID, Metadata: sandboxMetadata(sb), State: st, CreatedAt: sb.CreatedAt.UnixNano(),
			Labels: sb.Labels, Annotations: sb.Annotations})
	}
	return &runtimeapi.ListPodSandboxResponse{Items: out}, nil
}

// PodSandboxStatus reports one sandbox.
func (s *Server) PodSandboxStatus(_ context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	for _, sb := range s.rt.Sandboxes() {
		if sb.ID != req.GetPodSandboxId() {
			continue
		}
		st := &runtimeapi.PodSandboxStatus{Id: sb.ID, Metadata: sandboxMetadata(sb), State: sandboxState(sb), CreatedAt: sb.CreatedAt.UnixNano(),
			Labels: sb.Labels, Annotations: sb.Annotations}
		if sb.Ready {
			st.Network = &runtimeapi.PodSandboxNetworkStatus{Ip: sb.IP}
		}
		return &runtimeapi.PodSandboxStatusResponse{Status: st}, nil
	}
	return nil, notFound("sandbox", req.GetPodSandboxId())
}

// StopPodSandbox stops a sandbox: its containers are killed at once and it is not ready; the
// kubelet makes a new one at its next sync of the pod, as after a node's reboot.
func (s *Server) StopPodSandbox(_ context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	if err := s.rt.StopSandbox(req.GetPodSandboxId()); err != nil {
		return nil, grpcError(err)
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// ListContainers lists the node's container instances that match the filter.
func (s *Server) ListContainers(_ context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	f := req.GetFilter()
	var out []*runtimeapi.Container
	for _, c := range s.rt.Containers() {
		st := containerState(c.State)
		if (f.GetId() != "" && f.GetId() != c.ID) || (f.GetPodSandboxId() != "" && f.GetPodSandboxId() != c.SandboxID) ||
			(f.GetState() != nil && f.GetState().GetState() != st) || !matches(c.Labels, f.GetLabelSelector()) {
			continue
		}
		out = append(out, &runtimeapi.Container{Id: c.ID, PodSandboxId: c.SandboxID, Metadata: containerMetadata(c), Image: &runtimeapi.ImageSpec{Image: c.Image},
			ImageRef: c.ImageRef, ImageId: c.ImageRef, State: st, CreatedAt: c.CreatedAt.UnixNano(), Labels: c.Labels})
	}
	return &runtimeapi.ListContainersResponse{Containers: out}, nil
}

// ContainerStatus reports one container instance.
func (s *Server) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	c, err := s.container(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	st := &runtimeapi.ContainerStatus{Id: c.ID, Metadata: containerMetadata(c), State: containerState(c.State), CreatedAt: c.CreatedAt.UnixNano(),
		Image: &runtimeapi.ImageSpec{Image: c.Image}, ImageRef: c.ImageRef, ImageId: c.ImageRef, Labels: c.Labels}
	if !c.StartedAt.IsZero() {
		st.StartedAt = c.StartedAt.UnixNano()
	}
	if c.State == container.Exited {
		st.FinishedAt, st.ExitCode, st.Reason, st.Message = c.FinishedAt.UnixNano(), c.ExitCode, c.Reason, c.Message
	}
	return &runtimeapi.ContainerStatusResponse{Status: st}, nil
}

// StopContainer stops a container instance: SIGTERM, SIGKILL after the timeout.
func (s *Server) StopContainer(_ context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	if err := s.rt.StopContainer(req.GetContainerId(), time.Duration(req.GetTimeout())*time.Second); err != nil {
		return nil, grpcError(err)
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

// RemoveContainer removes a container instance, killing it first if it runs.
func (s *Server) RemoveContainer(_ context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	if err := s.rt.RemoveContainer(req.GetContainerId()); err != nil {
		return nil, grpcError(err)
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

// ExecSync runs a command in a running container instance (crictl exec -s).
func (s *Server) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	if req.GetTimeout() > 0 {
		var cancel context.CancelFunc
		ctx, cancel = clockctx.WithTimeout(ctx, s.clock, time.Duration(req.GetTimeout())*time.Second)
		defer cancel()
	}
	code, out, err := s.rt.Exec(ctx, req.GetContainerId(), req.GetCmd())
	if err != nil {
		return nil, grpcError(err)
	}
	return &runtimeapi.ExecSyncResponse{Stdout: []byte(out), ExitCode: int32(code)}, nil
}

// ListImages lists the images the node holds.
func (s *Server) ListImages(_ context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	var out []*runtimeapi.Image
	for _, img := range s.rt.Images() {
		if want := req.GetFilter().GetImage().GetImage(); want != "" && !holds(img, want) {
			continue
		}
		out = append(out, image(img))
	}
	return &runtimeapi.ListImagesResponse{Images: out}, nil
}

// ImageStatus reports an image the node holds, or no image (not an error) when it does not.
func (s *Server) ImageStatus(_ context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	for _, img := range s.rt.Images() {
		if holds(img, req.GetImage().GetImage()) {
			return &runtimeapi.ImageStatusResponse{Image: image(img)}, nil
		}
	}
	return &runtimeapi.ImageStatusResponse{}, nil
}

// ImageFsInfo reports no filesystem usage: an emulated node's images take no disk.
func (s *Server) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{}, nil
}

func (s *Server) container(id string) (runtime.Container, error) {
	for _, c := range s.rt.Containers() {
		if c.ID == id {
			return c, nil
		}
	}
	return runtime.Container{}, notFound("container", id)
}

func sandboxState(sb runtime.Sandbox) runtimeapi.PodSandboxState {
	if sb.Ready {
		return runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return runtimeapi.PodSandboxState_SANDBOX_NOTREADY
}

func sandboxMetadata(sb runtime.Sandbox) *runtimeapi.PodSandboxMetadata {
	return &runtimeapi.PodSandboxMetadata{Name: sb.Name, Namespace: sb.Namespace, Uid: string(sb.PodUID), Attempt: sb.Attempt}
}

func containerState(s container.State) runtimeapi.ContainerState {
	if s == container.Running {
		return runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	return runtimeapi.ContainerState_CONTAINER_EXITED
}

func containerMetadata(c runtime.Container) *runtimeapi.ContainerMetadata {
	return &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(c.Attempt)}
}

// matches reports whether labels hold every pair of the selector (the CRI's MatchLabels).
func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// holds reports whether the image goes by the name, as given or normalized (busybox:1.36 is
// docker.io/library/busybox:1.36).
func holds(img corev1.ContainerImage, name string) bool {
	if normalized, _, err := images.Resolve(name); err == nil && slices.Contains(img.Names, normalized) {
		return true
	}
	return slices.Contains(img.Names, name)
}

func image(img corev1.ContainerImage) *runtimeapi.Image {
	out := &runtimeapi.Image{Size: uint64(max(img.SizeBytes, 0))}
	for _, n := range img.Names {
		if out.Id == "" {
			out.Id = n
		}
		out.RepoTags = append(out.RepoTags, n)
	}
	return out
}

func notFound(kind, id string) error {
	return status.Errorf(codes.NotFound, "%s %q: not found", kind, id)
}

// grpcError maps the runtime's errors to the codes containerd answers with.
func grpcError(err error) error {
	switch {
	case errors.Is(err, runtime.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, runtime.ErrNotRunning):
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}
