// Package controllermanager runs the kube-controller-manager controllers that restartbed needs,
// in-process: from k8s.io/kubernetes, unmodified, the Job controller, the garbage collector, node
// lifecycle and taint eviction; and restartbed's rewrite of pod garbage collection (package
// podgc; upstream's drags in the kubelet). envtest has no controller-manager; without these
// nothing would create a Job's pods, finish a foreground deletion, notice a node that stopped
// posting status or evict its pods.
//
// It owns their wiring (informers, clients, workers) and their tunables, which it takes from a
// timing profile. It must not reimplement their behaviour: where upstream decides, upstream code
// runs. The Job controller's tunables are package variables of k8s.io/kubernetes, shared by the
// whole process; see jobtunables.go.
package controllermanager
