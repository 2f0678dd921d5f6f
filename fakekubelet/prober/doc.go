// Package prober runs the emulated kubelet's probe workers, as the kubelet's prober manager
// (pkg/kubelet/prober): one worker per startup, liveness and readiness probe of a pod's regular
// and sidecar containers, each on its own goroutine and timer, so that a slow probe holds up
// nothing but itself. Unlike the kubelet's tickers, the workers' ticks land on multiples of 20
// ms, so that the runtime wakes for many at once: a node runs a few workers, restartbed
// thousands. A worker probes the instance that the status the kubelet last generated
// shows running, counts its results against the probe's thresholds, and keeps the result by
// container instance ID; a change is reported (Options.Updated) for the pod's sync to read
// (Manager.Results).
//
// It owns the workers and their results and nothing else: it never kills, starts or restarts a
// container, never writes a status and never talks to the API. Its clock is the kubelet's.
package prober
