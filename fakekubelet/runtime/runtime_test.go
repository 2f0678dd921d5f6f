package runtime

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/fakekubelet/container"
	"github.com/restartbed/restartbed/fakekubelet/network"
	"github.com/restartbed/restartbed/fakekubelet/network/networktest"
	"github.com/restartbed/restartbed/fakekubelet/program"
	"github.com/restartbed/restartbed/fakekubelet/token"
	"github.com/restartbed/restartbed/internal/clocktest"
)

type harness struct {
	rt     *Runtime
	clock  *clocktesting.FakeClock
	events chan types.UID
}

func newHarness(t *testing.T, rules ...program.Rule) *harness {
	t.Helper()
	h := &harness{clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), events: make(chan types.UID, 100)}
	reg, err := program.NewRegistry(rules, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	h.rt, err = New(Options{Clock: h.clock, Programs: reg, Notify: func(uid types.UID) { h.events <- uid }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.rt.KillAll(); h.rt.Wait() })
	return h
}

// waitExit waits for the runtime to report that the newest instance of the named container of
// the test pod exited (it also reports starts).
func (h *harness) waitExit(t *testing.T, name string) {
	t.Helper()
	for {
		select {
		case uid := <-h.events:
			if ps, _ := h.rt.Status(uid); ps.Latest(name) != nil && ps.Latest(name).State == container.Exited {
				return
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no exit reported")
		}
	}
}

func testPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}, Spec: corev1.PodSpec{
		NodeName: "n-0",
		Volumes:  []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}}
}

