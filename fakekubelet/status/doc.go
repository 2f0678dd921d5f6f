// Package status owns the publication of pod statuses, as the kubelet's status manager does:
// coalesced, in order per pod, never lost, never a transition the apiserver forbids. It writes
// pod status and nothing else; what the status says is decided by its callers.
package status
