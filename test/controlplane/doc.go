// Package controlplane is the envtest suite that proves restartbed's foundation is the real
// thing: the kube-apiserver of every supported release validates pods with the in-place restart
// gates, and kube-controller-manager's Job controller creates, counts and replaces pods with the
// timing profile's backoff and its garbage collector finishes a foreground deletion. Pod status is
// written by the specs themselves; no kubelet runs here.
package controlplane
