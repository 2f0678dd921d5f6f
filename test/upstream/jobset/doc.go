// Package jobset runs upstream JobSet v0.12.0's own end-to-end suite (sigs.k8s.io/jobset's
// test/e2e, taken from the module cache when the test runs, never copied into this repository)
// against restartbed: once with restartbed's JobSet controller and webhook, once with upstream's
// manager binary and webhooks. The suite's specs run unmodified; its harness gets what it expects
// of a kind cluster with JobSet deployed: a kubeconfig, and a jobset-system/jobset-controller-manager
// Deployment that is Available (its pods are emulated; the controller itself runs outside the
// cluster). make test-upstream runs it (docs/upstream-tests.md).
package jobset
