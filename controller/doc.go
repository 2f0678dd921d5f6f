// Package controller is the JobSet controller (jobset.x-k8s.io/v1alpha2, wire-compatible with
// upstream JobSet v0.12) on controller-runtime: it creates a JobSet's child Jobs and headless
// Service, applies its failure policy (Recreate, BlockingRecreate, InPlaceRestart and the rule
// actions), its success policy and suspension, and keeps its status, conditions and events as
// upstream does (docs/jobset.md).
//
// It talks only to the apiserver — never to the fake kubelet or to an agent — and runs on an
// injected clock, so it can be deployed as cmd/controller against any cluster.
package controller
