package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/utils/exec"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/fakekubelet/logs"
	"github.com/restartbed/restartbed/fakekubelet/runtime"
)

// fakeRuntime runs "exit N" and "echo"-like commands, forwards ports to a function and has one
// container log, instance "abc"'s.
type fakeRuntime struct{}

func (fakeRuntime) LogOf(_ types.UID, id string) (*logs.Log, bool) {
	if id != "containerd://abc" {
		return nil, false
	}
	l := logs.New(logs.Options{})
	_, _ = io.WriteString(l.Writer("stdout"), "hello from abc\n")
	return l, true
}
func (fakeRuntime) RunningContainers(types.UID) []string { return []string{"c"} }
func (fakeRuntime) Attach(context.Context, types.UID, string, runtime.Streams) error {
	return nil
}

// ExecStream echoes stdin to stdout, writes its arguments to stderr and exits with the length
// of its first argument. "typed" is a shell on a terminal instead: it echoes the first thing
// typed a byte at a time and exits without waiting for the end of stdin.
func (fakeRuntime) ExecStream(_ context.Context, _ types.UID, _ string, argv []string, s runtime.Streams) (int, error) {
	if argv[0] == "typed" {
		buf := make([]byte, 64)
		n, _ := s.Stdin.Read(buf)
		for _, b := range buf[:n] {
			_, _ = s.Stdout.Write([]byte{b})
		}
		return 0, nil
	}
	if s.Stdin != nil && s.Stdout != nil {
		_, _ = io.Copy(s.Stdout, s.Stdin)
	}
	if s.Stderr != nil {
		_, _ = io.WriteString(s.Stderr, strings.Join(argv, " "))
	}
	return len(argv[0]), nil
}

// PortForward answers with the port number, after what it reads.
func (fakeRuntime) PortForward(_ context.Context, _ types.UID, port int32, stream io.ReadWriteCloser) error {
	if port == 1 {
		return errors.New("connection refused")
	}
	buf := make([]byte, 5)
	n, _ := io.ReadFull(stream, buf)
	_, err := io.WriteString(stream, string(buf[:n])+" on "+strings.Repeat("*", int(port%10)))
	return err
}

type allow struct{}

func (allow) AuthenticateRequest(*http.Request) (*authenticator.Response, bool, error) {
	return &authenticator.Response{User: &user.DefaultInfo{Name: "tester"}}, true, nil
}

func newTestServer(t *testing.T) *httptest.Server {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}, Spec: corev1.PodSpec{NodeName: "n"}}
	return serveFor(t, pod, nil)
}

// serveFor serves node n's API with pod ns/p on it and status as the kubelet's latest statuses.
func serveFor(t *testing.T, pod *corev1.Pod, status func(types.UID) (corev1.PodStatus, bool)) *httptest.Server {
	t.Helper()
	srv, err := New(Options{Runtime: fakeRuntime{}, Authenticator: allow{}, Authorizer: authorizerfactory.NewAlwaysAllowAuthorizer(),
		Pod:      func(node, ns, name string) (*corev1.Pod, bool) { return pod, ns == "ns" && name == "p" },
		Pods:     func(string) []*corev1.Pod { return []*corev1.Pod{pod} },
		PodWatch: func() (uint64, int) { return 7, 1 },
		Status:   status})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler("n"))
	t.Cleanup(ts.Close)
	return ts
}

// Exec's streams and its exit code travel as the kubelet sends them (the v4 channel protocol).
func TestExecStreamsAndExitCode(t *testing.T) {
	ts := newTestServer(t)
	u, _ := url.Parse(ts.URL + "/exec/ns/p/c?command=abc&command=d&input=1&output=1&error=1")
	exec, err := remotecommand.NewSPDYExecutor(&rest.Config{Host: ts.URL}, http.MethodPost, u)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err = exec.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: strings.NewReader("hello"), Stdout: &stdout, Stderr: &stderr})
	var exit utilexec.ExitError
	if !errors.As(err, &exit) || exit.ExitStatus() != 3 {
		t.Errorf("exec ended with %v, want exit code 3", err)
	}
	if stdout.String() != "hello" || stderr.String() != "abc d" {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}

// A command's last output reaches the client even when the command ends while the client is
// still writing its stdin: closing the connection then would reset it and drop what the client
// had not read (1 run in 40 lost an interactive session's last lines).
func TestExecOutputOutlivesTheCommand(t *testing.T) {
	ts := newTestServer(t)
	u, _ := url.Parse(ts.URL + "/exec/ns/p/c?command=typed&input=1&output=1&tty=1")
	const typed = "echo $((6 * 7))\rexit\r"
	for i := range 200 {
		exec, err := remotecommand.NewSPDYExecutor(&rest.Config{Host: ts.URL}, http.MethodPost, u)
		if err != nil {
			t.Fatal(err)
		}
		var stdout bytes.Buffer
		err = exec.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: strings.NewReader(typed), Stdout: &stdout, Tty: true})
		if err != nil || stdout.String() != typed {
			t.Fatalf("session %d: %v, output %q, want %q", i, err, stdout.String(), typed)
		}
	}
}

