// Package restart owns the kubelet's decisions about stopped containers and the pod phase they
// lead to: container restart rules (KEP-5307), the RestartAllContainers trigger (KEP-5532) and
// getPhase, as docs/reference/kubelet.md describes them ("Deciding a restart", "The trigger",
// "Phase"). It decides only; it runs nothing and talks to no apiserver.
package restart
