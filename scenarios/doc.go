// Package scenarios will own scenario replay: the restartbed.dev/v1alpha1 format of
// ../shared/SCENARIOS.md, its loader, runner, CEL assertions and reports, and the bundled
// scenarios. It drives a cluster only through the API and the fault-injection API. It is not
// written yet (issue 5).
package scenarios
