// Package envtest owns restartbed's control plane: it starts a real kube-apiserver and etcd
// (through controller-runtime's envtest, imported as crenvtest) with the feature gates that
// in-place restart needs, installs restartbed's CRDs, runs the upstream controller-manager
// controllers in-process, and hands back a Cluster with ready clients.
//
// It must not emulate what the apiserver or an upstream controller does: objects are validated,
// defaulted and stored by the real apiserver, Jobs are run by the real Job controller.
// Processes it starts die with the process that started them (see package controlplane).
package envtest
