package timing

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestByName(t *testing.T) {
	cases := []struct {
		name    string
		want    string
		wantErr string
	}{
		{name: "", want: FastName},
		{name: "fast", want: FastName},
		{name: "realistic", want: RealisticName},
		{name: "Realistic", wantErr: `unknown timing profile "Realistic": use one of fast, realistic`},
		{name: "slow", wantErr: `unknown timing profile "slow"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ByName(tc.name)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ByName(%q) error = %v, want it to contain %q", tc.name, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ByName(%q): %v", tc.name, err)
			}
			if diff := cmp.Diff(tc.want, p.Name); diff != "" {
				t.Errorf("profile name (-want +got):\n%s", diff)
			}
		})
	}
}

// Fast keeps the values the API shows in whole seconds: the API drops sub-second precision, so a
// backoff below one second would vanish.
func TestFastKeepsWholeSeconds(t *testing.T) {
	f := Fast()
	for name, d := range map[string]time.Duration{
		"JobPodFailureBackOff":          f.JobPodFailureBackOff,
		"JobPodFailureBackOffMax":       f.JobPodFailureBackOffMax,
		"NodeLeaseDuration":             f.NodeLeaseDuration,
		"CrashLoopBackOff":              f.CrashLoopBackOff,
		"CrashLoopBackOffMax":           f.CrashLoopBackOffMax,
		"RestartAllKillGrace":           f.RestartAllKillGrace,
		"DefaultTolerationSeconds":      f.DefaultTolerationSeconds,
		"KueueFailureRecoveryThreshold": f.KueueFailureRecoveryThreshold,
	} {
		if d < time.Second || d%time.Second != 0 {
			t.Errorf("Fast().%s = %v, want a whole number of seconds", name, d)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, p := range []Profile{Fast(), Realistic()} {
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
	bad := Fast()
	bad.JobPodFailureBackOffMax = 0
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "jobPodFailureBackOffMax must be positive") {
		t.Errorf("Validate() = %v, want the zero max named", err)
	}
	bad = Fast()
	bad.JobPodFailureBackOffMax = bad.JobPodFailureBackOff / 2
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "is below jobPodFailureBackOff") {
		t.Errorf("Validate() = %v, want max below base rejected", err)
	}
	bad = Fast()
	bad.NodeLeaseRenewInterval = bad.NodeLeaseDuration
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "must be below nodeLeaseDuration") {
		t.Errorf("Validate() = %v, want a renewal no shorter than the lease rejected", err)
	}
	bad = Fast()
	bad.DefaultTolerationSeconds = 1500 * time.Millisecond
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "defaultTolerationSeconds (1.5s) must be whole seconds") {
		t.Errorf("Validate() = %v, want a fractional toleration rejected", err)
	}
}

// Every duration field is listed by Durations, so that it is validated and scenarios can read it.
func TestDurationsListsEveryDurationField(t *testing.T) {
	p := Realistic()
	listed := map[time.Duration]int{}
	for _, d := range p.Durations() {
		listed[d.Value]++
	}
	v := reflect.ValueOf(p)
	var fields int
	for i := range v.NumField() {
		if v.Field(i).Type() == reflect.TypeFor[time.Duration]() {
			fields++
		}
	}
	if got := len(p.Durations()); got != fields {
		t.Errorf("Durations() lists %d durations, the profile has %d duration fields", got, fields)
	}
	for i := range v.NumField() {
		if d, ok := v.Field(i).Interface().(time.Duration); ok && listed[d] == 0 {
			t.Errorf("field %s (%v) is not listed by Durations()", v.Type().Field(i).Name, d)
		}
	}
}

func TestWithHeartbeatBudget(t *testing.T) {
	realistic := Realistic()
	for _, tc := range []struct {
		name      string
		nodes     int
		perSecond float64
		factor    int
	}{
		{"within the budget", 500, 50, 1},
		{"no budget", 5000, 0, 1},
		{"5000 nodes at 50 a second", 5000, 50, 10},
		{"rounds the factor up", 1001, 50, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, factor := realistic.WithHeartbeatBudget(tc.nodes, tc.perSecond)
			if factor != tc.factor {
				t.Fatalf("factor %d, want %d", factor, tc.factor)
			}
			k := time.Duration(tc.factor)
			want := realistic
			want.NodeLeaseRenewInterval, want.NodeLeaseDuration = realistic.NodeLeaseRenewInterval*k, realistic.NodeLeaseDuration*k
			want.NodeStatusReportFrequency = realistic.NodeStatusReportFrequency * k
			want.NodeMonitorGracePeriod, want.NodeStartupGracePeriod = realistic.NodeMonitorGracePeriod*k, realistic.NodeStartupGracePeriod*k
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("profile (-want +got):\n%s", diff)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("the scaled profile is invalid: %v", err)
			}
			if rate := float64(tc.nodes) / got.NodeLeaseRenewInterval.Seconds(); tc.perSecond > 0 && rate > tc.perSecond {
				t.Errorf("%d nodes renew %.1f times a second, over the budget of %.0f", tc.nodes, rate, tc.perSecond)
			}
		})
	}
}
