// Package kubernetes runs Kubernetes' own node e2e specs for container lifecycle, restart rules
// and RestartAllContainers against `restartbed up` (make test-upstream; docs/upstream-tests.md),
// for every supported release, the releases at once after all are built, each against clusters of
// that release.
//
// The specs are upstream's, taken from each release's k8s.io/kubernetes module in the Go module
// cache when the test runs, unmodified but for upstream's own later fixes of races in them
// (suite.fixes: one, for 1.37): test/e2e_node's container_lifecycle_test.go,
// restart_all_containers_test.go and container_restart_test.go (with the package's other files
// and the few test files whose helpers they call), and the restart-rule and RestartAllContainers
// specs, in test/e2e/common/node's container_restart_policy.go since 1.36 and in
// test/e2e/node/pods.go before (suites, in node_e2e_test.go, says which for each release). They
// are built into one test binary per release, in a scratch module with the release's own go.mod,
// beside restartbed's suite file (testdata/) in place of upstream's e2e_node_suite_test.go,
// which would validate the host's kernel and start a kubelet.
//
// Each binary runs under ginkgo against one-node clusters of `restartbed up`, as upstream's node
// e2e runs against a node whose services are up (--host and --bearer-token, a cluster-admin
// service account's token, and --feature-gates for the gates restartbed turns on): the parallel
// specs on one, in parallel, and the serial ones divided among clusters of their own. The specs
// restart the kubelet through systemctl (restartbed systemctl on the cluster's control socket),
// reach the node's runtime through its CRI socket (up --runtime-socket-dir), upstream's CRI proxy
// in front of it, and rewrite the kubelet's configuration file in their working directory, the
// cluster's (up --kubelet-config). A spec that injects CRI failures through the proxy would test
// nothing, as restartbed's kubelet does not call through it: the harness refuses such a file.
// Specs that need what an emulated node cannot give are skipped and listed as not applicable,
// with the reason (none now). The test fails for every applicable spec that fails;
// -update-docs writes the tables into docs/upstream-tests.md.
package kubernetes
