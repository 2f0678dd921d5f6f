// Package status owns pod statuses as the kubelet's status generation and status manager do:
// Generate computes the status a pod's containers, probes and restart rules give (a pure
// function), and Manager publishes statuses — coalesced, in order per pod, never lost, never a
// transition the apiserver forbids. It writes pod status and nothing else; when to generate and
// publish is its callers' decision.
package status
