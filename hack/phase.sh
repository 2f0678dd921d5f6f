#!/usr/bin/env bash
# hack/phase.sh NAME COMMAND [ARG...] runs COMMAND and then prints one line saying how long it
# took, on the wall clock and in CPU (user and system time of every process it started and waited
# for: go test's test binaries and the control planes they start included), and its exit status:
#
#   phase test/go-test: 1234.5 s wall, 2101.3 s CPU (1.70 cores), exit 0
#
# It exits with COMMAND's status. .ci/run and the Makefile wrap their steps in it, so every run
# says where its time went; hack/ciphases turns a log's phase lines into docs/development.md's
# table. With PHASE_LOG set, the line is appended to that file too (.ci/run's table at its end).
# A process COMMAND leaves running when it exits is not counted.
set -uo pipefail
if [[ $# -lt 2 ]]; then
	echo "usage: hack/phase.sh NAME COMMAND [ARG...]" >&2
	exit 2
fi
name=$1
shift
# cutime and cstime, fields 16 and 17 of /proc/PID/stat, are the CPU of the waited-for children
# in clock ticks. This shell has waited for none yet but its own command substitutions.
children_cpu() {
	local stat
	stat=$(</proc/$$/stat)
	stat=${stat##*) } # after the command name, which may hold spaces
	read -r -a f <<<"$stat"
	echo $((f[13] + f[14])) # fields 16, 17 counted from field 3
}
ticks=$(getconf CLK_TCK)
before=$(children_cpu)
start=$EPOCHREALTIME
"$@"
rc=$?
end=$EPOCHREALTIME
after=$(children_cpu)
line=$(awk -v name="$name" -v start="$start" -v end="$end" -v cpu="$((after - before))" -v hz="$ticks" -v rc="$rc" 'BEGIN {
	wall = end - start; c = cpu / hz
	printf "phase %s: %.1f s wall, %.1f s CPU (%.2f cores), exit %d\n", name, wall, c, (wall > 0 ? c / wall : 0), rc
}')
echo "$line"
if [[ -n "${PHASE_LOG:-}" ]]; then
	echo "$line" >>"$PHASE_LOG"
fi
exit "$rc"
