package scenarios

import (
	"errors"
	"strconv"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

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

// Expressions have Kubernetes' CEL libraries, as ValidatingAdmissionPolicy's do, and cel-go's
// math library.
func TestKubernetesLibraries(t *testing.T) {
	pods := []any{
		map[string]any{"metadata": map[string]any{"name": "b"}, "status": map[string]any{"podIP": "10.64.1.2"},
			"spec": map[string]any{"containers": []any{map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "2Gi"}}}}}},
		map[string]any{"metadata": map[string]any{"name": "a"}, "status": map[string]any{"podIP": "10.64.0.2"}},
	}
	for _, expr := range []string{
		`quantity(pods[0].spec.containers[0].resources.limits.memory).isGreaterThan(quantity("1Gi"))`,
		`pods.all(p, isIP(p.status.podIP) && cidr("10.64.0.0/10").containsIP(p.status.podIP))`,
		`pods.map(p, p.metadata.name).isSorted() == false && ["a", "b"].isSorted()`,
		`url("https://kubernetes.default.svc/healthz").getHost() == "kubernetes.default.svc"`,
		`"v1.36.4".find("[0-9]+\\.[0-9]+") == "1.36" && isSemver("1.36.4") && semver("1.36.4").isGreaterThan(semver("1.35.8"))`,
		`format.dns1123Label().validate("Not_A_Label").hasValue()`,
		`pods.exists(i, p, i == 1 && p.metadata.name == "a")`,
		`"a,b".split(",").join("-") == "a-b" && sets.contains([1, 2, 3], [2]) && math.greatest(1, 3, 2) == 3`,
		`pods[0].status.?podIP.orValue("") == "10.64.1.2"`,
	} {
		prg, err := compile(expr, true)
		if err != nil {
			t.Errorf("%s: %v", expr, err)
			continue
		}
		ok, err := evalBool(prg, newActivation(map[string][]any{varPods: pods}, map[string]any{}, time.Second, runVariables{}))
		if err != nil || !ok {
			t.Errorf("%s = %v, %v; want true", expr, ok, err)
		}
	}
}

// An evaluation that costs more than the apiserver's per-call limit stops with ErrCostLimit, and
// a waitFor that meets it ends at once, not at its timeout.
func TestCostLimit(t *testing.T) {
	pods := make([]any, 200)
	for i := range pods {
		pods[i] = map[string]any{"metadata": map[string]any{"name": strconv.Itoa(i)}}
	}
	expensive := `pods.all(a, pods.all(b, pods.all(c, a.metadata.name != "" || b == c)))`
	prg, err := compile(expensive, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := evalBool(prg, newActivation(map[string][]any{varPods: pods}, map[string]any{}, 0, runVariables{})); !errors.Is(err, ErrCostLimit) {
		t.Errorf("200³ comprehension steps: error %v, want ErrCostLimit", err)
	}
	if ok, err := evalBool(prg, newActivation(map[string][]any{varPods: pods[:10]}, map[string]any{}, 0, runVariables{})); err != nil || !ok {
		t.Errorf("10³ steps: %v, %v; want true within the limit", ok, err)
	}

	o := newObserver(clocktesting.NewFakePassiveClock(time.Unix(1000, 0)), nil, runVariables{})
	for i := range 200 {
		o.changed(varPods, "ADDED", pod(strconv.Itoa(i), 1+i, "0"))
	}
	w := o.startWait(prg)
	select {
	case <-w.done:
	default:
		t.Fatal("a waitFor over the cost limit goes on waiting")
	}
	if w.passed || !errors.Is(w.fatal, ErrCostLimit) {
		t.Errorf("passed %v, fatal %v; want not passed and ErrCostLimit", w.passed, w.fatal)
	}
}