func TestExitReasonsAttemptsAndRemoval(t *testing.T) {
	h := newHarness(t)
	pod := testPod()
	mustRunSandbox(t, h.rt, pod, "10.64.0.2")
	c := &corev1.Container{Name: "c", Image: "busybox", Command: []string{"sh", "-c", "exit 3"},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}
	c.Command = []string{"sh", "-c", "echo boom; exit 3"}
	first, err := h.rt.Start(pod, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.waitExit(t, "c")
	ps, _ := h.rt.Status(pod.UID)
	got := ps.Latest("c")
	if got.ID != first.ID || got.State != container.Exited || got.ExitCode != 3 || got.Reason != container.ReasonError || got.Message != "boom\n" {
		t.Fatalf("first instance: %+v", got)
	}
	if got.Image != "docker.io/library/busybox:latest" || !strings.HasPrefix(got.ImageRef, "docker.io/library/busybox@sha256:") {
		t.Errorf("image %q ref %q", got.Image, got.ImageRef)
	}
	second, _ := h.rt.Start(pod, c, nil)
	h.waitExit(t, "c")
	if second.Attempt != 1 {
		t.Errorf("second attempt = %d, want 1", second.Attempt)
	}
	ps, _ = h.rt.Status(pod.UID)
	if prev := ps.Previous("c"); prev == nil || prev.ID != first.ID {
		t.Errorf("previous instance = %+v, want the first", prev)
	}
	for _, inst := range ps.Instances("c") {
		if err := h.rt.Remove(pod.UID, inst.ID); err != nil {
			t.Fatal(err)
		}
	}
	third, _ := h.rt.Start(pod, c, nil)
	h.waitExit(t, "c")
	if third.Attempt != 0 {
		t.Errorf("attempt after removing every instance = %d, want 0", third.Attempt)
	}
}

func TestStopGraceAndFaults(t *testing.T) {
	h := newHarness(t)
	pod := testPod()
	mustRunSandbox(t, h.rt, pod, "10.64.0.2")
	ignoring := &corev1.Container{Name: "sleeper", Command: []string{"sh", "-c", "sleep 3600"}}
	waiters := h.clock.Waiters()
	inst, _ := h.rt.Start(pod, ignoring, nil)
	clocktest.WaitForWaiters(t, h.clock, waiters+1, "the script's sleep")
	h.rt.Stop(pod.UID, inst.ID, 2*time.Second)
	clocktest.WaitForWaiters(t, h.clock, waiters+2, "the stop's grace")
	if ps, _ := h.rt.Status(pod.UID); ps.Latest("sleeper").State != container.Running {
		t.Fatal("the script should still run: PID 1 ignores SIGTERM")
	}
	h.clock.Step(2 * time.Second)
	h.waitExit(t, "sleeper")
	ps, _ := h.rt.Status(pod.UID)
	if s := ps.Latest("sleeper"); s.ExitCode != 137 || s.Reason != container.ReasonError {
		t.Fatalf("after the grace: %+v, want 137 Error", s)
	}

	idle := &corev1.Container{Name: "idle"}
	if _, err := h.rt.Start(pod, idle, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.rt.Exit(pod.UID, "idle", 0, true); err != nil {
		t.Fatal(err)
	}
	h.waitExit(t, "idle")
	ps, _ = h.rt.Status(pod.UID)
	if s := ps.Latest("idle"); s.ExitCode != 137 || s.Reason != container.ReasonOOMKilled {
		t.Fatalf("OOM kill: %+v", s)
	}
	if err := h.rt.Exit(pod.UID, "idle", 1, false); !errors.Is(err, ErrNotRunning) {
		t.Errorf("exit of a stopped container: %v, want ErrNotRunning", err)
	}
}

func TestStartErrorAndVolumes(t *testing.T) {
	h := newHarness(t)
	pod := testPod()
	mustRunSandbox(t, h.rt, pod, "10.64.0.2")
	st, err := h.rt.Start(pod, &corev1.Container{Name: "py", Command: []string{"python3", "x.py"}}, nil)
	if err == nil || st.State != container.Exited || st.ExitCode != 128 || st.Reason != container.ReasonStartError ||
		!strings.Contains(st.Message, `exec: "python3": executable file not found in $PATH`) {
		t.Fatalf("start error: %+v, %v", st, err)
	}
	writer := &corev1.Container{Name: "w", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}
	if _, err := h.rt.Start(pod, writer, nil); err != nil {
		t.Fatal(err)
	}
	code, _, err := h.rt.Exec(context.Background(), pod.UID, "w", []string{"sh", "-c", "echo hi > /data/f; echo own > /tmp/own"})
	if err != nil || code != 0 {
		t.Fatalf("exec: %d %v", code, err)
	}
	reader := &corev1.Container{Name: "r", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/mnt"}}}
	if _, err := h.rt.Start(pod, reader, nil); err != nil {
		t.Fatal(err)
	}
	code, out, _ := h.rt.Exec(context.Background(), pod.UID, "r", []string{"sh", "-c", "cat /mnt/f; test -f /tmp/own || echo no-own"})
	if code != 0 || out != "hi\nno-own\n" {
		t.Fatalf("the other container sees %q (exit %d)", out, code)
	}
	// A volume that cannot be mounted (over the root) fails the start, as runc fails it.
	root := &corev1.Container{Name: "root", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/"}}}
	st, err = h.rt.Start(pod, root, nil)
	if err == nil || st.State != container.Exited || st.ExitCode != 128 || st.Reason != container.ReasonStartError ||
		!strings.Contains(st.Message, `error mounting volume "data" to rootfs at "/"`) {
		t.Fatalf("a mount over the root: %+v, %v; want a start error naming the mount", st, err)
	}
}

// sources are fixed ConfigMaps and Secrets in namespace ns.
type sources struct {
	configMaps map[string]*corev1.ConfigMap
	secrets    map[string]*corev1.Secret
	services   []*corev1.Service
}

func (s sources) Services() ([]*corev1.Service, error) { return s.services, nil }

func (s sources) Token(_ context.Context, pod *corev1.Pod, audience string, expiration int64) (string, error) {
	return fmt.Sprintf("token-%s-%s-%d", pod.Name, audience, expiration), nil
}

func (s sources) ConfigMap(_ context.Context, pod *corev1.Pod, name string) (*corev1.ConfigMap, error) {
	ns := pod.Namespace
	if cm, ok := s.configMaps[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("configmaps"), name)
}

func (s sources) Secret(_ context.Context, pod *corev1.Pod, name string) (*corev1.Secret, error) {
	ns := pod.Namespace
	if sec, ok := s.secrets[ns+"/"+name]; ok {
		return sec, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
}

func TestEnvOf(t *testing.T) {
	pod := testPod()
	pod.Labels = map[string]string{"app": "x"}
	pod.Spec.ServiceAccountName = "agent"
	src := sources{
		configMaps: map[string]*corev1.ConfigMap{"ns/cfg": {Data: map[string]string{"k": "v", "B": "from-cm", "Z": "z"}}},
		secrets:    map[string]*corev1.Secret{"ns/sec": {Data: map[string][]byte{"token": []byte("s3cr3t")}}},
	}
	withServices := src
	withServices.services = []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1", Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-app"}, Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.50", Ports: []corev1.ServicePort{{Port: 80}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "headless"}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "elsewhere"}, Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.60", Ports: []corev1.ServicePort{{Port: 80}}}},
	}
	env := func(name string, from *corev1.EnvVarSource) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: from}
	}
	cmKey := func(name, key string, optional bool) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: ptr.To(optional)}}
	}
	secretKey := func(name, key string, optional bool) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: ptr.To(optional)}}
	}
	field := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	for _, tc := range []struct {
		name     string
		c        corev1.Container
		services bool // the cluster has Services
		want     string
		wantErr  string
	}{
		{name: "literals and the downward API", c: corev1.Container{Env: []corev1.EnvVar{
			{Name: "A", Value: "1"}, {Name: "B", Value: "$(A)-$(MISSING)-$$(A)"},
			env("NS", field("metadata.namespace")), env("APP", field("metadata.labels['app']")),
			env("SA", field("spec.serviceAccountName")), env("IP", field("status.podIP")), env("HOST", field("status.hostIP")),
		}}, want: "A=1 B=1-$(MISSING)-$(A) NS=ns APP=x SA=agent IP=10.64.0.2 HOST=172.16.0.1"},
		{name: "ConfigMap and Secret keys", c: corev1.Container{Env: []corev1.EnvVar{
			env("K", cmKey("cfg", "k", false)), env("T", secretKey("sec", "token", false)), {Name: "BOTH", Value: "$(K)/$(T)"},
		}}, want: "K=v T=s3cr3t BOTH=v/s3cr3t"},
		{name: "envFrom with a prefix, env replaces it", c: corev1.Container{
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
				{Prefix: "S_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}}},
			Env: []corev1.EnvVar{{Name: "B", Value: "mine-$(Z)"}}}, want: "B=mine-z Z=z k=v S_token=s3cr3t"},
		{name: "optional references to what is missing are left out", c: corev1.Container{
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "none"}, Optional: ptr.To(true)}}},
			Env:     []corev1.EnvVar{env("X", cmKey("none", "k", true)), env("Y", cmKey("cfg", "nokey", true)), env("W", secretKey("sec", "nokey", true)), {Name: "Z", Value: "z"}}},
			want: "Z=z"},
		{name: "Services' variables come last; $(VAR) may use them", c: corev1.Container{Env: []corev1.EnvVar{
			{Name: "API", Value: "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"}, {Name: "WEB_SERVICE_HOST", Value: "mine"}}},
			services: true, want: "API=https://10.0.0.1:443 WEB_SERVICE_HOST=mine " +
				"KUBERNETES_PORT=tcp://10.0.0.1:443 KUBERNETES_PORT_443_TCP=tcp://10.0.0.1:443 KUBERNETES_PORT_443_TCP_ADDR=10.0.0.1 " +
				"KUBERNETES_PORT_443_TCP_PORT=443 KUBERNETES_PORT_443_TCP_PROTO=tcp KUBERNETES_SERVICE_HOST=10.0.0.1 KUBERNETES_SERVICE_PORT=443 " +
				"KUBERNETES_SERVICE_PORT_HTTPS=443 WEB_APP_PORT=tcp://10.0.0.50:80 WEB_APP_PORT_80_TCP=tcp://10.0.0.50:80 " +
				"WEB_APP_PORT_80_TCP_ADDR=10.0.0.50 WEB_APP_PORT_80_TCP_PORT=80 WEB_APP_PORT_80_TCP_PROTO=tcp " +
				"WEB_APP_SERVICE_HOST=10.0.0.50 WEB_APP_SERVICE_PORT=80"},
		{name: "a missing ConfigMap", c: corev1.Container{Env: []corev1.EnvVar{env("X", cmKey("none", "k", false))}},
			wantErr: `configmaps "none" not found`},
		{name: "a missing key of a ConfigMap", c: corev1.Container{Env: []corev1.EnvVar{env("X", cmKey("cfg", "nokey", false))}},
			wantErr: "couldn't find key nokey in ConfigMap ns/cfg"},
		{name: "a missing Secret in envFrom", c: corev1.Container{EnvFrom: []corev1.EnvFromSource{
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "none"}}}}},
			wantErr: `secrets "none" not found`},
		{name: "a missing key of a Secret", c: corev1.Container{Env: []corev1.EnvVar{env("X", secretKey("sec", "nokey", false))}},
			wantErr: "couldn't find key nokey in Secret ns/sec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.Name = "c"
			s := src
			if tc.services {
				s = withServices
			}
			got, err := EnvOf(context.Background(), pod, &tc.c, "10.64.0.2", "172.16.0.1", s)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || strings.Join(got, " ") != tc.want {
				t.Fatalf("env %q (%v), want %q", strings.Join(got, " "), err, tc.want)
			}
		})
	}
	pod.Spec.EnableServiceLinks = ptr.To(false)
	got, err := EnvOf(context.Background(), pod, &corev1.Container{Name: "c"}, "10.64.0.2", "172.16.0.1", withServices)
	if joined := strings.Join(got, " "); err != nil || !strings.Contains(joined, "KUBERNETES_SERVICE_HOST=10.0.0.1") || strings.Contains(joined, "WEB_APP") {
		t.Fatalf("without service links: %q (%v), want the kubernetes Service's variables only", joined, err)
	}
}

