// Package jobset runs upstream JobSet v0.12.0's own controllers on restartbed — in this process,
// and as its manager binary — and restarts a JobSet's group in place: the worker exits,
// restartbed's agent and kubelets restart every pod's containers, and upstream's reconciler
// moves the JobSet to its next in-place restart attempt.
package jobset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/jobset/pkg/controllers"
	"sigs.k8s.io/jobset/pkg/features"
	"sigs.k8s.io/jobset/pkg/webhooks"
	"sigs.k8s.io/yaml"

	"github.com/restartbed/restartbed/builtins"
	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/program"
)

const (
	namespace = "default"
	jobSet    = "kubectl-check" // config/samples/jobset-in-place-restart.yaml
	timeout   = 2 * time.Minute
)

// TestUpstreamReconcilersInProcess runs upstream's reconcilers and webhooks in this process,
// wired as its main.go wires them.
func TestUpstreamReconcilersInProcess(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scheme := newScheme(t)
	cluster := startCluster(ctx, t, scheme)

	// The InPlaceRestart gate on, the webhooks served where restartbed registered them.
	if err := features.SetEnable(features.InPlaceRestart, true); err != nil {
		t.Fatal(err)
	}
	ctrl.SetLogger(logr.Discard())
	mgr, err := ctrl.NewManager(cluster.Config, ctrl.Options{Scheme: scheme,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(cluster.WebhookServerOptions())})
	if err != nil {
		t.Fatal(err)
	}
	if err := controllers.SetupJobSetIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	if err := controllers.SetupPodIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	if err := webhooks.Setup(mgr); err != nil {
		t.Fatal(err)
	}
	if err := controllers.NewJobSetReconciler(mgr.GetClient(), scheme, mgr.GetEventRecorder("jobset")).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := controllers.NewPodReconciler(mgr.GetClient(), scheme, mgr.GetEventRecorder("pod")).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			t.Error(err)
		}
	}()
	restartGroupInPlace(ctx, t, cluster)
}

// TestUpstreamManagerBinary builds upstream's manager (sigs.k8s.io/jobset's main package, in this
// module, so with JobSet's own dependencies) and runs it as a process against the cluster, with
// its webhooks and the InPlaceRestart gate, as `restartbed up --jobset=false` users would.
func TestUpstreamManagerBinary(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "jobset-manager")
	if out, err := exec.Command("go", "build", "-o", bin, "sigs.k8s.io/jobset").CombinedOutput(); err != nil {
		t.Fatalf("building upstream's manager: %v\n%s", err, out)
	}
	cluster := startCluster(ctx, t, newScheme(t))

	kubeconfig, err := cluster.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	serving := cluster.WebhookServerOptions()
	config := fmt.Sprintf(`apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
internalCertManagement: {enable: false}
leaderElection: {leaderElect: false}
webhook: {host: %q, port: %d, certDir: %q}
featureGates: {InPlaceRestart: true}
`, serving.Host, serving.Port, serving.CertDir)
	for name, data := range map[string][]byte{"kubeconfig": kubeconfig, "config.yaml": []byte(config)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	manager := exec.CommandContext(ctx, bin, "--config", filepath.Join(dir, "config.yaml"),
		"--metrics-bind-address=0", "--health-probe-bind-address=0")
	manager.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(dir, "kubeconfig"))
	manager.Stdout, manager.Stderr = &logs, &logs
	if err := manager.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = manager.Wait()
		if t.Failed() {
			t.Logf("upstream's manager said:\n%s", lastLines(logs.String(), 40))
		}
	})
	restartGroupInPlace(ctx, t, cluster)
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

