// Package builtins is the table of container programs restartbed runs by name — a scenario's
// programs[].builtin, program.Rule.Builtin — and the adapters that run each one as an emulated
// container: today JobSet's in-place-restart agent (package agent) as "agent".
//
// The table is handed explicitly to whatever builds kubelets or checks scenarios (envtest,
// scenarios, validate, restartbed up); nothing registers itself. An adapter only maps what a
// container has (environment, files, ports, the shell, its log) onto its program's options: the
// programs' logic lives in their own packages, which must not import this one or the emulator.
package builtins

import "github.com/restartbed/restartbed/fakekubelet/program"

// Programs returns restartbed's builtins, each with its default options.
func Programs() program.Builtins {
	return program.Builtins{Agent: AgentProgram(AgentOptions{})}
}
