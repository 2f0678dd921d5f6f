// Package fakekubelet emulates the kubelets of a cluster in one process, against a real
// apiserver: it registers nodes and keeps their Leases and status fresh, binds pending pods to
// nodes as the default scheduler would, and — as it grows — runs pods with the 1.35 kubelet's
// restart semantics (../shared/reference/kubelet-restart-semantics.md).
//
// One Kubelet serves every node: it holds one pod informer and one node informer and a bounded
// set of workers, never a goroutine or a watch per node, so thousands of nodes fit in a process.
// It talks only to the apiserver; it never calls a controller, and nothing a pod spec says
// reaches the host. Its subpackages hold what can be decided or tested on its own: restart
// (restart rules and pod phase) and status (publishing pod statuses).
package fakekubelet
