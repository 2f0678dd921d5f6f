// Package envtest owns restartbed's cluster: it starts the control plane of the chosen Kubernetes
// release — etcd and kube-apiserver through controller-runtime's envtest (imported as crenvtest),
// kube-controller-manager and kube-scheduler as processes of its own — with the flags that the
// timing profile and the release's feature gates call for, installs restartbed's JobSet CRD
// when its JobSet controller runs (and nothing of it otherwise), gives the cluster its default
// StorageClass, runs the in-process parts (the emulated kubelets, restartbed's JobSet
// controller, Kueue's failure recovery) and hands back a Cluster with ready clients.
//
// It must not emulate what the apiserver or an upstream controller does: objects are validated,
// defaulted and stored by the real apiserver, and the release's own controllers and scheduler act
// on them. Processes it starts die with the process that started them (see package
// controlplane), and a cluster's files go with it or at the next start.
package envtest
