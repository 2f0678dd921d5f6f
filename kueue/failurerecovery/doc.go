// Package failurerecovery is Kueue's failure-recovery controller (KEP-6757; Kueue v0.17's
// pkg/controller/failurerecovery, the pod termination controller), rewritten for restartbed:
// importing Kueue would pin its core and feature gates into every test.
//
// A pod that opted in with the annotation kueue.x-k8s.io/safe-to-forcefully-delete: "true" (or
// v0.15.0's kueue.x-k8s.io/safe-to-forcefully-terminate), that is being deleted, and whose node
// carries the node.kubernetes.io/unreachable taint, is failed once its deletionTimestamp plus the
// threshold (60 s by default) has passed: phase Failed unless it is already terminal, the
// condition KueueFailureRecovery (reason KueueForcefullyDeleted, Kueue's message), a Warning
// event, then a delete with grace 0. That is what lets a Job with podReplacementPolicy Failed
// replace a pod stuck Terminating on a dead node.
//
// It owns that rule and nothing else: it never touches pods of reachable nodes, pods that did not
// opt in, or pods of nodes that are gone (pod GC's case).
package failurerecovery