// A claim is one volume for every pod that mounts it, on any node, and it outlives the pods.
func TestClaimVolumeIsShared(t *testing.T) {
	h := newHarness(t)
	claimPod := func(uid types.UID, node string) *corev1.Pod {
		p := testPod()
		p.UID, p.Name, p.Spec.NodeName = uid, string(uid), node
		p.Spec.Volumes = []corev1.Volume{{Name: "ckpt", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "ckpt-js"}}}}
		return p
	}
	c := &corev1.Container{Name: "c", VolumeMounts: []corev1.VolumeMount{{Name: "ckpt", MountPath: "/ckpt"}}}
	writer, reader := claimPod("w", "n-0"), claimPod("r", "n-1")
	mustRunSandbox(t, h.rt, writer, "10.64.0.2")
	if _, err := h.rt.Start(writer, c, nil); err != nil {
		t.Fatal(err)
	}
	if code, _, err := h.rt.Exec(context.Background(), writer.UID, "c", []string{"sh", "-c", "echo step-40 > /ckpt/latest"}); err != nil || code != 0 {
		t.Fatalf("exec: %d %v", code, err)
	}
	h.rt.KillAll()
	h.rt.RemovePod(writer.UID)
	mustRunSandbox(t, h.rt, reader, "10.64.1.2")
	if _, err := h.rt.Start(reader, c, nil); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := h.rt.Exec(context.Background(), reader.UID, "c", []string{"cat", "/ckpt/latest"}); code != 0 || out != "step-40\n" {
		t.Fatalf("a pod on another node, after the writer is gone, reads %q (exit %d)", out, code)
	}
}

