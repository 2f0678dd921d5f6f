// Package server is the kubelet's API as every emulated node serves it, on the node's address and
// the port its status advertises (what pkg/kubelet/server serves): container logs, exec, attach,
// run and port-forward, the node's pods and running pods, /healthz, /configz, /metrics and the
// profiling handler under /debug/pprof/. Requests are authenticated (client certificates of the
// cluster's client CA, bearer tokens through the TokenReview API, no anonymous access) and
// authorized through the SubjectAccessReview API as the kubelet's webhook mode does: verb from the
// method, resource nodes, the subresource from the path.
//
// It decides nothing about pods: the pods come from the caller, and what runs in them from the
// runtime. It serves HTTP only; the caller puts it on the network behind TLS.
package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"net/url"
	"strconv"
	"strings"
	"time"

	"k8s.io/apiserver/pkg/util/flushwriter"

	"k8s.io/utils/clock"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/fakekubelet/logs"
	"github.com/restartbed/restartbed/fakekubelet/runtime"
)

// Runtime is what the server reaches containers through (package runtime's Runtime).
type Runtime interface {
	LogOf(uid types.UID, containerID string) (*logs.Log, bool)
	ExecStream(ctx context.Context, uid types.UID, container string, argv []string, s runtime.Streams) (int, error)
	Attach(ctx context.Context, uid types.UID, container string, s runtime.Streams) error
	PortForward(ctx context.Context, uid types.UID, port int32, stream io.ReadWriteCloser) error
	RunningContainers(uid types.UID) []string
}

// Options configure a Server.
type Options struct {
	Runtime Runtime
	// Pod returns a pod bound to the node by namespace and name; Pods every pod bound to it.
	Pod  func(node, namespace, name string) (*corev1.Pod, bool)
	Pods func(node string) []*corev1.Pod
	// Status returns the status the kubelet last generated for a pod, which may be ahead of the
	// API's: logs pick the container instance from it, as the kubelet reads its status manager's
	// cache. Without it, or for a pod it has none for, the pod's status from the API is used.
	Status func(uid types.UID) (corev1.PodStatus, bool)
	// Authenticator and Authorizer check every request; required.
	Authenticator authenticator.Request
	Authorizer    authorizer.Authorizer
	// FineGrainedAuthz: the KubeletFineGrainedAuthz gate, which lets /pods, /healthz and /configz
	// be allowed by their own subresource before falling back to proxy.
	FineGrainedAuthz bool
	// PodWatch, if set, says what the apiserver's pod watches brought the serving process:
	// events received and pods held (fakekubelet.Kubelet.PodWatch); /metrics reports them.
	PodWatch func() (events uint64, pods int)
	// Configz is what /configz reports as kubeletconfig for a node.
	Configz func(node string) any
	// StreamIdleTimeout is the kubelet's streamingConnectionIdleTimeout (4h by default).
	StreamIdleTimeout time.Duration
	// Clock times how long a client has to open its streams. Default: the real clock.
	Clock clock.Clock
}

// Server serves the kubelet API of every node.
type Server struct {
	opts Options
}

// New returns a Server.
func New(opts Options) (*Server, error) {
	if opts.Runtime == nil || opts.Pod == nil || opts.Pods == nil || opts.Authenticator == nil || opts.Authorizer == nil {
		return nil, errors.New("server: Options.Runtime, Pod, Pods, Authenticator and Authorizer are required")
	}
	if opts.StreamIdleTimeout == 0 {
		opts.StreamIdleTimeout = 4 * time.Hour
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Server{opts: opts}, nil
}

// Handler is node's kubelet API.
func (s *Server) Handler(node string) http.Handler {
	mux := http.NewServeMux()
	n := &nodeAPI{s: s, node: node}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("GET /healthz/{check}", func(w http.ResponseWriter, r *http.Request) {
		if c := r.PathValue("check"); c != "ping" && c != "log" && c != "syncloop" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, "ok") // the client may have gone
	})
	mux.HandleFunc("GET /configz", n.configz)
	mux.HandleFunc("GET /metrics", n.metrics)
	mux.HandleFunc("GET /pods", n.pods)
	mux.HandleFunc("GET /pods/", n.pods)
	mux.HandleFunc("GET /runningpods/", n.runningPods)
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", n.containerLogs)
	for _, method := range []string{"GET", "POST"} {
		mux.HandleFunc(method+" /exec/{namespace}/{pod}/{container}", n.exec)
		mux.HandleFunc(method+" /exec/{namespace}/{pod}/{uid}/{container}", n.exec)
		mux.HandleFunc(method+" /attach/{namespace}/{pod}/{container}", n.attach)
		mux.HandleFunc(method+" /attach/{namespace}/{pod}/{uid}/{container}", n.attach)
		mux.HandleFunc(method+" /portForward/{namespace}/{pod}", n.portForward)
		mux.HandleFunc(method+" /portForward/{namespace}/{pod}/{uid}", n.portForward)
	}
	mux.HandleFunc("POST /run/{namespace}/{pod}/{container}", n.run)
	mux.HandleFunc("POST /run/{namespace}/{pod}/{uid}/{container}", n.run)
	// The kubelet's profiling handler (enableProfilingHandler, on by default), authorized as
	// proxy. Every node's kubelet is this process, so any node's profiles all of them.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return n.authFilter(mux)
}

