// Package podtext renders the parts of a pod status that restartbed's status tables compare, one
// short word each: "Running", "Terminated(137,Error)", "Waiting(CrashLoopBackOff)", "-" for no
// state. It reads values only; tests of the status generation, the sync planner and the
// emulated kubelet share it so that their tables read alike.
package podtext

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// State renders a container state.
func State(st corev1.ContainerState) string {
	switch {
	case st.Running != nil:
		return "Running"
	case st.Terminated != nil:
		return fmt.Sprintf("Terminated(%d,%s)", st.Terminated.ExitCode, st.Terminated.Reason)
	case st.Waiting != nil:
		return fmt.Sprintf("Waiting(%s)", st.Waiting.Reason)
	}
	return "-"
}
