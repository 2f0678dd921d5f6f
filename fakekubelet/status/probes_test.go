package status

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// probed are recorded probe results by instance ID.
type probed struct{ started, ready map[string]bool }

func (p probed) Started(id string) bool { return p.started[id] }
func (p probed) Ready(id string) bool   { return p.ready[id] }

// TestApplyProbeResults: while a pod's sync is held, the status manager takes probe results into
// the last status; only the probed flags and the readiness conditions change.
func TestApplyProbeResults(t *testing.T) {
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid-1"}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "side", RestartPolicy: always, StartupProbe: probe, ReadinessProbe: probe}},
		Containers:     []corev1.Container{{Name: "main", ReadinessProbe: probe}, {Name: "plain"}},
	}}
	rt := newest(running("main", 0, "m1"), running("plain", 0, "p1"), running("side", 0, "s1"))
	old := Generate(Input{Pod: pod, Runtime: rt, Probes: probed{}, Now: t0})
	later := t0.Add(time.Minute)

	for _, tc := range []struct {
		name   string
		probes ProbeResults
		want   string // the changed lines of summary, "" when unchanged
	}{
		{name: "no results", probes: nil},
		{name: "the same results", probes: probed{}},
		{name: "the sidecar started", probes: probed{started: map[string]bool{"s1": true}},
			want: "side Running last=- rc=0 ready=false started=true id=s1"},
		{name: "everything ready", probes: probed{started: map[string]bool{"s1": true}, ready: map[string]bool{"s1": true, "m1": true}},
			want: `Ready=True "" ""
ContainersReady=True "" ""
side Running last=- rc=0 ready=true started=true id=s1
main Running last=- rc=0 ready=true started=true id=m1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := ApplyProbeResults(Input{Pod: pod, Old: old, Probes: tc.probes, Now: later})
			if changed != (tc.want != "") {
				t.Fatalf("changed = %t, want %t", changed, tc.want != "")
			}
			if diff := cmp.Diff(tc.want, changedLines(summary(old), summary(got))); diff != "" {
				t.Errorf("changed lines (-want +got):\n%s", diff)
			}
			for _, c := range got.Conditions {
				moved := !c.LastTransitionTime.Equal(ptr.To(metav1.NewTime(t0)))
				if flipped := c.Status != conditionStatus(old, c.Type); moved != flipped {
					t.Errorf("%s: transition time %v, status flipped %t", c.Type, c.LastTransitionTime, flipped)
				}
			}
		})
	}
}

// changedLines lists the lines of after that before does not have, in after's order.
func changedLines(before, after string) string {
	had := map[string]bool{}
	for _, l := range strings.Split(before, "\n") {
		had[l] = true
	}
	var out []string
	for _, l := range strings.Split(after, "\n") {
		if !had[l] {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func conditionStatus(s corev1.PodStatus, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}
