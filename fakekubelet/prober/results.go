package prober

// Result is a probe's outcome for one container instance, as the kubelet's results manager
// keeps it.
type Result int8

const (
	// None: no result: no worker set one for the instance (after a restart of the kubelet, until
	// the worker first sees it running since before, see KubeletRestart in package status).
	None Result = iota
	// Unknown: set but not probed yet, a startup probe's initial value.
	Unknown
	// Success: the probe passed successThreshold times in a row.
	Success
	// Failure: the probe failed failureThreshold times in a row, or the container is not
	// running (readiness).
	Failure
)

func (r Result) String() string { return [...]string{"None", "Unknown", "Success", "Failure"}[r] }

// Kind is one of a container's three probes.
type Kind int

const (
	Startup Kind = iota
	Liveness
	Readiness
)

// String is the probe's name as the kubelet's events give it.
func (k Kind) String() string { return [...]string{"Startup", "Liveness", "Readiness"}[k] }

// kinds are the probes in the order the kubelet starts their workers.
var kinds = [...]Kind{Startup, Readiness, Liveness}

// Results are a pod's probe results at one moment, by container instance ID: values, which a
// sync reads while the workers go on. The zero value has no result.
type Results struct {
	byID map[string][3]Result
}

// Started reports whether the instance's startup probe has succeeded.
func (r Results) Started(id string) bool { return r.byID[id][Startup] == Success }

// Ready reports whether the instance's readiness probe has succeeded.
func (r Results) Ready(id string) bool { return r.byID[id][Readiness] == Success }

// StartupKnown reports whether the instance's startup probe has a result, Unknown included.
func (r Results) StartupKnown(id string) bool { return r.byID[id][Startup] != None }

// ReadinessKnown reports whether the instance's readiness probe has a result.
func (r Results) ReadinessKnown(id string) bool { return r.byID[id][Readiness] != None }

// Failed returns "liveness" or "startup" when that probe of the instance has failed at its
// threshold: the instance is to be killed (computePodActions upstream).
func (r Results) Failed(id string) string {
	switch {
	case r.byID[id][Liveness] == Failure:
		return "liveness"
	case r.byID[id][Startup] == Failure:
		return "startup"
	}
	return ""
}

// Of returns the instance's result of the probe, for tests and logs.
func (r Results) Of(id string, kind Kind) Result { return r.byID[id][kind] }
