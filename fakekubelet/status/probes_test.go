package status

import (
	"fmt"
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

// An instance has results when the test recorded one of either kind for it; else no worker has
// seen it yet (after a restart of the kubelet).
func (p probed) StartupKnown(id string) bool   { return p.known(id) }
func (p probed) ReadinessKnown(id string) bool { return p.known(id) }
func (p probed) known(id string) bool {
	_, s := p.started[id]
	_, r := p.ready[id]
	return s || r
}

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

// TestKubeletRestartKeepsStatus: a kubelet that restarted gives the containers that ran before it
// the started and ready flags their status had until their probes have results (KEP-5278), unless
// the ChangeContainerStatusOnKubeletRestart gate is on.
func TestKubeletRestartKeepsStatus(t *testing.T) {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid-1"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "ready", ReadinessProbe: probe}, {Name: "started", StartupProbe: probe}, {Name: "plain"}},
	}}
	rt := newest(running("ready", 0, "r1"), running("started", 0, "s1"), running("plain", 0, "p1"))
	// The previous kubelet's status: everything started and ready.
	before := Generate(Input{Pod: pod, Runtime: rt, Probes: probed{started: map[string]bool{"s1": true}, ready: map[string]bool{"r1": true}}, Now: t0})
	podReady := func(s corev1.ConditionStatus) *corev1.Pod {
		p := pod.DeepCopy()
		p.Status = *before.DeepCopy()
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.PodReady {
				p.Status.Conditions[i].Status = s
			}
		}
		return p
	}
	flags := func(s corev1.PodStatus) string {
		var out []string
		for _, c := range s.ContainerStatuses {
			out = append(out, fmt.Sprintf("%s started=%t ready=%t", c.Name, c.Started != nil && *c.Started, c.Ready))
		}
		return strings.Join(out, ", ")
	}
	later := t0.Add(time.Minute)
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		restart KubeletRestart
		probes  probed
		want    string
	}{
		{name: "kept: started, and ready as the pod was", pod: podReady(corev1.ConditionTrue), restart: KubeletRestart{Start: later},
			want: "plain started=true ready=true, ready started=true ready=true, started started=true ready=true"},
		{name: "not ready when the pod was not", pod: podReady(corev1.ConditionFalse), restart: KubeletRestart{Start: later},
			want: "plain started=true ready=true, ready started=true ready=false, started started=true ready=true"},
		{name: "the probes' results once they have some", pod: podReady(corev1.ConditionTrue), restart: KubeletRestart{Start: later},
			probes: probed{started: map[string]bool{"s1": false}, ready: map[string]bool{"r1": false}},
			want:   "plain started=true ready=true, ready started=true ready=false, started started=false ready=false"},
		{name: "started less than 10 s before the kubelet: started kept, readiness waits", pod: podReady(corev1.ConditionTrue),
			restart: KubeletRestart{Start: t0.Add(5 * time.Second)},
			want:    "plain started=true ready=true, ready started=true ready=false, started started=true ready=true"},
		{name: "the gate on: nothing kept", pod: podReady(corev1.ConditionTrue), restart: KubeletRestart{Start: later, ChangeStatus: true},
			want: "plain started=true ready=true, ready started=true ready=false, started started=false ready=false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Generate(Input{Pod: tc.pod, Old: tc.pod.Status, Runtime: rt, Probes: tc.probes, KubeletRestart: tc.restart, Now: later})
			if flags(got) != tc.want {
				t.Errorf("got  %s\nwant %s", flags(got), tc.want)
			}
		})
	}
}