func TestHTTPGetRefusedNamesTheSandboxIP(t *testing.T) {
	h := newHarness(t)
	pod := testPod()
	mustRunSandbox(t, h.rt, pod, "10.64.0.7")
	_, err := h.rt.HTTPGet(context.Background(), pod.UID, 8081, "/healthz", nil)
	if err == nil || err.Error() != "dial tcp 10.64.0.7:8081: connect: connection refused" {
		t.Fatalf("HTTPGet with nothing serving: err = %v", err)
	}
	if h.rt.Listening(pod.UID, 8081) {
		t.Fatal("Listening reports a port nothing serves")
	}
}

// TestPodNetwork: a sandbox's containers get the kubelet's name files and the sandbox's address
// on the network, which stopping the sandbox takes away; a container that mounts a volume at
// /etc/hosts keeps its own.
func TestPodNetwork(t *testing.T) {
	n := networktest.New(t, network.Options{DNS: netip.MustParseAddr("10.0.0.10")})
	h := &harness{clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), events: make(chan types.UID, 100)}
	var err error
	h.rt, err = New(Options{Clock: h.clock, Network: n, Notify: func(uid types.UID) { h.events <- uid }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.rt.KillAll(); h.rt.Wait() })
	pod := testPod()
	pod.Spec.Hostname, pod.Spec.Subdomain = "w-0", "js"
	mustRunSandbox(t, h.rt, pod, "10.64.0.2")
	peer, err := n.Attach(netip.MustParseAddr("10.64.1.2"), "n-1")
	if err != nil {
		t.Fatal(err)
	}

	run := func(c corev1.Container) string {
		t.Helper()
		if _, err := h.rt.Start(pod, &c, nil); err != nil {
			t.Fatal(err)
		}
		h.waitExit(t, c.Name)
		ps, _ := h.rt.Status(pod.UID)
		return h.rt.Logs(pod.UID, ps.Latest(c.Name).ID)
	}
	got := run(corev1.Container{Name: "names", Command: []string{"sh", "-c", "cat /etc/hostname /etc/resolv.conf; tail -n 1 /etc/hosts; ping -c 1 10.64.1.2 >/dev/null && echo reached"}})
	want := "w-0\nsearch ns.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.0.0.10\noptions ndots:5\n" +
		"10.64.0.2\tw-0.js.ns.svc.cluster.local\tw-0\nreached\n"
	if got != want {
		t.Fatalf("container saw:\n%s\nwant:\n%s", got, want)
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "hosts", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	if got := run(corev1.Container{Name: "own-etc", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/etc/hosts"}},
		Command: []string{"sh", "-c", "cat /etc/hosts/x 2>/dev/null; test -d /etc/hosts && echo own"}}); got != "own\n" {
		t.Fatalf("a container that mounts /etc/hosts: %q", got)
	}
	if err := peer.Ping(context.Background(), netip.MustParseAddr("10.64.0.2")); err != nil {
		t.Fatalf("the sandbox is not on the network: %v", err)
	}
	h.rt.StopSandbox(pod.UID)
	if err := peer.Ping(context.Background(), netip.MustParseAddr("10.64.0.2")); err == nil {
		t.Fatal("a stopped sandbox still answers")
	}
}

