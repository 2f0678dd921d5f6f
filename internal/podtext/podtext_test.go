package podtext

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestState(t *testing.T) {
	for want, st := range map[string]corev1.ContainerState{
		"-":                         {},
		"Running":                   {Running: &corev1.ContainerStateRunning{}},
		"Terminated(137,Error)":     {Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}},
		"Waiting(CrashLoopBackOff)": {Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
	} {
		if got := State(st); got != want {
			t.Errorf("State(%+v) = %s, want %s", st, got, want)
		}
	}
}
