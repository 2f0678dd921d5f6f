//go:build linux

package e2enode

// restartbed's suite file for upstream's node e2e specs. It stands where upstream's
// e2e_node_suite_test.go stands and does what that file does for a node whose services run
// already — flags, feature gates, waiting for the node, the node's name and its kubelet's
// configuration — but not what needs the host itself: system validation (the kernel and cgroups
// of the machine the kubelet runs on), pre-pulling images, starting services. The specs stop and
// restart the kubelet with "sudo systemctl ..." as on a node: the harness puts restartbed's
// systemctl on their PATH (node_e2e_test.go, hostTools), and --kubelet-healthz-url says where the
// kubelet's healthz is, which on a node is http://127.0.0.1:10248/healthz.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"github.com/spf13/pflag"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientset "k8s.io/client-go/kubernetes"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/kubernetes/test/e2e/framework"
	e2econfig "k8s.io/kubernetes/test/e2e/framework/config"
	e2epod "k8s.io/kubernetes/test/e2e/framework/pod"
	e2eskipper "k8s.io/kubernetes/test/e2e/framework/skipper"
	"k8s.io/kubernetes/test/e2e_node/criproxy"

	// The specs of test/e2e/common/node, among them the container restart rules.
	_ "k8s.io/kubernetes/test/e2e/common/node"
	// Constants, and the framework configured as upstream's node suite configures it.
	_ "k8s.io/kubernetes/test/e2e/feature"
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
)

// e2eCriProxy is upstream's CRI proxy in front of the node's runtime socket
// (--container-runtime-endpoint), started with --cri-proxy-enabled as upstream's suite starts
// it; the specs' own CRI calls go through it. restartbed's kubelet runs its runtime in-process
// and does not call through it, so a failure injected there would not reach the kubelet: the
// harness runs no spec that injects one (node_e2e_test.go, buildSuite). The specs that need it
// only to be there (container_restart_test.go resets its injectors) run.
var e2eCriProxy *criproxy.RemoteRuntime

// e2eCriProxySocket is the proxy's socket.
var e2eCriProxySocket string

// featureGates are the gates the specs may assume (--feature-gates): the cluster's.
var featureGates map[string]bool

func TestMain(m *testing.M) {
	e2econfig.CopyFlags(e2econfig.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.TestContext.NodeE2E = true
	flag.StringVar(&framework.TestContext.NodeName, "node-name", "", "the node the specs run on")
	flag.StringVar(&framework.TestContext.BearerToken, "bearer-token", "", "the token the specs authenticate with at --host")
	flag.Var(cliflag.NewMapStringBool(&featureGates), "feature-gates", "the cluster's feature gates: A=true,B=false")
	flag.BoolVar(&framework.TestContext.CriProxyEnabled, "cri-proxy-enabled", false, "put upstream's CRI proxy in front of --container-runtime-endpoint for the specs' CRI calls")
	flag.StringVar(&kubeletHealthCheckURL, "kubelet-healthz-url", kubeletHealthCheckURL, "the node's kubelet healthz endpoint (restartbed up --kubelet-healthz-port)")
	pflag.CommandLine.AddGoFlagSet(flag.CommandLine)
	pflag.Parse()
	if pflag.CommandLine.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unknown arguments: %s\n", pflag.CommandLine.Args())
		os.Exit(1)
	}
	framework.AfterReadingAllFlags(&framework.TestContext)
	if err := e2eskipper.InitFeatureGates(utilfeature.DefaultFeatureGate, featureGates); err != nil {
		fmt.Fprintf(os.Stderr, "feature gates: %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func TestE2eNode(t *testing.T) {
	gomega.RegisterFailHandler(ginkgo.Fail)
	e2epod.GlobalOwnerTracking = true
	suiteConfig, reporterConfig := framework.CreateGinkgoConfig()
	ginkgo.RunSpecs(t, "E2eNode Suite (restartbed)", suiteConfig, reporterConfig)
}

var _ = ginkgo.BeforeSuite(func(ctx context.Context) {
	config, err := framework.LoadConfig()
	framework.ExpectNoError(err, "loading the kubeconfig")
	client, err := clientset.NewForConfig(config)
	framework.ExpectNoError(err)
	gomega.Eventually(ctx, func() error {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(nodes.Items) != 1 {
			return fmt.Errorf("the node suite wants exactly one node, the cluster has %d", len(nodes.Items))
		}
		node := nodes.Items[0]
		for _, c := range node.Status.Conditions {
			if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
				framework.TestContext.NodeName = node.Name
				return nil
			}
		}
		return fmt.Errorf("node %s is not ready", node.Name)
	}, 2*time.Minute, time.Second).Should(gomega.Succeed())
	framework.Logf("Node name: %s", framework.TestContext.NodeName)
	kubeletCfg, err = getCurrentKubeletConfig(ctx)
	framework.ExpectNoError(err, "reading the kubelet's configuration through /configz")
	if framework.TestContext.CriProxyEnabled {
		rs, is, err := criClients(ctx)
		framework.ExpectNoError(err, "connecting to the node's runtime socket")
		e2eCriProxy = criproxy.NewRemoteRuntimeProxy(rs, is)
		// Not criproxy.GenerateEndpoint's socket in /tmp: its listener is made under a temporary
		// name and renamed, so closing it leaves the socket behind. This one is in the
		// harness's temporary directory (TMPDIR), and AfterSuite removes it.
		e2eCriProxySocket = filepath.Join(os.TempDir(), fmt.Sprintf("cri-proxy-%d.sock", ginkgo.GinkgoParallelProcess()))
		endpoint := "unix://" + e2eCriProxySocket
		framework.ExpectNoError(e2eCriProxy.Start(endpoint), "starting the CRI proxy")
		framework.TestContext.ContainerRuntimeEndpoint, framework.TestContext.ImageServiceEndpoint = endpoint, endpoint
	}
})

var _ = ginkgo.AfterSuite(func() {
	if e2eCriProxy != nil {
		e2eCriProxy.Stop()
		_ = os.Remove(e2eCriProxySocket)
	}
})

// A spec that fails while the kubelet is stopped leaves it stopped, as on a node, and every spec
// after it would then fail for want of a kubelet rather than for what it tests: after each spec,
// a stopped kubelet unit is started again.
var _ = ginkgo.AfterEach(func(ctx context.Context) {
	out, err := exec.CommandContext(ctx, "systemctl", "list-units", "--state=inactive", "--no-legend", "*kubelet*").Output()
	if err != nil {
		return // not run by restartbed's harness: no units to see
	}
	for _, unit := range regexp.MustCompile(`kubelet-\w+\.service`).FindAllString(string(out), -1) {
		framework.Logf("The kubelet unit %s was left stopped; starting it", unit)
		if out, err := exec.CommandContext(ctx, "systemctl", "start", unit).CombinedOutput(); err != nil {
			framework.Logf("Starting %s: %v: %s", unit, err, out)
		}
	}
})
