// Package agent is JobSet's in-place-restart agent (KEP-467; upstream v0.12's
// cmd/in-place-restart-agent, described in docs/jobset.md, "Agent"): it records its pod's restart
// attempt in the pod annotation jobset.sigs.k8s.io/in-place-restart-attempt, holds the worker
// behind a barrier until the JobSet controller has seen every pod at the same attempt, and exits
// with the restart code when the controller asks the group to restart, so that the kubelet restarts
// every container of the pod in place (RestartAllContainers) or the worker container (Restart).
//
// The same code runs as the binary cmd/agent and as the fake kubelet's builtin program "agent". It
// talks only to the apiserver, as its pod's service account: one list and one watch of its own
// JobSet, decoded into the few fields it acts on, and server-side-apply patches of its own pod.
// Unlike upstream's agent, it backs off with jitter when it (re)establishes its watch or a write
// fails, so thousands of agents restarting together do not stampede the apiserver.
package agent
