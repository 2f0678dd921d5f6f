// Package timing owns restartbed's timing profiles: the one place where every period, grace,
// backoff and threshold that a component waits on is defined, so that a scenario switches all of
// them together.
//
// Realistic carries upstream's defaults, the same in every supported Kubernetes release, and
// Kueue's (upstream_test.go reads each from upstream's source). Fast keeps the same shapes scaled
// down to whole seconds where the value reaches the API (timestamps there have a one-second
// resolution), and shorter periods where it only paces internal work.
//
// The package holds values only; it starts nothing and reads no clock.
package timing
