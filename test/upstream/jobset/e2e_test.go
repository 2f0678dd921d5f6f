package jobset

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/test/specs"
)

// upstreamSpecs is how many specs upstream's suite has; all must pass in every mode.
const upstreamSpecs = 12

// TestMain quiets controller-runtime's logger once, before the tests run side by side: each
// cluster's own components log through it, and nothing here reads it.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// TestUpstreamE2E runs upstream's suite with each JobSet controller, and with upstream's on nodes
// that two kubelet processes share.
func TestUpstreamE2E(t *testing.T) {
	t.Parallel()
	suite := copySuite(t)
	manager := filepath.Join(t.TempDir(), "jobset-manager")
	if out, err := exec.Command("go", "build", "-o", manager, "sigs.k8s.io/jobset").CombinedOutput(); err != nil {
		t.Fatalf("building upstream's manager: %v\n%s", err, out)
	}
	// The restartbed binary whose kubelet processes run the sharded mode's nodes.
	restartbed := filepath.Join(t.TempDir(), "restartbed")
	build := exec.Command("go", "build", "-o", restartbed, "./cmd/restartbed")
	build.Dir = filepath.Join("..", "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building restartbed: %v\n%s", err, out)
	}
	for _, mode := range []struct {
		name     string
		upstream bool
		// shards, when set, runs the nodes in that many restartbed kubelet processes.
		shards int
	}{{"restartbed's controller", false, 0}, {"upstream's manager", true, 0}, {"upstream's manager, the nodes on 2 shards", true, 2}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel() // each mode has a cluster of its own, and the suite mostly waits
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cluster := startCluster(ctx, t, mode.upstream, func(o *envtest.Options) {
				if mode.shards > 0 {
					o.KubeletProcesses, o.KubeletCommand = mode.shards, []string{restartbed}
				}
			})
			if mode.upstream {
				runManager(ctx, t, cluster, manager, "")
			}
			deployPlaceholder(ctx, t, cluster)
			results := runSuite(t, cluster, suite)
			report(t, mode.name, results)
		})
	}
}

// copySuite copies upstream's test/e2e into a module of its own beside this one's go.mod and
// go.sum, so that it builds with exactly this module's dependencies.
func copySuite(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/jobset").Output()
	if err != nil {
		t.Fatalf("finding sigs.k8s.io/jobset's module: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "test", "e2e")
	dir := filepath.Join(t.TempDir(), "e2e")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(src, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("upstream's suite at %s: %v", src, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	restartbed, err := filepath.Abs(filepath.Join(here, "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if name == "go.mod" {
			data = bytes.Replace(data, []byte("module restartbed.localhost/upstream/jobset"), []byte("module restartbed.localhost/upstream/jobset/e2e"), 1)
			data = bytes.Replace(data, []byte("=> ../../.."), []byte("=> "+restartbed), 1)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, jobsetapi.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return scheme
}

// startCluster starts a cluster of the default release with room for the suite's JobSets, and
// restartbed's JobSet controller or upstream's webhook configurations; configure changes the
// options last.
func startCluster(ctx context.Context, t *testing.T, upstream bool, configure func(*envtest.Options)) *envtest.Cluster {
	t.Helper()
	opts := envtest.Options{Nodes: []fakekubelet.NodePool{{Name: "node", Count: 4}}, JobSet: !upstream}
	if upstream {
		// Upstream's own CRD and webhook configurations, as its kustomize deploys them; nothing
		// of restartbed's JobSet is installed with JobSet off.
		opts.Scheme = newScheme(t)
		opts.Webhooks = crenvtest.WebhookInstallOptions{Paths: []string{upstreamManifest(t, "webhook", "manifests.yaml")}}
		opts.CRDDirectoryPaths = []string{upstreamManifest(t, "crd", "bases")}
	}
	configure(&opts)
	cluster, err := envtest.Start(ctx, opts)
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

// runManager runs upstream's manager against the cluster, serving its webhooks where the cluster
// registered them, until the test ends; extra is more of its configuration file (YAML lines).
func runManager(ctx context.Context, t *testing.T, cluster *envtest.Cluster, bin, extra string) {
	t.Helper()
	logs := &specs.SyncBuffer{}
	start, err := managerStart(ctx, cluster, bin, t.TempDir(), extra, logs)
	if err != nil {
		t.Fatal(err)
	}
	kill, err := start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kill()
		if t.Failed() {
			t.Logf("upstream's manager said (last 4 KiB):\n%s", tail(logs.String(), 4096))
		}
	})
}

// managerStart writes the manager's kubeconfig and configuration into dir and returns how to
// start it: each start returns once its webhooks answer (its logs in the error if it exited or
// never served them), with how to kill it and wait for it. Every start's output
// goes to logs. The manager also ends with ctx.
func managerStart(ctx context.Context, cluster *envtest.Cluster, bin, dir, extra string, logs *specs.SyncBuffer) (envtest.StartFunc, error) {
	kubeconfig, err := cluster.Kubeconfig()
	if err != nil {
		return nil, err
	}
	serving := cluster.WebhookServerOptions()
	config := fmt.Sprintf(`apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
internalCertManagement: {enable: false}
leaderElection: {leaderElect: false}
webhook: {host: %q, port: %d, certDir: %q}
%s`, serving.Host, serving.Port, serving.CertDir, extra)
	for name, data := range map[string][]byte{"kubeconfig": kubeconfig, "config.yaml": []byte(config)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return func() (func() error, error) {
		manager := exec.CommandContext(ctx, bin, "--config", filepath.Join(dir, "config.yaml"),
			"--metrics-bind-address=0", "--health-probe-bind-address=0")
		manager.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(dir, "kubeconfig"))
		manager.Stdout, manager.Stderr = logs, logs
		if err := manager.Start(); err != nil {
			return nil, err
		}
		exited := make(chan error, 1)
		go func() { exited <- manager.Wait() }()
		kill := func() error {
			_ = manager.Process.Kill()
			exited <- <-exited // killed, as asked: its exit status says nothing more
			return nil
		}
		// As on a cluster, where a JobSet is applied once the manager's Deployment is ready (its
		// readyz waits for the webhook server), nothing is applied before the webhooks answer: the
		// apiserver would reject it with "connection refused".
		addr := net.JoinHostPort(serving.Host, strconv.Itoa(serving.Port))
		deadline := time.NewTimer(managerStartTimeout)
		defer deadline.Stop()
		for {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				_ = conn.Close()
				return kill, nil
			}
			select {
			case err := <-exited:
				exited <- err
				return nil, fmt.Errorf("upstream's manager exited before serving its webhooks: %w; it said (last 4 KiB):\n%s", err, tail(logs.String(), 4096))
			case <-deadline.C:
				_ = kill()
				return nil, fmt.Errorf("upstream's manager does not serve its webhooks at %s after %v: %w", addr, managerStartTimeout, err)
			case <-ctx.Done():
				_ = kill()
				return nil, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}, nil
}

// managerStartTimeout bounds how long upstream's manager may take to serve its webhooks.
const managerStartTimeout = 2 * time.Minute

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// deployPlaceholder gives the suite's harness the Deployment it waits for on a kind cluster
// (jobset-system/jobset-controller-manager, Available, no restarts). Its pods run on the emulated
// nodes and do nothing: the controller the specs exercise runs outside the cluster.
func deployPlaceholder(ctx context.Context, t *testing.T, cluster *envtest.Cluster) {
	t.Helper()
	c := cluster.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "jobset-system"}}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitForDefaultServiceAccount(ctx, "jobset-system"); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"control-plane": "controller-manager"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "jobset-system", Name: "jobset-controller-manager", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "manager", Image: "registry.k8s.io/jobset/jobset:v0.12.0", Command: []string{"sleep", "infinity"},
				}}},
			},
		},
	}
	if err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
}

