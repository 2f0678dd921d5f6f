// Package podgc is pod garbage collection as kube-controller-manager's podgc controller does it
// (k8s.io/kubernetes v1.35.4, pkg/controller/podgc), rewritten: upstream's package imports the
// kubelet's eviction code and with it cadvisor and the container runtimes, 560 packages for a
// few rules. Each pass, on the profile's period, it fails (phase Failed unless already terminal)
// and force-deletes, with grace 0:
//
//   - terminated pods beyond the threshold, evicted ones and then the oldest first;
//   - terminating pods on a node that is not Ready and carries the out-of-service taint;
//   - pods bound to a node that has been missing for the whole quarantine, with the
//     DisruptionTarget condition (reason DeletionByPodGC);
//   - terminating pods that were never scheduled.
//
// It must not touch terminating pods on nodes that are merely unreachable: upstream leaves them
// stuck, and that gap is what Kueue's failure recovery (package kueue/failurerecovery) closes.
package podgc