// startCluster starts a 1.36 cluster with two nodes, restartbed's agent for JobSet's agent
// containers, nothing of restartbed's JobSet, upstream's webhook configurations registered (from
// its module, as its kustomize deploys them), and upstream's CRD created with a client.
func startCluster(ctx context.Context, t *testing.T, scheme *runtime.Scheme) *envtest.Cluster {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/jobset").Output()
	if err != nil {
		t.Fatalf("finding sigs.k8s.io/jobset's module: %v", err)
	}
	module := strings.TrimSpace(string(out))
	cluster, err := envtest.Start(ctx, envtest.Options{
		KubernetesVersion: "1.36",
		Scheme:            scheme,
		Webhooks: crenvtest.WebhookInstallOptions{Paths: []string{
			filepath.Join(module, "config", "components", "webhook", "manifests.yaml")}},
		Nodes:    []fakekubelet.NodePool{{Name: "node", Count: 2}},
		Programs: []program.Rule{{Container: "in-place-restart-agent", Builtin: builtins.Agent}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
	})
	createCRD(ctx, t, cluster, filepath.Join(module, "config", "components", "crd", "bases", "jobset.x-k8s.io_jobsets.yaml"))
	return cluster
}

// createCRD creates the CRD of the manifest with a client, as a user installs upstream's JobSet
// on a cluster, and waits until the apiserver serves it.
func createCRD(ctx context.Context, t *testing.T, cluster *envtest.Cluster, manifest string) {
	t.Helper()
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("%s: %v", manifest, err)
	}
	client, err := apiextensionsclient.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating upstream's JobSet CRD: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("waiting for upstream's JobSet CRD to be established: %v", err)
	}
}

// restartGroupInPlace applies the agent's RBAC and the sample JobSet, waits for its pods, makes
// one worker exit, and checks that every pod restarted its containers in place and the JobSet
// moved to attempt 1.
func restartGroupInPlace(ctx context.Context, t *testing.T, cluster *envtest.Cluster) {
	t.Helper()
	for _, file := range []string{"../../config/agent/rbac.yaml", "../../config/samples/jobset-in-place-restart.yaml"} {
		apply(ctx, t, cluster.Client, file)
	}
	pods := waitRunning(ctx, t, cluster.Client, 0)
	uids := map[string]types.UID{}
	for _, p := range pods {
		uids[p.Name] = p.UID
	}
	if err := cluster.Kubelet.ExitContainer(namespace, pods[0].Name, "worker", 1); err != nil {
		t.Fatal(err)
	}
	after := waitRunning(ctx, t, cluster.Client, 1)
	for _, p := range after {
		if uids[p.Name] != p.UID {
			t.Errorf("pod %s was recreated, want it restarted in place", p.Name)
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.RestartCount == 0 {
				t.Errorf("container %s of pod %s did not restart", s.Name, p.Name)
			}
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// apply creates every object of a YAML file in the namespace.
func apply(ctx context.Context, t *testing.T, c client.Client, file string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetNamespace() == "" && u.GetKind() != "ClusterRole" && u.GetKind() != "ClusterRoleBinding" {
			u.SetNamespace(namespace)
		}
		// Until the manager serves its webhooks the apiserver cannot call them: try again.
		var last error
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			last = c.Create(ctx, u.DeepCopy())
			return last == nil, nil
		})
		if err != nil {
			t.Fatalf("%s: creating %s %s: %v (%v)", file, u.GetKind(), u.GetName(), last, err)
		}
	}
}

// waitRunning waits until the JobSet is at the in-place restart attempt and each of its pods runs
// every container, and returns the pods.
func waitRunning(ctx context.Context, t *testing.T, c client.Client, attempt int32) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	var js jobsetapi.JobSet
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: jobSet}, &js); err != nil {
			return false, err
		}
		if ptr.Deref(js.Status.CurrentInPlaceRestartAttempt, -1) != attempt {
			return false, nil
		}
		if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{jobsetapi.JobSetNameKey: jobSet}); err != nil {
			return false, err
		}
		if len(pods.Items) != 2 {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
				return false, nil
			}
			for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
				if s.State.Running == nil {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("waiting for JobSet %s at in-place restart attempt %d with its 2 pods running (status %+v, %d pods): %v",
			jobSet, attempt, js.Status, len(pods.Items), err)
	}
	return pods.Items
}
