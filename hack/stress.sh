#!/usr/bin/env bash
# hack/stress.sh COUNT DIR GO-TEST-ARGS... runs `go test -count=1 GO-TEST-ARGS...` in DIR COUNT
# times in a row with every core kept busy by a CPU burner at the same priority, and stops at the
# first failure, whose output it keeps. It is how docs/development.md's flakes were provoked and
# their fixes checked: a test that passes here ten times in a row does not lose a race to load.
#
#   hack/stress.sh 10 . -race ./test/scenarios -run 'TestBundledScenarios/1.37/pods-find-each-other'
#
# BURNERS (default: the number of cores) sets how many burners run; 0 runs the test alone.
set -uo pipefail
if [[ $# -lt 3 ]]; then
	echo "usage: hack/stress.sh COUNT DIR GO-TEST-ARGS..." >&2
	exit 2
fi
count=$1 dir=$2
shift 2
if ! [[ $count =~ ^[1-9][0-9]*$ ]]; then
	echo "hack/stress.sh: COUNT must be a positive number, got \"$count\"" >&2
	exit 2
fi
burners=${BURNERS:-$(nproc)}
pids=()
stop() { ((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; }
trap stop EXIT
for ((i = 0; i < burners; i++)); do
	(while :; do :; done) &
	pids+=($!)
done
out=$(mktemp)
cd "$dir" || exit 2
for ((run = 1; run <= count; run++)); do
	start=$EPOCHREALTIME
	go test -count=1 "$@" >"$out" 2>&1
	rc=$?
	took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')
	if ((rc != 0)); then
		echo "run $run/$count: FAIL in $took s ($burners burners); its output is $out"
		exit 1
	fi
	echo "run $run/$count: pass in $took s ($burners burners)"
done
rm -f "$out"
echo "all $count runs passed"
