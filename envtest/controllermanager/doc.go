// Package controllermanager runs the upstream kube-controller-manager controllers that restartbed
// needs, in-process and unmodified, from k8s.io/kubernetes: the Job controller and the garbage
// collector. envtest has no controller-manager; without these nothing would create a Job's pods
// or finish a foreground deletion.
//
// It owns their wiring (informers, clients, workers) and their tunables, which it takes from a
// timing profile. It must not reimplement their behaviour: where upstream decides, upstream code
// runs. The Job controller's tunables are package variables of k8s.io/kubernetes, shared by the
// whole process; see jobtunables.go.
package controllermanager