func mustRunSandbox(t *testing.T, rt *Runtime, pod *corev1.Pod, ip string) {
	t.Helper()
	if err := rt.RunSandbox(context.Background(), pod, ip); err != nil {
		t.Fatal(err)
	}
}

// TestProjectedVolumes: configMap, secret, downwardAPI and projected volumes hold their sources'
// keys (items and modes as given), an optional missing source gives an empty volume, a required
// one keeps the sandbox from being created, and RefreshVolumes brings updates in.
func TestProjectedVolumes(t *testing.T) {
	src := sources{
		configMaps: map[string]*corev1.ConfigMap{"ns/cfg": {Data: map[string]string{"a": "1", "b": "2"}}},
		secrets:    map[string]*corev1.Secret{"ns/sec": {Data: map[string][]byte{"token": []byte("s3cr3t")}}},
	}
	h := &harness{clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), events: make(chan types.UID, 100)}
	var err error
	h.rt, err = New(Options{Clock: h.clock, Sources: src, Notify: func(uid types.UID) { h.events <- uid }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.rt.KillAll(); h.rt.Wait() })
	cmRef := corev1.LocalObjectReference{Name: "cfg"}
	pod := testPod()
	pod.Labels = map[string]string{"app": "x", "tier": "web"}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: cmRef}}},
		{Name: "items", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: cmRef,
			Items: []corev1.KeyToPath{{Key: "b", Path: "sub/bee", Mode: ptr.To[int32](0o755)}}}}},
		{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec", DefaultMode: ptr.To[int32](0o400)}}},
		{Name: "none", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "absent", Optional: ptr.To(true)}}},
		{Name: "meta", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}},
		{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: cmRef, Items: []corev1.KeyToPath{{Key: "a", Path: "a"}}}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}},
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "sa/token", Audience: "vault"}}}}}},
	}
	mustRunSandbox(t, h.rt, pod, "10.64.0.2")
	c := &corev1.Container{Name: "c", Command: []string{"sleep", "inf"}}
	for _, v := range pod.Spec.Volumes {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: "/v/" + v.Name})
	}
	if _, err := h.rt.Start(pod, c, nil); err != nil {
		t.Fatal(err)
	}
	exec := func(script string) string {
		t.Helper()
		_, out, err := h.rt.Exec(context.Background(), pod.UID, "c", []string{"sh", "-c", script})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := exec(`cat /v/cfg/a /v/cfg/b; echo; cat /v/items/sub/bee; test -x /v/items/sub/bee && echo exec; ls /v/items;` +
		`cat /v/sec/token; echo; test -x /v/sec/token || echo no-exec; ls /v/none | wc -l; cat /v/meta/labels; echo; cat /v/meta/name; echo;` +
		`cat /v/all/a /v/all/token; echo; cat /v/all/sa/token`)
	want := "12\n2exec\nsub\ns3cr3t\nno-exec\n0\napp=\"x\"\ntier=\"web\"\np\n1s3cr3t\ntoken-p-vault-3600"
	if got != want {
		t.Fatalf("volumes hold:\n%s\nwant:\n%s", got, want)
	}

	src.configMaps["ns/cfg"] = &corev1.ConfigMap{Data: map[string]string{"a": "updated"}}
	if err := h.rt.RefreshVolumes(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if got := exec("cat /v/cfg/a; ls /v/cfg; cat /v/all/a"); got != "updateda\nupdated" {
		t.Fatalf("after the update: %q", got)
	}

	missing := testPod()
	missing.UID = "u2"
	missing.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}}}}}
	err = h.rt.RunSandbox(context.Background(), missing, "10.64.0.3")
	if err == nil || err.Error() != `MountVolume.SetUp failed for volume "cfg" : configmaps "absent" not found` || h.rt.HasSandbox("u2") {
		t.Fatalf("a missing ConfigMap: %v (sandbox %v)", err, h.rt.HasSandbox("u2"))
	}
	missing.Spec.Volumes[0].ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: cmRef, Items: []corev1.KeyToPath{{Key: "zz", Path: "zz"}}}
	if err := h.rt.RunSandbox(context.Background(), missing, "10.64.0.3"); err == nil ||
		!strings.HasSuffix(err.Error(), ": configmap references non-existent config key: zz") {
		t.Fatalf("a missing key: %v", err)
	}
}

