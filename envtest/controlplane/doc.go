// Package controlplane owns the control-plane binaries restartbed runs: which Kubernetes
// releases are supported (releases/<minor>: the Go modules each release is built from and its
// feature-gate registry, written by hack/releases), how etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler of a release are built from source through the Go
// module proxy into the user cache when it does not have them (once, under a file lock, so that
// parallel test binaries build once), and the guard that kills them when the process that
// started them dies.
//
// kube-controller-manager is upstream's command wrapped in a thin main of restartbed's
// (mains/kube-controller-manager.go) that sets the tunables upstream keeps in code; every other
// binary is upstream's own.
//
// The package never downloads a prebuilt binary and never starts a control plane itself; the
// envtest package does that. It must not link k8s.io/kubernetes: the releases are built in
// modules of their own, so the library stays free of any one release.
package controlplane
