package scenarios

import (
	"testing"
	"time"

	"github.com/restartbed/restartbed/timing"
)

// Expressions read the profile's durations by name, and the Kueue threshold the scenario set.
func TestTimingVariable(t *testing.T) {
	sc := &Scenario{}
	sc.Spec.Controllers.KueueFailureRecovery = &KueueFailureRecovery{Enabled: true, Threshold: &Duration{Duration: 7 * time.Second}}
	for _, tc := range []struct {
		profile timing.Profile
		expr    string
	}{
		{timing.Fast(), `timing.name == "fast" && timing.defaultTolerationSeconds == duration("3s") && timing.nodeMonitorGracePeriod == duration("5s")`},
		{timing.Realistic(), `timing.name == "realistic" && timing.defaultTolerationSeconds == duration("300s") && timing.nodeMonitorPeriod == duration("5s")`},
		{timing.Realistic(), `timing.kueueFailureRecoveryThreshold == duration("7s")`},
		{timing.Fast(), `elapsed + timing.podGCQuarantine > duration("4s")`},
		{timing.Fast(), `kubernetes.version == "v1.36.4" && kubernetes.minor == 36 && (kubernetes.minor >= 37 ? false : true)`},
	} {
		prg, err := compile(tc.expr, true)
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		ok, err := evalBool(prg, newActivation(nil, map[string]any{}, time.Second, newRunVariables(sc, tc.profile, "v1.36.4")))
		if err != nil || !ok {
			t.Errorf("%s with %s = %v, %v; want true", tc.expr, tc.profile.Name, ok, err)
		}
	}
}
