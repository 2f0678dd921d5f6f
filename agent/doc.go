// Package agent will own the in-place-restart agent: the attempt annotation, the startup barrier
// and the exit that triggers RestartAllContainers. The same code will run as cmd/agent and as the
// fake kubelet's builtin program. It talks only to the apiserver, as its pod's service account.
// It is not written yet (issue 4).
package agent
