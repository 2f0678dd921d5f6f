// Package invariants owns the built-in invariants of a JobSet in-place restart: properties every
// correct run keeps, whatever faults it meets, judged from the API objects a run observes (pods,
// JobSets and nodes, with their resourceVersions and the kubelet's timestamps). docs/explore.md
// lists them with where each comes from (KEP-467 and released JobSet v0.12).
//
// It only reads what it is given and keeps what it needs to judge later changes; it never acts
// on a cluster and knows nothing of scenarios, faults or CEL. The scenario runner feeds it
// (spec.invariants) and `restartbed explore` reports what it finds.
package invariants
