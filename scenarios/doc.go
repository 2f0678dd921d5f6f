// Package scenarios owns scenario replay: the restartbed.dev/v1alpha1 format of
// ../shared/SCENARIOS.md (documented in docs/scenarios.md), its strict loader with file:line
// problems, the runner that gives each scenario a fresh cluster, the CEL evaluated on every
// observed change, and the reports (text, JUnit, trace). It drives a cluster only through the API
// and the fake kubelet's fault-injection API; it never reaches into a controller. The bundled
// scenarios are in examples/.
package scenarios
