#!/usr/bin/env bash
# Sliding and fixed windows: SW.CHECK (counter), SW.CHECK … EXACT (log) and
# FW.CHECK on sluice, beside CL.THROTTLE on sluice and a Redis + Lua sliding
# window log (ZREMRANGEBYSCORE/ZCARD/ZADD on a sorted set, the usual recipe)
# on redis-server, in the same run; then memory per key with KEYS_MEM live
# keys of each kind.
#
# Assumes sluice on $SLUICE_PORT and redis-server on $REDIS_PORT, already
# running (scripts/bench.sh starts them and calls this script). Memory is
# read from INFO memory used_memory; DEBUG GC (sluice with
# --enable-debug-command) makes sluice's figure exact, without it the Go heap
# may still hold garbage.
# Environment: N (requests per command, default 300000), KEYS_MEM (keys for
# the memory test, default 1000000; 0 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${SLUICE_PORT:?set SLUICE_PORT to a running sluice}" "${REDIS_PORT:?set REDIS_PORT to a running redis-server}"
N=${N:-300000}
KEYS_MEM=${KEYS_MEM:-1000000}

# The sliding window log as Redis users write it: refused requests are not
# added. KEYS[1]; ARGV = limit, window in seconds. Replies like SW.CHECK.
read -r -d '' lua <<'LUA' || true
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2]) * 1000000
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call("ZREMRANGEBYSCORE", KEYS[1], 0, now - window)
local count = redis.call("ZCARD", KEYS[1])
if count < limit then
  redis.call("ZADD", KEYS[1], now, now .. "-" .. count)
  redis.call("PEXPIRE", KEYS[1], math.ceil(window / 1000))
  return {0, limit, limit - count - 1, -1, math.ceil(window / 1000000)}
end
local oldest = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
local retry = math.ceil((tonumber(oldest[2]) + window - now) / 1000000)
return {1, limit, 0, retry, math.ceil(redis.call("PTTL", KEYS[1]) / 1000)}
LUA
sha=$(redis-cli -p "$REDIS_PORT" script load "$lua")

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

[ "$KEYS_MEM" -gt 0 ] || exit 0
echo
echo "memory with $KEYS_MEM live keys, one admitted request each (window 3600 s so none expire):"
# gen PRE POST writes KEYS_MEM commands "PRE key:N POST" in RESP for redis-cli --pipe.
gen() {
	awk -v n="$KEYS_MEM" -v pre="$1" -v post="$2" 'BEGIN {
		na = split(pre, a, " "); nb = split(post, b, " ")
		for (i = 0; i < n; i++) {
			key = sprintf("key:%012d", i)
			printf "*%d\r\n", na + 1 + nb
			for (j = 1; j <= na; j++) printf "$%d\r\n%s\r\n", length(a[j]), a[j]
			printf "$%d\r\n%s\r\n", length(key), key
			for (j = 1; j <= nb; j++) printf "$%d\r\n%s\r\n", length(b[j]), b[j]
		}
	}'
}
used() { redis-cli -p "$1" info memory | tr -d '\r' | awk -F: '$1 == "used_memory" {print $2}'; }
settle() {
	if [ "$1" = "$SLUICE_PORT" ]; then
		redis-cli -p "$1" debug gc >/dev/null 2>&1 || true
	fi
}
# mem PORT PRE POST prints bytes per key.
mem() {
	local port=$1 before after keys
	redis-cli -p "$port" flushall >/dev/null
	settle "$port"
	before=$(used "$port")
	gen "$2" "$3" | redis-cli -p "$port" --pipe >/dev/null
	settle "$port"
	after=$(used "$port")
	keys=$(redis-cli -p "$port" dbsize)
	if [ "$keys" -ne "$KEYS_MEM" ]; then
		echo "bench_window: $keys keys after loading $KEYS_MEM" >&2
		exit 1
	fi
	echo $(((after - before) / keys))
	redis-cli -p "$port" flushall >/dev/null
}
printf "%-38s %10s\n" "kind" "bytes/key"
printf "%-38s %10s\n" "sluice SW.CHECK (counter)" "$(mem "$SLUICE_PORT" SW.CHECK "100 3600")"
printf "%-38s %10s\n" "sluice SW.CHECK EXACT (log, 1 entry)" "$(mem "$SLUICE_PORT" SW.CHECK "100 3600 EXACT")"
printf "%-38s %10s\n" "sluice FW.CHECK" "$(mem "$SLUICE_PORT" FW.CHECK "100 3600")"
printf "%-38s %10s\n" "sluice CL.THROTTLE" "$(mem "$SLUICE_PORT" CL.THROTTLE "99 100 3600")"
printf "%-38s %10s\n" "redis-server sliding-log Lua (1 entry)" "$(mem "$REDIS_PORT" "EVALSHA $sha 1" "100 3600")"