// The termination message falls back to the log as the kubelet reads it: a last line without a
// newline (echo -n) reads back without one (upstream's conformance test "should report
// termination message from log output if TerminationMessagePolicy FallbackToLogsOnError is set").
func TestTerminationMessageFromLog(t *testing.T) {
	h := newHarness(t)
	pod := testPod()
	mustRunSandbox(t, h.rt, pod, "10.64.0.2")
	c := &corev1.Container{Name: "c", Image: "busybox", Command: []string{"/bin/sh", "-c", "/bin/echo -n DONE; /bin/false"},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}
	if _, err := h.rt.Start(pod, c, nil); err != nil {
		t.Fatal(err)
	}
	h.waitExit(t, "c")
	ps, _ := h.rt.Status(pod.UID)
	if got := ps.Latest("c").Message; got != "DONE" {
		t.Errorf("message %q, want %q", got, "DONE")
	}
}

// tokenSources are sources whose tokens come from the kubelet's token cache.
type tokenSources struct {
	sources
	tokens *token.Manager
}

func (s tokenSources) Token(ctx context.Context, pod *corev1.Pod, audience string, expiration int64) (string, error) {
	return s.tokens.Token(ctx, pod, audience, expiration)
}

// TestTokenRenewal: a projected token stays the same when the volume is written again for another
// reason (a ConfigMap update), and once it is due the next write brings the renewed one, as the
// kubelet's remount does through its token manager.
func TestTokenRenewal(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	issued := 0
	tokens, err := token.New(token.Options{Clock: clk, Jitter: func() time.Duration { return 0 },
		Request: func(_ context.Context, _ *corev1.Pod, _ string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
			issued++
			out := tr.DeepCopy()
			out.Status.Token = fmt.Sprintf("t%d", issued)
			out.Status.ExpirationTimestamp = metav1.NewTime(clk.Now().Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second))
			return out, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	src := tokenSources{sources: sources{configMaps: map[string]*corev1.ConfigMap{"ns/cfg": {Data: map[string]string{"a": "1"}}}}, tokens: tokens}
	h := &harness{clock: clk, events: make(chan types.UID, 100)}
	h.rt, err = New(Options{Clock: h.clock, Sources: src, Notify: func(uid types.UID) { h.events <- uid }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.rt.KillAll(); h.rt.Wait() })
	pod := testPod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "sa", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](600)}},
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}}}}
	mustRunSandbox(t, h.rt, pod, "10.64.0.2")
	c := &corev1.Container{Name: "c", Command: []string{"sleep", "inf"}, VolumeMounts: []corev1.VolumeMount{{Name: "sa", MountPath: "/sa"}}}
	if _, err := h.rt.Start(pod, c, nil); err != nil {
		t.Fatal(err)
	}
	read := func() string {
		t.Helper()
		_, out, err := h.rt.Exec(context.Background(), pod.UID, "c", []string{"sh", "-c", "cat /sa/token /sa/a"})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := read(); got != "t11" {
		t.Fatalf("volume holds %q", got)
	}
	src.configMaps["ns/cfg"] = &corev1.ConfigMap{Data: map[string]string{"a": "2"}}
	if err := h.rt.RefreshVolumes(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "t12" {
		t.Fatalf("after a ConfigMap update the volume holds %q, want the same token", got)
	}
	clk.Step(8 * time.Minute)
	if due := tokens.Due(); len(due) != 1 || due[0] != pod.UID {
		t.Fatalf("due at 80%% of 600 s: %v", due)
	}
	if err := h.rt.RefreshVolumes(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "t22" {
		t.Fatalf("after renewal the volume holds %q", got)
	}
}