type nodeAPI struct {
	s    *Server
	node string
}

// subresources are the nodes subresources a path is authorized as: the fine-grained one first
// (when the gate is on), then the one every path falls back to.
func (n *nodeAPI) subresources(path string) []string {
	under := func(prefix string) bool { return path == prefix || strings.HasPrefix(path, prefix+"/") }
	var subs []string
	if n.s.opts.FineGrainedAuthz {
		switch {
		case under("/pods"), under("/runningpods"):
			subs = append(subs, "pods")
		case under("/healthz"):
			subs = append(subs, "healthz")
		case under("/configz"):
			subs = append(subs, "configz")
		}
	}
	switch {
	case under("/stats"):
		return append(subs, "stats")
	case under("/metrics"):
		return append(subs, "metrics")
	case under("/logs"):
		return append(subs, "log")
	}
	return append(subs, "proxy")
}

var verbs = map[string]string{http.MethodGet: "get", http.MethodPost: "create", http.MethodPut: "update",
	http.MethodPatch: "patch", http.MethodDelete: "delete"}

// authFilter authenticates and authorizes every request as the kubelet's InstallAuthFilter does.
func (n *nodeAPI) authFilter(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, ok, err := n.s.opts.Authenticator.AuthenticateRequest(r)
		if err != nil || !ok {
			klog.FromContext(r.Context()).V(4).Info("Unauthorized kubelet API request", "node", n.node, "path", r.URL.Path, "err", err)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		subs := n.subresources(r.URL.Path)
		for _, sub := range subs {
			attrs := authorizer.AttributesRecord{User: resp.User, Verb: verbs[r.Method], APIVersion: "v1", Resource: "nodes",
				Subresource: sub, Name: n.node, ResourceRequest: true, Path: r.URL.Path}
			decision, _, err := n.s.opts.Authorizer.Authorize(r.Context(), attrs)
			if err != nil {
				http.Error(w, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=nodes, subresource=%s)", resp.User.GetName(), attrs.Verb, sub),
					http.StatusInternalServerError)
				return
			}
			if decision == authorizer.DecisionAllow {
				next.ServeHTTP(w, r)
				return
			}
		}
		http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)", resp.User.GetName(), verbs[r.Method], subs),
			http.StatusForbidden)
	})
}

func (n *nodeAPI) configz(w http.ResponseWriter, _ *http.Request) {
	var cfg any = struct{}{}
	if n.s.opts.Configz != nil {
		cfg = n.s.opts.Configz(n.node)
	}
	writeJSON(w, map[string]any{"kubeletconfig": cfg})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v) // the status line is written: a failed body write has no one to tell
}

// pods lists the pods bound to the node, as the kubelet's pod manager holds them.
func (n *nodeAPI) pods(w http.ResponseWriter, _ *http.Request) {
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
	for _, p := range n.s.opts.Pods(n.node) {
		list.Items = append(list.Items, *p)
	}
	writeObject(w, list)
}

