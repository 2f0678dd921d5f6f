// Package hostbinaries is the envtest suite of host binaries as containers (docs/host-binaries.md):
// the emulated kubelet running a host executable as a container's process, on a real control
// plane. It needs root; CI sets RESTARTBED_REQUIRE_HOST_BINARIES so that it never skips there.
package hostbinaries

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/hostproc"
	"github.com/restartbed/restartbed/fakekubelet/program"
)

const timeout = 2 * time.Minute

// web serves its pod's name on 8080, in the process: what the binaries reach.
var web = program.Func(func(ctx context.Context, c *program.Container) int {
	c.Serve(8080, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "hello from "+c.Pod.Name) }))
	<-ctx.Done()
	return 0
})

func startCluster(t *testing.T) *envtest.Cluster {
	t.Helper()
	ctrllog.SetLogger(logr.Discard())
	if err := hostproc.Check(); err != nil {
		if os.Getenv("RESTARTBED_REQUIRE_HOST_BINARIES") != "" {
			t.Fatalf("RESTARTBED_REQUIRE_HOST_BINARIES is set and this host cannot run host binaries: %v", err)
		}
		t.Skipf("this host cannot run host binaries: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, err := envtest.Start(ctx, envtest.Options{
		Nodes:             []fakekubelet.NodePool{{Name: "node", Count: 2}},
		AllowHostBinaries: true,
		// The host's bash (essential on Debian, like getent and coreutils) stands in for the app
		// containers' image entrypoint.
		Programs: []program.Rule{{Container: "web", Program: web}, {Container: "app", Binary: "/bin/bash"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
	})
	return cluster
}

func TestHostBinaryContainers(t *testing.T) {
	cluster := startCluster(t)
	ctx := context.Background()
	cs := cluster.Clientset
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "binaries"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitForDefaultServiceAccount(ctx, ns.Name); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	create := func(obj any) {
		t.Helper()
		var err error
		switch o := obj.(type) {
		case *corev1.Pod:
			_, err = cs.CoreV1().Pods(ns.Name).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Service:
			_, err = cs.CoreV1().Services(ns.Name).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web"}}}})
	create(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}})
	// The client below does not retry: the Service must have its ready endpoint first.
	waitFor(t, "the web Service's endpoint to be ready", func() (bool, string) {
		slices, err := cs.DiscoveryV1().EndpointSlices(ns.Name).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil {
			return false, err.Error()
		}
		for _, es := range slices.Items {
			for _, ep := range es.Endpoints {
				if ptr.Deref(ep.Conditions.Ready, false) {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%d slices", len(slices.Items))
	})

	// A binary that resolves the Service by its short name, reads it, writes the answer as its
	// termination message, prints its service account's namespace and exits 3.
	script := `set -e
getent hosts web >/dev/null
exec 3<>/dev/tcp/web/80
printf 'GET / HTTP/1.0\r\nHost: web\r\n\r\n' >&3
tail -n 1 <&3 > /dev/termination-log
cat /var/run/secrets/kubernetes.io/serviceaccount/namespace
echo " $GREETING from $(hostname)"
exit 3`
	create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client"}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "app", Image: "busybox", Command: []string{"sh", "-c", script},
			Env: []corev1.EnvVar{{Name: "GREETING", Value: "hello"}}}}}})

	// A binary that becomes ready by an exec probe and stops at SIGTERM.
	create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ready"}, Spec: corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To[int64](30),
		Containers: []corev1.Container{{Name: "app", Image: "busybox",
			Command: []string{"sh", "-c", "trap 'exit 42' TERM; touch /tmp/ready; while true; do sleep 0.1; done"},
			ReadinessProbe: &corev1.Probe{PeriodSeconds: 1,
				ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/ready"}}}}}}}})

	waitFor(t, "the client to exit 3 with the web pod's answer as its message", func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns.Name).Get(ctx, "client", metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, fmt.Sprint(err)
		}
		st := p.Status.ContainerStatuses[0].State
		return st.Terminated != nil && st.Terminated.ExitCode == 3 && st.Terminated.Message == "hello from web" &&
			p.Status.Phase == corev1.PodFailed, fmt.Sprintf("%+v", st)
	})
	logs, err := cs.CoreV1().Pods(ns.Name).GetLogs("client", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil || string(logs) != "binaries hello from client\n" {
		t.Errorf("client's log %q (%v)", logs, err)
	}

	waitFor(t, "the ready pod to be Ready through its exec probe", func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns.Name).Get(ctx, "ready", metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, fmt.Sprint(err)
		}
		return p.Status.ContainerStatuses[0].Ready, fmt.Sprintf("%+v", p.Status.ContainerStatuses[0])
	})
	if err := cs.CoreV1().Pods(ns.Name).Delete(ctx, "ready", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the ready pod to stop by its SIGTERM trap and go", func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns.Name).Get(ctx, "ready", metav1.GetOptions{})
		if err != nil {
			return strings.Contains(err.Error(), "not found"), err.Error()
		}
		return false, fmt.Sprintf("%+v", p.Status.ContainerStatuses)
	})
}

func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, state := cond()
		last = state
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last: %s", what, err, last)
	}
}

// A partitioned node's binaries lose the apiserver with it, as its in-process programs do: the
// open connection is cut, new ones are closed at once; they come back when the node does.
func TestPartitionCutsBinariesOffTheAPIServer(t *testing.T) {
	cluster := startCluster(t)
	ctx := context.Background()
	cs := cluster.Clientset
	if err := cluster.WaitForDefaultServiceAccount(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	// Holds a connection to the apiserver's Service address and says when it breaks; reconnects.
	script := `while true; do
  if exec 3<>/dev/tcp/$KUBERNETES_SERVICE_HOST/$KUBERNETES_SERVICE_PORT 2>/dev/null; then
    echo up
    cat <&3 >/dev/null
    echo cut
  fi
  sleep 0.2
done`
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "watcher"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "busybox", Command: []string{"sh", "-c", script}}}}}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	logs := func() string {
		b, _ := cs.CoreV1().Pods("default").GetLogs("watcher", &corev1.PodLogOptions{}).DoRaw(ctx)
		return string(b)
	}
	waitFor(t, "the binary to connect", func() (bool, string) { return strings.Count(logs(), "up") == 1, logs() })
	p, err := cs.CoreV1().Pods("default").Get(ctx, "watcher", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node := p.Spec.NodeName
	if err := cluster.Kubelet.FailNode(node); err != nil {
		t.Fatal(err)
	}
	// The log cannot be read while the node is cut off: the kubelet API is behind the partition.
	time.Sleep(2 * time.Second)
	if err := cluster.Kubelet.RecoverNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the connection cut by the partition, and a new one after it", func() (bool, string) {
		l := logs()
		return strings.HasPrefix(l, "up\ncut\n") && strings.HasSuffix(l, "up\n") && !strings.Contains(l, "up\nup"), l
	})
}
