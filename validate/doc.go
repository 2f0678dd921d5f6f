// Package validate owns `restartbed validate`: what a Kubernetes 1.35 cluster with JobSet v0.12
// would refuse or mis-handle in a set of manifests, found before anything is deployed.
//
// The checks run in this order on each document: parse (document.go: YAML, tabs, the "..." lines
// of design documents), draft names (drafts.go: what the KEP drafts called things that shipped
// under other names), schema (schema.go: unknown and wrongly cased keys, placeholders, values of
// the wrong kind, against the Go types of the kind), in-place readiness across all documents
// (readiness.go: agent, rules, probe, workers, RBAC), the server-side dry-run on an embedded
// apiserver with JobSet's CRD and webhook, child Jobs included (dryrun.go), and the drill
// (drill.go: a generated scenario that crashes a worker and times the group restart). Each check
// that reports a problem also mends a copy of the document, so that the later checks judge the
// rest. docs/validate.md documents every check with an example finding.
package validate