// metrics serves the few kubelet metrics the emulation has, in Prometheus' text format, so that
// tools that scrape a kubelet (upstream's e2e framework dumps them after a failure) find one.
func (n *nodeAPI) metrics(w http.ResponseWriter, _ *http.Request) {
	pods, containers := 0, 0
	for _, p := range n.s.opts.Pods(n.node) {
		if running := len(n.s.opts.Runtime.RunningContainers(p.UID)); running > 0 {
			pods++
			containers += running
		}
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	fmt.Fprintf(w, "# HELP kubelet_node_name The node's name; the value is always 1.\n# TYPE kubelet_node_name gauge\n"+
		"kubelet_node_name{node=%q} 1\n", n.node)
	fmt.Fprintf(w, "# HELP kubelet_running_pods Pods with a running container.\n# TYPE kubelet_running_pods gauge\n"+
		"kubelet_running_pods %d\n", pods)
	fmt.Fprintf(w, "# HELP kubelet_running_containers Containers by state; restartbed counts the running ones.\n"+
		"# TYPE kubelet_running_containers gauge\nkubelet_running_containers{container_state=\"running\"} %d\n", containers)
	if n.s.opts.PodWatch != nil {
		events, held := n.s.opts.PodWatch()
		fmt.Fprintf(w, "# HELP restartbed_pod_watch_events_total Pod events the process that runs the node received from the apiserver's watches, all its nodes' together.\n"+
			"# TYPE restartbed_pod_watch_events_total counter\nrestartbed_pod_watch_events_total %d\n", events)
		fmt.Fprintf(w, "# HELP restartbed_pods_watched Pods the process that runs the node holds from those watches.\n"+
			"# TYPE restartbed_pods_watched gauge\nrestartbed_pods_watched %d\n", held)
	}
}

// runningPods lists the pods that have a running container, with only their identity and
// containers, as the kubelet builds them from the runtime.
func (n *nodeAPI) runningPods(w http.ResponseWriter, _ *http.Request) {
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
	for _, p := range n.s.opts.Pods(n.node) {
		names := n.s.opts.Runtime.RunningContainers(p.UID)
		if len(names) == 0 {
			continue
		}
		pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID}}
		for _, name := range names {
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: name})
		}
		list.Items = append(list.Items, pod)
	}
	writeObject(w, list)
}

func writeObject(w http.ResponseWriter, obj apiruntime.Object) {
	data, err := apiruntime.Encode(scheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion), obj)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data) // the status line is written: a failed body write has no one to tell
}

// target finds the request's pod on the node, checking the UID when the path has one.
func (n *nodeAPI) target(w http.ResponseWriter, r *http.Request) (*corev1.Pod, bool) {
	ns, name := r.PathValue("namespace"), r.PathValue("pod")
	pod, ok := n.s.opts.Pod(n.node, ns, name)
	if !ok || (r.PathValue("uid") != "" && types.UID(r.PathValue("uid")) != pod.UID) {
		http.Error(w, "pod does not exist", http.StatusNotFound)
		return nil, false
	}
	return pod, true
}

