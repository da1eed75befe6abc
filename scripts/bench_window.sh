#!/usr/bin/env bash
# Sliding and fixed windows: SW.CHECK (counter), SW.CHECK … EXACT (log) and
# FW.CHECK on sluice, beside CL.THROTTLE on sluice and a Redis + Lua sliding
# window log (ZREMRANGEBYSCORE/ZCARD/ZADD on a sorted set, the usual recipe)
# on redis-server, in the same run. (Memory per key of each kind:
# scripts/bench_memory.sh.)
#
# Assumes sluice on $SLUICE_PORT and redis-server on $REDIS_PORT, already
# running (scripts/bench.sh starts them and calls this script).
# Environment: N (requests per command, default 300000).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${SLUICE_PORT:?set SLUICE_PORT to a running sluice}" "${REDIS_PORT:?set REDIS_PORT to a running redis-server}"
N=${N:-300000}

# The sliding window log as Redis users write it (scripts/lua/sliding_log.lua):
# refused requests are not added. Replies like SW.CHECK.
sha=$(redis-cli -p "$REDIS_PORT" script load "$(cat scripts/lua/sliding_log.lua)")

# check PORT ARGS... fails unless the command answers a limiter reply.
check() {
	local port=$1 out
	shift
	out=$(redis-cli -p "$port" "$@" 2>&1)
	if [ "$(printf '%s\n' "$out" | wc -l)" -ne 5 ] || printf '%s' "$out" | grep -qi err; then
		echo "bench_window: '$*' on port $port answered: $out" >&2
		exit 1
	fi
}
# rps PORT ARGS... prints requests per second.
rps() {
	local port=$1
	shift
	redis-benchmark -p "$port" -c 50 -n "$N" -r 100000 -P 16 --csv "$@" 2>/dev/null |
		awk -F'","' 'NR==2 {print int($2)}'
}

names=("sluice SW.CHECK (counter)" "sluice SW.CHECK EXACT (log)" "sluice FW.CHECK" "sluice CL.THROTTLE"
	"redis-server EVALSHA sliding-log Lua")
ports=("$SLUICE_PORT" "$SLUICE_PORT" "$SLUICE_PORT" "$SLUICE_PORT" "$REDIS_PORT")
cmds=("SW.CHECK sw:__rand_int__ 100 60" "SW.CHECK swx:__rand_int__ 100 60 EXACT" "FW.CHECK fw:__rand_int__ 100 60"
	"CL.THROTTLE cl:__rand_int__ 99 100 60" "EVALSHA $sha 1 lua:__rand_int__ 100 60")
res=()
for i in "${!names[@]}"; do
	# shellcheck disable=SC2086 # the command's words
	check "${ports[$i]}" ${cmds[$i]//__rand_int__/probe}
	# shellcheck disable=SC2086
	res[i]=$(rps "${ports[$i]}" ${cmds[$i]})
done

echo "redis-benchmark -c 50 -n $N -r 100000 -P 16 (100 per 60 s), requests/s:"
printf "%-38s %12s %14s %12s\n" "command" "requests/s" "/CL.THROTTLE" "/Redis+Lua"
for i in "${!names[@]}"; do
	awk -v n="${names[$i]}" -v r="${res[$i]}" -v cl="${res[3]}" -v lua="${res[4]}" 'BEGIN {
		printf "%-38s %12d %13.2fx %11.2fx\n", n, r, (cl > 0 ? r / cl : 0), (lua > 0 ? r / lua : 0)
	}'
done
