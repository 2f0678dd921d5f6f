package cri

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/restartbed/restartbed/fakekubelet/container"
	"github.com/restartbed/restartbed/fakekubelet/runtime"
)

var created = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// fakeRuntime is a node with two pods' sandboxes, the second stopped, and records what is
// asked of it.
type fakeRuntime struct {
	stopped, removed []string
}

func (f *fakeRuntime) Sandboxes() []runtime.Sandbox {
	return []runtime.Sandbox{
		{ID: "sb-a", Ready: true, CreatedAt: created, PodUID: "uid-a", Name: "a", Namespace: "ns", IP: "10.64.0.2",
			Labels: map[string]string{"app": "x", runtime.LabelPodName: "a"}},
		{ID: "sb-b", Attempt: 1, CreatedAt: created.Add(time.Second), PodUID: "uid-b", Name: "b", Namespace: "ns",
			Labels: map[string]string{"app": "y", runtime.LabelPodName: "b"}},
	}
}

func (f *fakeRuntime) Containers() []runtime.Container {
	return []runtime.Container{
		{Status: container.Status{ID: "c-1", Name: "main", State: container.Running, CreatedAt: created, StartedAt: created, Image: "docker.io/library/busybox:1.36"},
			SandboxID: "sb-a", PodUID: "uid-a", Labels: map[string]string{runtime.LabelContainerName: "main"}},
		{Status: container.Status{ID: "c-2", Name: "init", Attempt: 2, State: container.Exited, CreatedAt: created, ExitCode: 3, Reason: "Error",
			FinishedAt: created.Add(time.Second)}, SandboxID: "sb-b", PodUID: "uid-b", Labels: map[string]string{runtime.LabelContainerName: "init"}},
	}
}

func (f *fakeRuntime) StopSandbox(id string) error {
	if id != "sb-a" && id != "sb-b" {
		return fmt.Errorf("sandbox %q: %w", id, runtime.ErrNotFound)
	}
	f.stopped = append(f.stopped, id)
	return nil
}

func (f *fakeRuntime) StopContainer(string, time.Duration) error { return nil }

func (f *fakeRuntime) RemoveContainer(id string) error {
	f.removed = append(f.removed, id)
	return nil
}

func (f *fakeRuntime) Exec(_ context.Context, id string, argv []string) (int, string, error) {
	if id != "c-1" {
		return 0, "", fmt.Errorf("container %q: %w", id, runtime.ErrNotRunning)
	}
	return 7, fmt.Sprint(argv), nil
}

func (f *fakeRuntime) Images() []corev1.ContainerImage {
	return []corev1.ContainerImage{{Names: []string{"docker.io/library/busybox:1.36", "docker.io/library/busybox@sha256:0"}, SizeBytes: 10}}
}

// serve starts a server on a socket of the test's and returns a client of each service.
func serve(t *testing.T, rt Runtime) (runtimeapi.RuntimeServiceClient, runtimeapi.ImageServiceClient) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "node.sock")
	s := New(rt, "v1.37.2", clock.RealClock{})
	if err := s.Serve(sock); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
}

func TestServer(t *testing.T) {
	ctx := context.Background()
	rt := &fakeRuntime{}
	rs, is := serve(t, rt)

	v, err := rs.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil || v.RuntimeName != "restartbed" || v.RuntimeVersion != "v1.37.2" || v.RuntimeApiVersion != "v1" {
		t.Fatalf("Version: %v %v", v, err)
	}

	ids := func(items []*runtimeapi.PodSandbox) []string {
		var out []string
		for _, sb := range items {
			out = append(out, fmt.Sprintf("%s/%d/%s", sb.Id, sb.Metadata.Attempt, sb.State))
		}
		return out
	}
	for _, tc := range []struct {
		filter *runtimeapi.PodSandboxFilter
		want   []string
	}{
		{nil, []string{"sb-a/0/SANDBOX_READY", "sb-b/1/SANDBOX_NOTREADY"}},
		{&runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "y"}}, []string{"sb-b/1/SANDBOX_NOTREADY"}},
		{&runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "x", runtime.LabelPodName: "b"}}, nil},
		{&runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}, []string{"sb-a/0/SANDBOX_READY"}},
		{&runtimeapi.PodSandboxFilter{Id: "sb-b"}, []string{"sb-b/1/SANDBOX_NOTREADY"}},
	} {
		resp, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: tc.filter})
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(resp.Items); !slices.Equal(got, tc.want) {
			t.Errorf("ListPodSandbox(%v) = %v, want %v", tc.filter, got, tc.want)
		}
	}

	st, err := rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: "sb-a"})
	if err != nil || st.Status.Network.GetIp() != "10.64.0.2" || st.Status.Metadata.Uid != "uid-a" {
		t.Errorf("PodSandboxStatus: %v %v", st, err)
	}
	if _, err := rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("PodSandboxStatus of an unknown sandbox: %v, want NotFound", err)
	}

	if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: "sb-a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("StopPodSandbox of an unknown sandbox: %v, want NotFound", err)
	}
	if !slices.Equal(rt.stopped, []string{"sb-a"}) {
		t.Errorf("stopped %v, want [sb-a]", rt.stopped)
	}

	cs, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: "sb-b"}})
	if err != nil || len(cs.Containers) != 1 || cs.Containers[0].Id != "c-2" || cs.Containers[0].State != runtimeapi.ContainerState_CONTAINER_EXITED ||
		cs.Containers[0].Metadata.Attempt != 2 {
		t.Errorf("ListContainers of sb-b: %v %v", cs, err)
	}
	c2, err := rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: "c-2"})
	if err != nil || c2.Status.ExitCode != 3 || c2.Status.Reason != "Error" || c2.Status.FinishedAt == 0 || c2.Status.StartedAt != 0 {
		t.Errorf("ContainerStatus of c-2: %v %v", c2, err)
	}
	if _, err := rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: "c-2"}); err != nil || !slices.Equal(rt.removed, []string{"c-2"}) {
		t.Errorf("RemoveContainer: %v, removed %v", err, rt.removed)
	}

	out, err := rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: "c-1", Cmd: []string{"kill", "1"}})
	if err != nil || out.ExitCode != 7 || string(out.Stdout) != "[kill 1]" {
		t.Errorf("ExecSync: %v %v", out, err)
	}
	if _, err := rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: "c-2", Cmd: []string{"true"}}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("ExecSync in an exited container: %v, want FailedPrecondition", err)
	}
	if _, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("RunPodSandbox: %v, want Unimplemented: sandboxes are the kubelet's", err)
	}

	img, err := is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}})
	if err != nil || img.Image == nil || img.Image.Size != 10 {
		t.Errorf("ImageStatus of busybox:1.36: %v %v", img, err)
	}
	if img, err := is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "nginx"}}); err != nil || img.Image != nil {
		t.Errorf("ImageStatus of an image the node does not hold: %v %v, want none", img, err)
	}
	if _, err := is.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{}); err != nil {
		t.Errorf("ImageFsInfo: %v", err)
	}
}
