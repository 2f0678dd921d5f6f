// Package kubernetes runs Kubernetes' own node e2e specs for container lifecycle, restart rules
// and RestartAllContainers against `restartbed up` (make test-upstream; docs/upstream-tests.md).
//
// The specs are upstream's, unmodified, taken from the default release's k8s.io/kubernetes
// module in the Go module cache when the test runs: test/e2e_node's container_lifecycle_test.go,
// restart_all_containers_test.go and container_restart_test.go (with the package's other files
// and the few test files whose helpers they call), and test/e2e/common/node's
// container_restart_policy.go, where the restart-rule specs of test/e2e/node/pods.go live since
// 1.36. They are built into one test binary, in a scratch module with the release's own go.mod,
// beside restartbed's suite file (testdata/) in place of upstream's e2e_node_suite_test.go,
// which would validate the host's kernel and start a kubelet.
//
// The binary runs under ginkgo in parallel against a one-node cluster of `restartbed up`, as
// upstream's node e2e runs against a node whose services are up (--host and --bearer-token, a
// cluster-admin service account's token). Specs that need what an emulated node cannot give —
// restarting the kubelet or rebooting the node through systemd, the CRI proxy — are skipped and
// listed as not applicable, with the reason. The test fails for every applicable spec that fails,
// except the few it names as racy (racy, in node_e2e_test.go), each by its whole text; -update-docs
// writes the table into docs/upstream-tests.md.
package kubernetes