// specResult is one spec of ginkgo's JSON report.
type specResult struct {
	Text  string
	State string
	// Failure says why a spec failed.
	Failure string
}

// runSuite runs the copied suite with the cluster's kubeconfig and returns its specs' results.
func runSuite(t *testing.T, cluster *envtest.Cluster, dir string) []specResult {
	t.Helper()
	kubeconfig, err := cluster.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	kubeconfigFile := filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfigFile, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	reportFile := filepath.Join(work, "report.json")
	cmd := exec.Command("go", "test", "-count=1", "-timeout=40m", ".", "-ginkgo.json-report="+reportFile, "-ginkgo.timeout=40m")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfigFile, "NAMESPACE=jobset-system", "JOBSET_E2E_TESTS_DUMP_NAMESPACE=true",
		"GOFLAGS=-mod=mod")
	out, runErr := cmd.CombinedOutput()
	data, err := os.ReadFile(reportFile)
	if err != nil {
		t.Fatalf("upstream's suite wrote no report (%v): %v\n%s", runErr, err, tail(string(out), 16<<10))
	}
	var reports []struct {
		SpecReports []struct {
			LeafNodeType            string
			LeafNodeText            string
			ContainerHierarchyTexts []string
			State                   string
			Failure                 *struct{ Message string }
		}
	}
	if err := json.Unmarshal(data, &reports); err != nil {
		t.Fatalf("reading the suite's report: %v", err)
	}
	var results []specResult
	for _, r := range reports {
		for _, s := range r.SpecReports {
			if s.LeafNodeType != "It" {
				continue
			}
			res := specResult{Text: strings.Join(append(slices.Clone(s.ContainerHierarchyTexts), s.LeafNodeText), " "), State: s.State}
			if s.Failure != nil {
				res.Failure = s.Failure.Message
			}
			results = append(results, res)
		}
	}
	if runErr != nil {
		t.Logf("upstream's suite failed (%v); its output (last 16 KiB):\n%s", runErr, tail(string(out), 16<<10))
	}
	return results
}

// report logs the table of results and fails for every one of upstream's specs that did not pass,
// each as "FAIL <spec>", the form of the node e2e harness (make test-upstream repeats them).
func report(t *testing.T, mode string, results []specResult) {
	t.Helper()
	var table strings.Builder
	fmt.Fprintf(&table, "upstream JobSet v0.12.0 e2e with %s:\n", mode)
	var failed []specResult
	for _, r := range results {
		fmt.Fprintf(&table, "  %-7s %s\n", r.State, r.Text)
		if r.State == "passed" {
			continue
		}
		failed = append(failed, r)
		if r.Failure != "" {
			fmt.Fprintf(&table, "          %s\n", strings.ReplaceAll(tail(r.Failure, 600), "\n", "\n          "))
		}
	}
	t.Log(table.String())
	for _, r := range failed {
		first, _, _ := strings.Cut(strings.TrimSpace(r.Failure), "\n")
		t.Errorf("FAIL %s (%s, with %s): %s", r.Text, r.State, mode, first)
	}
	if len(results) != upstreamSpecs {
		t.Errorf("%d specs ran, upstream's suite has %d", len(results), upstreamSpecs)
	}
}
