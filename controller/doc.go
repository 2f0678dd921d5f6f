// Package controller will own the JobSet controller (Recreate, BlockingRecreate and
// InPlaceRestart) and its admission webhook, deployable as cmd/controller. It talks only to the
// apiserver: never to the fake kubelet or to an agent. It is not written yet (issue 4).
package controller
