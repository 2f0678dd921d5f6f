// Package scenarios owns scenario replay: the restartbed.dev/v1alpha1 format (docs/scenarios.md),
// its strict loader with file:line problems, the runner that gives each scenario a fresh cluster,
// the CEL evaluated on every observed change, and the reports (text, JUnit, trace). It drives a
// cluster only through the API and the fake kubelet's fault-injection API; it never reaches into a
// controller. The bundled scenarios are in examples/.
//
// Each kind of step (waitFor, exitContainer, failNode, ...) is one type in steps.go that checks
// itself when the scenario loads, names itself in reports and runs; a new kind touches that file
// only.
package scenarios