// containerLogs serves a container's log with the query's PodLogOptions.
func (n *nodeAPI) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, name, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, err := logOptions(r.URL.Query())
	if err != nil {
		http.Error(w, `{"message": "Unable to decode query."}`, http.StatusBadRequest)
		return
	}
	pod, ok := n.s.opts.Pod(n.node, ns, name)
	if !ok {
		http.Error(w, fmt.Sprintf("pod %q does not exist", name), http.StatusNotFound)
		return
	}
	if !hasContainer(pod, container) {
		http.Error(w, fmt.Sprintf("container %q not found in pod %q", container, name), http.StatusNotFound)
		return
	}
	status := pod.Status
	if n.s.opts.Status != nil {
		if latest, ok := n.s.opts.Status(pod.UID); ok {
			status = latest
		}
	}
	id, err := logContainerID(pod.Name, &status, container, opts.Previous)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	log, ok := n.s.opts.Runtime.LogOf(pod.UID, id)
	if !ok {
		http.Error(w, fmt.Sprintf("failed to get container status %q: container %s not found", id, id), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	_ = log.Read(r.Context(), flushwriter.Wrap(w), opts) // ends when the client goes or the follow ends; the status line is sent
}

// logOptions reads PodLogOptions from the query the apiserver sends, as the kubelet decodes it.
// The kubelet decodes it with legacyscheme's ParameterCodec, whose url.Values conversion for
// PodLogOptions is generated in k8s.io/kubernetes/pkg/apis/core/v1
// (Convert_url_Values_To_v1_PodLogOptions), which this library must not link; client-go's
// scheme.ParameterCodec has no such conversion ("converting (url.Values) to (v1.PodLogOptions):
// unknown conversion"), hence these few fields by hand, tested in TestLogOptions.
func logOptions(q url.Values) (*corev1.PodLogOptions, error) {
	opts := &corev1.PodLogOptions{Container: q.Get("container")}
	var errs []error
	flag := func(name string) bool {
		v, err := strconv.ParseBool(cmp.Or(q.Get(name), "false"))
		errs = append(errs, err)
		return v
	}
	number := func(name string) *int64 {
		if !q.Has(name) {
			return nil
		}
		v, err := strconv.ParseInt(q.Get(name), 10, 64)
		errs = append(errs, err)
		return &v
	}
	opts.Follow, opts.Previous, opts.Timestamps = flag("follow"), flag("previous"), flag("timestamps")
	opts.TailLines, opts.SinceSeconds, opts.LimitBytes = number("tailLines"), number("sinceSeconds"), number("limitBytes")
	if q.Has("sinceTime") {
		t, err := time.Parse(time.RFC3339, q.Get("sinceTime"))
		errs = append(errs, err)
		opts.SinceTime = &metav1.Time{Time: t}
	}
	if q.Has("stream") {
		opts.Stream = ptr.To(q.Get("stream"))
	}
	return opts, errors.Join(errs...)
}

func hasContainer(pod *corev1.Pod, name string) bool {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if c.Name == name {
				return true
			}
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// logContainerID picks the instance whose log is read from the container's status, as the
// kubelet's validateContainerLogStatus does, with its messages.
func logContainerID(podName string, status *corev1.PodStatus, name string, previous bool) (string, error) {
	var cs *corev1.ContainerStatus
	for _, list := range [][]corev1.ContainerStatus{status.ContainerStatuses, status.InitContainerStatuses, status.EphemeralContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				cs = &list[i]
			}
		}
	}
	if cs == nil {
		return "", fmt.Errorf("container %q in pod %q is not available", name, podName)
	}
	last := cs.LastTerminationState.Terminated
	switch st := cs.State; {
	case previous:
		if last == nil || last.ContainerID == "" {
			return "", fmt.Errorf("previous terminated container %q in pod %q not found", name, podName)
		}
		return last.ContainerID, nil
	case st.Running != nil:
		return cs.ContainerID, nil
	case st.Terminated != nil:
		if st.Terminated.ContainerID != "" {
			return st.Terminated.ContainerID, nil
		}
		if last != nil && last.ContainerID != "" {
			return last.ContainerID, nil
		}
		return "", fmt.Errorf("container %q in pod %q is terminated", name, podName)
	case last != nil:
		if last.ContainerID == "" {
			return "", fmt.Errorf("container %q in pod %q is terminated", name, podName)
		}
		return last.ContainerID, nil
	case st.Waiting != nil:
		switch st.Waiting.Reason {
		case "ErrImagePull":
			return "", fmt.Errorf("container %q in pod %q is waiting to start: image can't be pulled", name, podName)
		case "ImagePullBackOff":
			return "", fmt.Errorf("container %q in pod %q is waiting to start: trying and failing to pull image", name, podName)
		}
		return "", fmt.Errorf("container %q in pod %q is waiting to start: %v", name, podName, st.Waiting.Reason)
	}
	return "", fmt.Errorf("container %q in pod %q is waiting to start - no logs yet", name, podName)
}

func (n *nodeAPI) exec(w http.ResponseWriter, r *http.Request) {
	pod, ok := n.target(w, r)
	if !ok {
		return
	}
	argv := r.URL.Query()[corev1.ExecCommandParam]
	serveCommand(w, r, n.s.opts, func(ctx context.Context, s runtime.Streams) (int, error) {
		return n.s.opts.Runtime.ExecStream(ctx, pod.UID, r.PathValue("container"), argv, s)
	})
}

func (n *nodeAPI) attach(w http.ResponseWriter, r *http.Request) {
	pod, ok := n.target(w, r)
	if !ok {
		return
	}
	serveCommand(w, r, n.s.opts, func(ctx context.Context, s runtime.Streams) (int, error) {
		return 0, n.s.opts.Runtime.Attach(ctx, pod.UID, r.PathValue("container"), s)
	})
}

func (n *nodeAPI) portForward(w http.ResponseWriter, r *http.Request) {
	pod, ok := n.target(w, r)
	if !ok {
		return
	}
	servePortForward(w, r, n.s.opts.StreamIdleTimeout, pod.Namespace+"/"+pod.Name, func(ctx context.Context, port int32, stream io.ReadWriteCloser) error {
		return n.s.opts.Runtime.PortForward(ctx, pod.UID, port, stream)
	})
}

// run runs the cmd query parameter in the container and returns its combined output, as the
// kubelet's /run does.
func (n *nodeAPI) run(w http.ResponseWriter, r *http.Request) {
	pod, ok := n.target(w, r)
	if !ok {
		return
	}
	cmd := strings.Fields(r.URL.Query().Get("cmd"))
	if len(cmd) == 0 {
		http.Error(w, `{"message": "Missing command."}`, http.StatusBadRequest)
		return
	}
	var out strings.Builder
	if _, err := n.s.opts.Runtime.ExecStream(r.Context(), pod.UID, r.PathValue("container"), cmd, runtime.Streams{Stdout: &out, Stderr: &out}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = io.WriteString(w, out.String()) // the status line is written: a failed body write has no one to tell
}
