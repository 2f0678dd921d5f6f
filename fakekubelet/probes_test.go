package fakekubelet

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestProbeRecord: the prober turns results into started, ready and failed with the probes'
// thresholds, and reports only changes the next plan reads.
func TestProbeRecord(t *testing.T) {
	spec := &corev1.Probe{SuccessThreshold: 2, FailureThreshold: 3}
	for _, tc := range []struct {
		name    string
		kind    probeKind
		results []bool
		// changed lists, per result, whether it changed what the plan reads.
		changed        []bool
		started, ready bool
		failed         string
	}{
		{name: "startup succeeds once", kind: startupProbe, results: []bool{false, true}, changed: []bool{false, true}, started: true},
		{name: "startup fails at its threshold", kind: startupProbe, results: []bool{false, false, false}, changed: []bool{false, false, true}, failed: "startup"},
		{name: "liveness tolerates failures below the threshold", kind: livenessProbe, results: []bool{false, false, true, false, false}, changed: []bool{false, false, false, false, false}},
		{name: "liveness fails at its threshold", kind: livenessProbe, results: []bool{false, false, false}, changed: []bool{false, false, true}, failed: "liveness"},
		{name: "readiness needs its success threshold", kind: readinessProbe, results: []bool{true, true}, changed: []bool{false, true}, ready: true},
		{name: "readiness falls at its failure threshold", kind: readinessProbe, results: []bool{true, true, false, false, false}, changed: []bool{false, true, false, false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := &probeState{}
			for i, ok := range tc.results {
				if got := ps.record(tc.kind, spec, ok); got != tc.changed[i] {
					t.Errorf("result %d (%t): changed %t, want %t", i, ok, got, tc.changed[i])
				}
			}
			if ps.started != tc.started || ps.ready != tc.ready || ps.failed != tc.failed {
				t.Errorf("started %t ready %t failed %q, want %t %t %q", ps.started, ps.ready, ps.failed, tc.started, tc.ready, tc.failed)
			}
		})
	}
}
