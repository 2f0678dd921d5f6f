// Package controlplane owns the kube-apiserver and etcd binaries that restartbed runs: which
// versions, where they are found, how they are built from source through the Go module proxy
// when they are missing, and the guard that kills them when the process that started them dies.
//
// Binaries are looked up, in order, in $KUBEBUILDER_ASSETS, in the repository's bin/, and in the
// user cache; when none has them they are built into the user cache under a file lock, so
// parallel test binaries build once. The versions come from the tools module (hack/tools), of
// which this package embeds a copy (make generate keeps it in step; a test checks it).
//
// The package never downloads a prebuilt binary and never starts a control plane itself; the
// envtest package does that.
package controlplane
