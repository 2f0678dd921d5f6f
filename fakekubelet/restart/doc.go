// Package restart owns the kubelet's decisions about stopped containers and the pod phase they
// lead to, with the 1.35 semantics of container restart rules (KEP-5307) and RestartAllContainers
// (KEP-5532): reference/kubelet-restart-semantics.md §2.1, §3.1 and §4.1. It decides only; it
// runs nothing and talks to no apiserver.
package restart
