// Package controlplane is the envtest suite that proves restartbed's foundation is the real
// thing: the kube-apiserver 1.35.4 validates pods with the in-place restart gates, the upstream
// Job controller creates, counts and replaces pods, and the upstream garbage collector finishes a
// foreground deletion. Pod status is written by the specs themselves; no kubelet runs here.
package controlplane