// Port-forward joins each connection to the pod's port and reports a failure on the error stream.
func TestPortForward(t *testing.T) {
	ts := newTestServer(t)
	u, _ := url.Parse(ts.URL + "/portForward/ns/p")
	transport, upgrader, err := spdy.RoundTripperFor(&rest.Config{Host: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	stop, ready := make(chan struct{}), make(chan struct{})
	defer close(stop)
	var errs bytes.Buffer
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:8083"}, stop, ready, io.Discard, &errs)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = fw.ForwardPorts() }()
	<-ready
	ports, _ := fw.GetPorts()
	conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", itoa(ports[0].Local)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "hello")
	got, _ := io.ReadAll(conn)
	if string(got) != "hello on ***" {
		t.Errorf("through the forward: %q", got)
	}
}

func itoa(p uint16) string { return strconv.Itoa(int(p)) }

// A log is read from the instance of the status the kubelet generated last, which the API may
// not show yet: right after a container starts, `kubectl logs` finds it as on a cluster.
func TestLogsReadTheKubeletsLatestStatus(t *testing.T) {
	waiting := corev1.ContainerStatus{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	running := corev1.ContainerStatus{Name: "c", ContainerID: "containerd://abc", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}, Spec: corev1.PodSpec{NodeName: "n",
		Containers: []corev1.Container{{Name: "c"}}}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting}}}
	for _, tc := range []struct {
		name     string
		status   func(types.UID) (corev1.PodStatus, bool)
		wantCode int
		wantBody string
	}{
		{"the kubelet's status is ahead of the API's",
			func(uid types.UID) (corev1.PodStatus, bool) {
				return corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{running}}, uid == "u"
			},
			http.StatusOK, "hello from abc\n"},
		{"no status generated yet: the API's",
			func(types.UID) (corev1.PodStatus, bool) { return corev1.PodStatus{}, false },
			http.StatusBadRequest, `container "c" in pod "p" is waiting to start: ContainerCreating` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := serveFor(t, pod, tc.status)
			resp, err := http.Get(ts.URL + "/containerLogs/ns/p/c")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.wantCode || string(body) != tc.wantBody {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, body, tc.wantCode, tc.wantBody)
			}
		})
	}
}

// /metrics counts the node's running pods and containers, and its process's pod watch, in
// Prometheus' text format.
func TestMetrics(t *testing.T) {
	ts := newTestServer(t)
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`kubelet_node_name{node="n"} 1`, "kubelet_running_pods 1", `kubelet_running_containers{container_state="running"} 1`,
		"restartbed_pod_watch_events_total 7", "restartbed_pods_watched 1"} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("/metrics has no line %q:\n%s", want, body)
		}
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q", ct)
	}
}

// TestLogOptions: the query the apiserver sends (client-go encodes PodLogOptions with its
// parameter codec) reads back as the same options; a value that is not one is an error.
func TestLogOptions(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	for _, want := range []*corev1.PodLogOptions{
		{},
		{Container: "worker", Follow: true, Previous: true, Timestamps: true},
		{Container: "agent", TailLines: ptr.To[int64](5), LimitBytes: ptr.To[int64](100), SinceSeconds: ptr.To[int64](60)},
		{SinceTime: &since, Stream: ptr.To(corev1.LogStreamStderr)},
	} {
		q, err := clientgoscheme.ParameterCodec.EncodeParameters(want, corev1.SchemeGroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		got, err := logOptions(q)
		if err != nil {
			t.Errorf("%s: %v", q.Encode(), err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", q.Encode(), diff)
		}
	}
	for _, bad := range []string{"follow=maybe", "tailLines=ten", "sinceTime=yesterday", "limitBytes=1e3"} {
		q, _ := url.ParseQuery(bad)
		if _, err := logOptions(q); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// TestProfiling: the kubelet's profiling handler serves the process's profiles, authorized as
// the proxy subresource like every path without a subresource of its own.
func TestProfiling(t *testing.T) {
	ts := newTestServer(t)
	for path, want := range map[string]string{"/debug/pprof/": "goroutine", "/debug/pprof/goroutine?debug=1": "goroutine profile:",
		"/debug/pprof/cmdline": ""} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %s, want 200 with %q:\n%.300s", path, resp.Status, want, body)
		}
	}
	n := &nodeAPI{s: &Server{}, node: "n"}
	if got := n.subresources("/debug/pprof/profile"); !slices.Equal(got, []string{"proxy"}) {
		t.Errorf("/debug/pprof/profile is authorized as %v, want [proxy]", got)
	}
}
