// Package explore owns fault exploration (`restartbed explore`, docs/explore.md): it replays a
// scenario once as a reference, reads the points the run passed from its trace, and replays it
// again once per schedule — one fault at one point, as a spec.triggers entry — with the built-in
// invariants (package invariants) and the scenario's own on, then writes every violation as a
// scenario file that `restartbed run` replays.
//
// It drives clusters only through package scenarios (each replay a fresh cluster); it neither
// judges invariants itself nor reaches into a controller or kubelet.
package explore
