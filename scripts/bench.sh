#!/usr/bin/env bash
# make bench: sluice's CL.THROTTLE against a local redis-server running the
# GCRA Lua script users run today, and plain INCR, in the same run; then
# memory per key with 1M live keys (scripts/bench_memory.sh). Other
# limiters' scripts (scripts/bench_*.sh) run after, against the same two
# servers.
#
# Environment: SLUICE (binary, default bin/sluice), N (requests, default
# 1000000), KEYS_MEM (keys for the memory test, default 1000000; read by
# scripts/bench_memory.sh), EXTRAS (0: stop after the throughput table).
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-bin/sluice}
N=${N:-1000000}
export KEYS_MEM=${KEYS_MEM:-1000000}
export SLUICE_PORT=${SLUICE_PORT:-7481} REDIS_PORT=${REDIS_PORT:-7482}

if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools
	else
		echo "bench needs redis-server and redis-benchmark (apt-get install redis-server redis-tools)" >&2
		exit 1
	fi
fi

work=$(mktemp -d)
cleanup() {
	redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
	[ -n "${sluice_pid:-}" ] && kill "$sluice_pid" 2>/dev/null && wait "$sluice_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

"$SLUICE" --addr "127.0.0.1:$SLUICE_PORT" --data-dir "$work/sluice" --enable-debug-command --log-level warn &
sluice_pid=$!
redis-server --port "$REDIS_PORT" --save '' --appendonly no --daemonize yes --dir "$work" >/dev/null
for _ in $(seq 50); do
	redis-cli -p "$SLUICE_PORT" ping >/dev/null 2>&1 && redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break
	sleep 0.1
done

sha=$(redis-cli -p "$REDIS_PORT" script load "$(cat scripts/gcra.lua)")

# run PORT PIPELINE ARGS... prints "requests-per-second p99-ms".
run() {
	local port=$1 p=$2
	shift 2
	redis-benchmark -p "$port" -c 50 -n "$N" -r 100000 -P "$p" --csv "$@" 2>/dev/null |
		awk -F'","' 'NR==2 {gsub(/"/, "", $7); print int($2), $7}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

echo "== throughput (redis-benchmark -c 50 -n $N -r 100000), requests/s and p99 ms =="
printf "%-34s %12s %8s %12s %8s\n" "command" "-P 1" "p99" "-P 16" "p99"
declare -A rps p99
for p in 1 16; do
	read -r rps[cl,$p] p99[cl,$p] < <(run "$SLUICE_PORT" "$p" CL.THROTTLE key:__rand_int__ 100 10 1 1)
	read -r rps[lua,$p] p99[lua,$p] < <(run "$REDIS_PORT" "$p" EVALSHA "$sha" 1 key:__rand_int__ 100 10 1 1)
	read -r rps[incr,$p] p99[incr,$p] < <(run "$REDIS_PORT" "$p" INCR key:__rand_int__)
	read -r rps[ping,$p] p99[ping,$p] < <(run "$REDIS_PORT" "$p" PING)
	read -r rps[sping,$p] p99[sping,$p] < <(run "$SLUICE_PORT" "$p" PING)
done
row() { printf "%-34s %12s %8s %12s %8s\n" "$1" "${rps[$2,1]}" "${p99[$2,1]}" "${rps[$2,16]}" "${p99[$2,16]}"; }
row "sluice CL.THROTTLE" cl
row "redis-server GCRA Lua (EVALSHA)" lua
row "redis-server INCR" incr
row "redis-server PING" ping
row "sluice PING" sping
echo
echo "CL.THROTTLE / INCR:      -P 1 $(ratio "${rps[cl,1]}" "${rps[incr,1]}")x   -P 16 $(ratio "${rps[cl,16]}" "${rps[incr,16]}")x   (target: >= 1.0x at both)"
echo "CL.THROTTLE / Redis+Lua: -P 1 $(ratio "${rps[cl,1]}" "${rps[lua,1]}")x   -P 16 $(ratio "${rps[cl,16]}" "${rps[lua,16]}")x   (target at -P 16: >= 8x)"
echo "p99 at -P 1: CL.THROTTLE ${p99[cl,1]} ms, INCR ${p99[incr,1]} ms   (target: CL.THROTTLE <= INCR)"
echo "sluice PING / redis PING: -P 1 $(ratio "${rps[sping,1]}" "${rps[ping,1]}")x   -P 16 $(ratio "${rps[sping,16]}" "${rps[ping,16]}")x   (the network path alone)"
echo
# Memory per key (RSS, every kind against its Lua counterpart) is
# scripts/bench_memory.sh, run below with the other limiters' scripts.
[ "${EXTRAS:-1}" = 0 ] && exit 0
for extra in scripts/bench_*.sh; do
	[ -x "$extra" ] || continue
	echo
	echo "== $extra =="
	redis-cli -p "$SLUICE_PORT" flushall >/dev/null
	redis-cli -p "$REDIS_PORT" flushall >/dev/null
	"$extra"
done
