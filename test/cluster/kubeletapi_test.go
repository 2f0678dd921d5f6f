package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/utils/exec"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/test/builders"
	"github.com/restartbed/restartbed/test/specs"
)

// What kubectl logs, exec, attach and port-forward use: the apiserver reaches the node's kubelet
// API through its egress to the pod network.
var _ = Describe("the kubelet API", Label("kubelet-api"), func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = specs.NewNamespace(ctx, cluster) })

	// logs reads as kubectl logs reads.
	logs := func(ctx context.Context, pod string, opts *corev1.PodLogOptions) (string, error) {
		stream, err := cluster.Clientset.CoreV1().Pods(ns).GetLogs(pod, opts).Stream(ctx)
		if err != nil {
			return "", err
		}
		defer stream.Close()
		b, err := io.ReadAll(stream)
		return string(b), err
	}

	It("serves a container's log with tail, timestamps and a stream, and the previous instance's", func(ctx context.Context) {
		talker := builders.MakePod("talker", ns).Container(builders.MakeContainer("main").
			Shell("for i in 1 2 3; do echo line-$i; done; echo oops >&2; echo fd1 > /proc/1/fd/1; sleep 3600").Obj()).Obj()
		Expect(k8s.Create(ctx, talker)).To(Succeed())
		waitRunning(ctx, talker)
		Eventually(logs).WithContext(ctx).WithArguments("talker", &corev1.PodLogOptions{}).
			WithTimeout(Timeout).WithPolling(Interval).Should(Equal("line-1\nline-2\nline-3\noops\nfd1\n"))
		Expect(logs(ctx, "talker", &corev1.PodLogOptions{TailLines: ptr.To[int64](2)})).To(Equal("oops\nfd1\n"))
		Expect(logs(ctx, "talker", &corev1.PodLogOptions{TailLines: ptr.To[int64](1), Timestamps: true})).
			To(MatchRegexp(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z fd1\n$`))
		Expect(logs(ctx, "talker", &corev1.PodLogOptions{LimitBytes: ptr.To[int64](8)})).To(Equal("line-1\nl"))
		_, err := logs(ctx, "talker", &corev1.PodLogOptions{Previous: true})
		Expect(err).To(MatchError(ContainSubstring(`previous terminated container "main" in pod "talker" not found`)))

		By("after a restart, the previous instance's log")
		crasher := builders.MakePod("crasher", ns).RestartPolicy(corev1.RestartPolicyAlways).EmptyDir("data").Container(builders.MakeContainer("main").Mount("data", "/data").
			Shell("if [ -f /data/x ]; then echo second; sleep 3600; fi; echo first; touch /data/x; exit 1").Obj()).Obj()
		Expect(k8s.Create(ctx, crasher)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(logs(ctx, "crasher", &corev1.PodLogOptions{})).To(Equal("second\n"))
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed())
		Expect(logs(ctx, "crasher", &corev1.PodLogOptions{Previous: true})).To(Equal("first\n"))
	})

	It("follows a log as it is written", func(ctx context.Context) {
		pod := builders.MakePod("ticker", ns).Container(builders.MakeContainer("main").
			Shell("i=0; while true; do echo tick-$i; i=$((i+1)); sleep 0.1; done").Obj()).Obj()
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		waitRunning(ctx, pod)
		followCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := cluster.Clientset.CoreV1().Pods(ns).GetLogs("ticker", &corev1.PodLogOptions{Follow: true}).Stream(followCtx)
		Expect(err).NotTo(HaveOccurred())
		defer stream.Close()
		lines := bufio.NewScanner(stream)
		var seen []string
		for len(seen) < 12 && lines.Scan() {
			seen = append(seen, lines.Text())
		}
		Expect(seen).To(HaveLen(12))
		Expect(seen[11]).To(Equal("tick-11"), "the follower saw %v", seen)
	})

	It("runs a command with kubectl exec's streams, its exit code and a terminal", func(ctx context.Context) {
		pod := builders.MakePod("shell", ns).Container(builders.MakeContainer("main").Shell("echo ready > /tmp/state; sleep 3600").Obj()).Obj()
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		waitRunning(ctx, pod)

		var stdout, stderr bytes.Buffer
		err := execIn(ctx, ns, "shell", []string{"sh", "-c", "cat /tmp/state; read line; echo got-$line; echo bad >&2; exit 3"},
			strings.NewReader("hello\n"), &stdout, &stderr, false)
		var exit utilexec.ExitError
		Expect(errors.As(err, &exit)).To(BeTrue(), "want an exit error, got %v (stdout %q, stderr %q)", err, stdout.String(), stderr.String())
		Expect(exit.ExitStatus()).To(Equal(3))
		Expect(stdout.String()).To(Equal("ready\ngot-hello\n"))
		Expect(stderr.String()).To(Equal("bad\n"))

		By("an interactive shell on a terminal")
		stdout.Reset()
		Expect(execIn(ctx, ns, "shell", []string{"sh"}, strings.NewReader("echo $((6 * 7))\rexit\r"), &stdout, nil, true)).To(Succeed())
		// The terminal echoes what is typed when it arrives, so "exit" may show before 42.
		Expect(stdout.String()).To(And(HavePrefix("/ # echo $((6 * 7))\r\n"), ContainSubstring("\r\n42\r\n")))
	})

	It("attaches to a container's main process, its stdin and its output", func(ctx context.Context) {
		c := builders.MakeContainer("main").Obj()
		c.Command, c.Stdin = []string{"sh"}, true
		pod := builders.MakePod("attached", ns).Container(c).Obj()
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		waitRunning(ctx, pod)
		req := cluster.Clientset.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name("attached").SubResource("attach").
			VersionedParams(&corev1.PodAttachOptions{Container: "main", Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec)
		attach, err := remotecommand.NewSPDYExecutor(cluster.Config, http.MethodPost, req.URL())
		Expect(err).NotTo(HaveOccurred())
		stdinR, stdinW := io.Pipe()
		var stdout, stderr specs.SyncBuffer
		done := make(chan error, 1)
		go func() {
			done <- attach.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdinR, Stdout: &stdout, Stderr: &stderr})
		}()
		Eventually(func() string {
			_, _ = io.WriteString(stdinW, "echo attached-$((1 + 1)); echo to-stderr >&2\n")
			return stdout.String()
		}).WithTimeout(Timeout).WithPolling(Interval).Should(ContainSubstring("attached-2\n"))
		Eventually(stderr.String).WithTimeout(Timeout).Should(ContainSubstring("to-stderr\n"))
		_, _ = io.WriteString(stdinW, "exit 0\n")
		Eventually(done).WithTimeout(Timeout).Should(Receive(BeNil()))
	})

	It("forwards a port of the pod, and proxies HTTP to it", func(ctx context.Context) {
		pod := builders.MakePod("server", ns).Container(builders.MakeContainer("main").
			Shell(`while true; do printf 'HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhello from the pod\n' | nc -l -p 8080; done`).Obj()).Obj()
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		waitRunning(ctx, pod)

		url := cluster.Clientset.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name("server").SubResource("portforward").URL()
		transport, upgrader, err := spdy.RoundTripperFor(cluster.Config)
		Expect(err).NotTo(HaveOccurred())
		dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
		stop, ready := make(chan struct{}), make(chan struct{})
		defer close(stop)
		fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:8080"}, stop, ready, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		go func() { _ = fw.ForwardPorts() }()
		Eventually(ready).WithTimeout(Timeout).Should(BeClosed())
		ports, err := fw.GetPorts()
		Expect(err).NotTo(HaveOccurred())
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", ports[0].Local))
		Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		Expect(string(body)).To(Equal("hello from the pod\n"))

		By("the pods proxy subresource")
		Eventually(func() (string, error) {
			b, err := cluster.Clientset.CoreV1().Pods(ns).ProxyGet("http", "server", "8080", "/", nil).DoRaw(ctx)
			return string(b), err
		}).WithContext(ctx).WithTimeout(Timeout).WithPolling(Interval).Should(Equal("hello from the pod\n"))
	})

	It("serves /pods, /healthz and /configz through the nodes proxy", func(ctx context.Context) {
		pod := builders.MakePod("listed", ns).Container(builders.MakeContainer("main").Obj()).Obj()
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		pod = waitRunning(ctx, pod)
		node := cluster.Clientset.CoreV1().RESTClient().Get().Resource("nodes").Name(pod.Spec.NodeName).SubResource("proxy")
		healthz, err := node.Suffix("healthz").DoRaw(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(healthz)).To(Equal("ok"))
		var list corev1.PodList
		raw, err := cluster.Clientset.CoreV1().RESTClient().Get().Resource("nodes").Name(pod.Spec.NodeName).SubResource("proxy").Suffix("pods").DoRaw(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(json.Unmarshal(raw, &list)).To(Succeed())
		Expect(list.Items).To(ContainElement(HaveField("ObjectMeta.Name", "listed")))
		configz, err := cluster.Clientset.CoreV1().RESTClient().Get().Resource("nodes").Name(pod.Spec.NodeName).SubResource("proxy").Suffix("configz").DoRaw(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(configz)).To(And(ContainSubstring(`"kubeletconfig"`), ContainSubstring(`"containerLogMaxFiles":5`)))
	})

	It("authenticates and authorizes its callers as a kubelet does", func(ctx context.Context) {
		pod := builders.MakePod("guarded", ns).Container(builders.MakeContainer("main").Obj()).Obj()
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		pod = waitRunning(ctx, pod)
		var node corev1.Node
		Expect(k8s.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, &node)).To(Succeed())
		Expect(node.Status.DaemonEndpoints.KubeletEndpoint.Port).To(Equal(int32(10250)))
		addr := fmt.Sprintf("%s:%d", node.Status.Addresses[0].Address, node.Status.DaemonEndpoints.KubeletEndpoint.Port)

		ca, err := os.ReadFile(filepath.Join(cluster.Dir(), "kubelet-ca.crt"))
		Expect(err).NotTo(HaveOccurred())
		pool := x509.NewCertPool()
		Expect(pool.AppendCertsFromPEM(ca)).To(BeTrue())
		call := func(certs []tls.Certificate, token string) (int, string) {
			client := &http.Client{Transport: &http.Transport{
				DialContext: func(ctx context.Context, _, address string) (net.Conn, error) {
					return cluster.Kubelet.Dial(ctx, address)
				},
				TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs, MinVersion: tls.VersionTLS12},
			}}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/pods", nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := client.Do(req)
			Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		code, _ := call(nil, "")
		Expect(code).To(Equal(http.StatusUnauthorized))

		tr, err := cluster.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		code, body := call(nil, tr.Status.Token)
		Expect(code).To(Equal(http.StatusForbidden))
		Expect(body).To(ContainSubstring(fmt.Sprintf("Forbidden (user=system:serviceaccount:%s:default, verb=get, resource=nodes, subresource(s)=[pods proxy])", ns)))

		admin, err := tls.X509KeyPair(cluster.Config.CertData, cluster.Config.KeyData)
		Expect(err).NotTo(HaveOccurred())
		code, body = call([]tls.Certificate{admin}, "")
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(body).To(ContainSubstring(`"name":"guarded"`))
	})
})

// execIn runs argv in the pod's first container through the apiserver, as kubectl exec does.
func execIn(ctx context.Context, ns, pod string, argv []string, stdin io.Reader, stdout, stderr io.Writer, tty bool) error {
	req := cluster.Clientset.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: argv, Stdin: stdin != nil, Stdout: stdout != nil, Stderr: stderr != nil, TTY: tty},
			scheme.ParameterCodec)
	exec, err := remotecommand.NewSPDYExecutor(cluster.Config, http.MethodPost, req.URL())
	if err != nil {
		return err
	}
	return exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr, Tty: tty})
}
