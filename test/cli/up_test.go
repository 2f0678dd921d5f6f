// Package cli drives the restartbed binary as a user does: built from source, run as a process,
// reached with a real kubectl and stopped with a signal.
package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/restartbed/restartbed/test/restartbedbin"
	"github.com/restartbed/restartbed/test/specs"
)

// kubectl is the kubectl the test drives: Debian's, which hack/debian-kubectl.sh unpacks into the
// user cache the first time (or $KUBECTL, which the script prints when it is set).
func kubectl(t *testing.T) string {
	out, err := exec.Command("../../hack/debian-kubectl.sh").Output()
	if err != nil {
		var stderr []byte
		if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
			stderr = exit.Stderr
		}
		t.Fatalf("getting Debian's kubectl: %v\n%s", err, stderr)
	}
	return strings.TrimSpace(string(out))
}

func TestMain(m *testing.M) {
	// envtest's clusters (shardloss_test.go) start controller-runtime's, which logs through its
	// global logger: set once, to nowhere.
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	restartbedbin.Remove()
	os.Exit(code)
}

// buildCLI builds cmd/restartbed, once for all the tests, and returns its path.
func buildCLI(t testing.TB) string { return restartbedbin.Path(t) }

// TestUpServesKubectlUntilInterrupted starts `restartbed up`, uses the kubeconfig it writes with
// kubectl (nodes, a JobSet restarting in place, its pods and status), interrupts it like Ctrl-C
// and checks that the cluster and the kubeconfig are gone.
func TestUpServesKubectlUntilInterrupted(t *testing.T) {
	k := kubectl(t)
	bin := buildCLI(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")

	up := startProcess(t, exec.Command(bin, "up", "--nodes", "2", "--timing", "fast", "--kubeconfig", kubeconfig, "--crds", "testdata/crds"))
	out := up.out
	saved, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatalf("up said it was up but wrote no kubeconfig: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "export KUBECONFIG="+kubeconfig) {
		t.Errorf("up's instructions do not name the kubeconfig:\n%s", out.String())
	}
	run, must, eventually := kubectlFuncs(t, k, kubeconfig)

	if got := must("get", "nodes", "-o", "name"); got != "node/node-0\nnode/node-1" {
		t.Fatalf("kubectl get nodes: %q", got)
	}
	eventually("nodes Ready", func() bool {
		s, _ := run("get", "nodes", "-o", `jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}`)
		return s == "True True"
	})
	must("apply", "-f", "../../config/agent/rbac.yaml", "-f", "../../config/agent/policy.yaml")
	must("apply", "-f", "../../config/samples/jobset-in-place-restart.yaml")
	eventually("both pods ready", func() bool {
		s, _ := run("get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=kubectl-check",
			"-o", `jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}`)
		return s == "True True"
	})
	// Every agent reported attempt 0 and the controller lifted the barrier.
	if got := must("get", "jobset", "kubectl-check", "-o", "jsonpath={.status.currentInPlaceRestartAttempt}"); got != "0" {
		t.Errorf("currentInPlaceRestartAttempt = %q, want 0", got)
	}

	kubeletAPI(t, k, kubeconfig, run, must, eventually)
	ownedByACustomResource(t, out, run, must)
	imagesAsOnANode(run, must, eventually)

	up.interrupt(t, syscall.SIGINT)
	if _, err := os.Stat(kubeconfig); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the kubeconfig is still there after up stopped (%v)", err)
	}
	// The apiserver is gone: the saved credentials reach nothing.
	stale := filepath.Join(dir, "stale-kubeconfig")
	if err := os.WriteFile(stale, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	probe := exec.Command(k, "--kubeconfig", stale, "--request-timeout", "5s", "get", "nodes")
	if b, err := probe.CombinedOutput(); err == nil {
		t.Errorf("the apiserver still answers after up stopped:\n%s", b)
	}
}

// imagesAsOnANode checks that up's containers run their image's default command (busybox's sh
// exits at once) and that an image whose registry never resolves fails to pull, with its events.
func imagesAsOnANode(run func(args ...string) (string, error), must func(args ...string) string, eventually func(what string, cond func() bool)) {
	must("create", "namespace", "images")
	must("-n", "images", "run", "sh", "--image=busybox:1.36", "--restart=Never")
	eventually("busybox without a command completes", func() bool {
		s, _ := run("-n", "images", "get", "pod", "sh", "-o", "jsonpath={.status.phase}")
		return s == "Succeeded"
	})
	must("-n", "images", "run", "unpullable", "--image=registry.invalid/team/app:v1", "--restart=Never")
	eventually("the unpullable image backs off", func() bool {
		s, _ := run("-n", "images", "get", "pod", "unpullable", "-o", "jsonpath={.status.containerStatuses[0].state.waiting.reason}")
		return s == "ImagePullBackOff"
	})
	eventually("the pull's events", func() bool {
		s, _ := run("-n", "images", "get", "events", "--field-selector", "involvedObject.name=unpullable", "-o", "jsonpath={.items[*].reason}")
		return strings.Contains(s, "Pulling") && strings.Contains(s, "Failed") && strings.Contains(s, "BackOff")
	})
}

// ownedByACustomResource checks that --crds installed the project's CRD before the
// controller-manager started: its garbage collector knows the kind from the start, so a
// ConfigMap owned by a Widget goes as soon as the collector's graph sees the Widget's deletion
// (an informer's event and one pass of a worker: well under a second when idle). A kind the
// collector learns of later is watched only after its next discovery resync, every 30 seconds
// (kube-controller-manager's garbage collector), so the ConfigMap would outlive the Widget by
// up to 30 s. The bound, half that resync, tells the two apart, and leaves a loaded machine
// fifteen seconds for an event and a pass.
func ownedByACustomResource(t *testing.T, out *specs.SyncBuffer, run func(...string) (string, error), must func(...string) string) {
	t.Helper()
	if !strings.Contains(out.String(), "CRDs:          1 installed before the controller-manager started") {
		t.Errorf("up does not say it installed the CRD:\n%s", out.String())
	}
	must("create", "namespace", "owners")
	must("-n", "owners", "apply", "-f", "testdata/widget.yaml")
	uid := must("-n", "owners", "get", "widget", "w", "-o", "jsonpath={.metadata.uid}")
	must("-n", "owners", "create", "configmap", "owned")
	must("-n", "owners", "patch", "configmap", "owned", "--type=merge", "-p",
		fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"example.restartbed.dev/v1","kind":"Widget","name":"w","uid":%q}]}}`, uid))
	must("-n", "owners", "delete", "widget", "w", "--wait=false")
	deleted := time.Now()
	for {
		if _, err := run("-n", "owners", "get", "configmap", "owned"); err != nil && strings.Contains(err.Error(), "NotFound") {
			break
		}
		if time.Since(deleted) > 15*time.Second {
			t.Fatal("the Widget's ConfigMap outlived it by 15 s: the garbage collector did not know the kind")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// process is a restartbed command running in the background.
type process struct {
	cmd    *exec.Cmd
	out    *specs.SyncBuffer
	exited chan error
}

// startProcess starts cmd and waits until it says it is up ("Press Ctrl-C"); the test's cleanup
// kills it if it still runs.
func startProcess(t *testing.T, cmd *exec.Cmd) *process {
	t.Helper()
	p := &process{cmd: cmd, out: &specs.SyncBuffer{}, exited: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.exited //nolint:errcheck // killed: its exit status says only that
		}
	})
	// The control plane may be built on first use (make test builds it before the tests).
	deadline := time.Now().Add(8 * time.Minute)
	for !strings.Contains(p.out.String(), "Press Ctrl-C") {
		select {
		case err := <-p.exited:
			t.Fatalf("%s exited early (%v):\n%s", strings.Join(cmd.Args, " "), err, p.out.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not come up:\n%s", strings.Join(cmd.Args, " "), p.out.String())
		}
	}
	return p
}

// interrupt signals the process as Ctrl-C or a pod's termination does and waits for it to exit 0.
func (p *process) interrupt(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("%s exited with %v after %v:\n%s", p.cmd.Args[1], err, sig, p.out.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s still running 2m after %v:\n%s", p.cmd.Args[1], sig, p.out.String())
	}
}

// kubectlFuncs run kubectl k on the kubeconfig: run returns its output, must fails the test on
// an error, eventually polls a condition for a minute.
func kubectlFuncs(t *testing.T, k, kubeconfig string) (run func(...string) (string, error), must func(...string) string, eventually func(string, func() bool)) {
	run = func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, k, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err != nil {
			err = errors.New(err.Error() + ": " + stderr.String())
		}
		return strings.TrimSpace(stdout.String()), err
	}
	must = func(args ...string) string {
		t.Helper()
		s, err := run(args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
		}
		return s
	}
	eventually = func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(60 * time.Second); !ok(); time.Sleep(500 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: not after 60s; pods:\n%s", what, must("get", "pods", "-o", "wide"))
			}
		}
	}
	return run, must, eventually
}

// talker's first instance prints first-run and fails; the second reads its ConfigMap through env
// and a volume, then ticks.
const talker = `apiVersion: v1
kind: Pod
metadata: {name: talker}
spec:
  restartPolicy: Always
  volumes:
  - {name: state, emptyDir: {}}
  - {name: config, configMap: {name: greeting}}
  containers:
  - name: main
    image: busybox
    env:
    - name: GREETING
      valueFrom: {configMapKeyRef: {name: greeting, key: text}}
    volumeMounts:
    - {name: state, mountPath: /state}
    - {name: config, mountPath: /config}
    command: [sh, -c, 'if [ ! -f /state/ran ]; then touch /state/ran; echo first-run; exit 1; fi;
      echo "env=$GREETING file=$(cat /config/text)"; i=0; while true; do echo tick-$i; i=$((i+1)); sleep 0.2; done']
---
apiVersion: v1
kind: Pod
metadata: {name: server}
spec:
  containers:
  - name: main
    image: busybox
    command: [sh, -c, 'while true; do printf "HTTP/1.0 200 OK\\r\\n\\r\\nserved by the pod\\n" | nc -l -p 8080; done']
`

// kubeletAPI drives kubectl logs [-p] [-f], exec (-it through a terminal), port-forward and a
// ConfigMap's references against `restartbed up`.
func kubeletAPI(t *testing.T, k, kubeconfig string, run func(...string) (string, error), must func(...string) string,
	eventually func(string, func() bool)) {
	t.Helper()
	must("create", "configmap", "greeting", "--from-literal=text=hello")
	apply := exec.Command(k, "--kubeconfig", kubeconfig, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(talker)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	eventually("talker restarted and running", func() bool {
		s, _ := run("logs", "talker")
		return strings.Contains(s, "tick-1")
	})
	logs := must("logs", "talker")
	if !strings.HasPrefix(logs, "env=hello file=hello\ntick-0\n") {
		t.Errorf("kubectl logs talker:\n%s", logs)
	}
	if got := must("logs", "-p", "talker"); got != "first-run" {
		t.Errorf("kubectl logs -p talker: %q, want first-run", got)
	}
	if got := must("logs", "--tail=1", "server"); got != "" {
		t.Errorf("kubectl logs --tail=1 server: %q, want nothing", got)
	}

	// -f goes on as the container writes.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	follow := exec.CommandContext(ctx, k, "--kubeconfig", kubeconfig, "logs", "-f", "--tail=1", "talker")
	stdout, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	var followed []string
	for len(followed) < 5 && lines.Scan() {
		followed = append(followed, lines.Text())
	}
	_ = follow.Process.Kill()
	_ = follow.Wait()
	if len(followed) < 5 || !strings.HasPrefix(followed[4], "tick-") {
		t.Errorf("kubectl logs -f printed %q, want 5 ticks as they came", followed)
	}

	out, err := exec.Command(k, "--kubeconfig", kubeconfig, "exec", "talker", "--", "sh", "-c", "echo $GREETING; cat /config/text; exit 4").Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 4 || string(out) != "hello\nhello" {
		t.Errorf("kubectl exec: %q, %v; want hello twice and exit code 4", out, err)
	}

	// exec -it: a shell on a terminal, typed into.
	shell := exec.Command(k, "--kubeconfig", kubeconfig, "exec", "-it", "talker", "--", "sh")
	term, err := startOnTerminal(shell)
	if err != nil {
		t.Fatalf("a terminal for kubectl exec -it: %v", err)
	}
	defer term.Close()
	var screen specs.SyncBuffer
	go func() { _, _ = io.Copy(&screen, term) }()
	waitFor := func(what string) {
		t.Helper()
		for end := time.Now().Add(30 * time.Second); !strings.Contains(screen.String(), what); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("kubectl exec -it: no %q on the terminal:\n%q", what, screen.String())
			}
		}
	}
	waitFor("/ # ")
	_, _ = io.WriteString(term, "echo $((6 * 7)) $GREETING\r")
	waitFor("42 hello")
	_, _ = io.WriteString(term, "exit 3\r")
	shellDone := make(chan error, 1)
	go func() { shellDone <- shell.Wait() }()
	select {
	case err := <-shellDone:
		if !errors.As(err, &exit) || exit.ExitCode() != 3 {
			t.Errorf("kubectl exec -it ... sh ended with %v, want exit code 3", err)
		}
	case <-time.After(30 * time.Second):
		_ = shell.Process.Kill()
		t.Errorf("kubectl exec -it did not end after exit:\n%q", screen.String())
	}

	// port-forward to the pod's server.
	eventually("server running", func() bool {
		s, _ := run("get", "pod", "server", "-o", "jsonpath={.status.phase}")
		return s == "Running"
	})
	pf := exec.Command(k, "--kubeconfig", kubeconfig, "port-forward", "pod/server", ":8080")
	pfOut, err := pf.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pf.Process.Kill(); _ = pf.Wait() }()
	forwarding := bufio.NewScanner(pfOut)
	var local string
	for forwarding.Scan() {
		// Forwarding from 127.0.0.1:PORT -> 8080
		if f := strings.Fields(forwarding.Text()); len(f) >= 3 && strings.HasPrefix(f[2], "127.0.0.1:") {
			local = f[2]
			break
		}
	}
	if local == "" {
		t.Fatal("kubectl port-forward named no local port")
	}
	go func() { _, _ = io.Copy(io.Discard, pfOut) }()
	resp, err := http.Get("http://" + local + "/")
	if err != nil {
		t.Fatalf("GET through kubectl port-forward: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "served by the pod\n" {
		t.Errorf("through kubectl port-forward: %q", body)
	}
}
