#!/usr/bin/env bash
# Concurrency leases: CONC.ACQUIRE + CONC.RELEASE pairs per second on sluice,
# against the same pairs on redis-server with a sorted-set Lua script
# (EVALSHA acquire + ZREM release), and CL.THROTTLE on sluice through the same
# harness. redis-benchmark cannot pair an acquire with the release of the
# same id, so scripts/concbench (go-redis, pipelines) measures all three.
#
# Assumes sluice on $SLUICE_PORT and redis-server on $REDIS_PORT, already
# running (scripts/bench.sh starts them and calls this script).
# Environment: CONC_DURATION (per target, default 5s), CONC_CONNS (default 50),
# CONC_PIPELINE (pairs per round trip, default 16).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${SLUICE_PORT:?set SLUICE_PORT to a running sluice}" "${REDIS_PORT:?set REDIS_PORT to a running redis-server}"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/concbench" ./scripts/concbench
"$bin/concbench" -sluice "127.0.0.1:$SLUICE_PORT" -redis "127.0.0.1:$REDIS_PORT" \
	-duration "${CONC_DURATION:-5s}" -conns "${CONC_CONNS:-50}" -pipeline "${CONC_PIPELINE:-16}"

# Acquire alone with redis-benchmark -P 16 (random keys and ids, so nearly all
# are granted and none released), beside CL.THROTTLE and the Lua acquire.
n=${CONC_N:-500000}
sha=$(redis-cli -p "$REDIS_PORT" script load "$(cat scripts/concbench/acquire.lua)")
rps() {
	local port=$1
	shift
	redis-benchmark -p "$port" -c 50 -n "$n" -r 100000 -P 16 --csv "$@" 2>/dev/null |
		awk -F'","' 'NR==2 {print int($2)}'
}
acq=$(rps "$SLUICE_PORT" CONC.ACQUIRE conc:__rand_int__ 100 60 id:__rand_int__)
thr=$(rps "$SLUICE_PORT" CL.THROTTLE gcra:__rand_int__ 100 10 1 1)
lua=$(rps "$REDIS_PORT" EVALSHA "$sha" 1 conc:__rand_int__ 100 60000 id:__rand_int__)
echo
echo "redis-benchmark -c 50 -n $n -r 100000 -P 16, requests/s:"
printf "%-48s %12s\n" "sluice CONC.ACQUIRE" "$acq" "sluice CL.THROTTLE" "$thr" "redis-server EVALSHA sorted-set acquire" "$lua"
awk -v a="$acq" -v t="$thr" -v l="$lua" 'BEGIN {
	if (t > 0) printf "CONC.ACQUIRE / CL.THROTTLE: %.2fx\n", a / t
	if (l > 0) printf "CONC.ACQUIRE / Redis+Lua:   %.2fx\n", a / l
}'
