#!/usr/bin/env bash
# Memory an operator pays per key: resident set size (RSS) growth with
# KEYS_MEM live keys of each limiter kind on sluice, against the same keys
# made by its Redis + Lua counterpart (scripts/gcra.lua, scripts/lua/*.lua,
# scripts/concbench/acquire.lua) on redis-server, in the same run. Each
# measurement starts a fresh process, loads the keys through redis-cli
# --pipe, waits a moment and reads /proc/PID/statm: no forced GC, no help.
#
# Environment: SLUICE (binary, default bin/sluice, built if missing),
# KEYS_MEM (default 1000000; 0 skips), MEM_PORT (default 7471), KINDS (the
# kinds to measure, space-separated; default all).
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-bin/sluice}
KEYS_MEM=${KEYS_MEM:-1000000}
port=${MEM_PORT:-7471}
[ "$KEYS_MEM" -gt 0 ] || exit 0
[ -x "$SLUICE" ] || go build -o "$SLUICE" ./cmd/sluice
[ -r /proc/self/statm ] || { echo "bench_memory: needs /proc (Linux)" >&2; exit 0; }
work=$(mktemp -d)
pid=""
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# gen PRE POST writes KEYS_MEM commands "PRE key:N POST" in RESP; a word
# "@ID" in POST becomes a per-key id.
gen() {
	awk -v n="$KEYS_MEM" -v pre="$1" -v post="$2" 'BEGIN {
		na = split(pre, a, " "); nb = split(post, b, " ")
		for (i = 0; i < n; i++) {
			key = sprintf("key:%012d", i)
			printf "*%d\r\n", na + 1 + nb
			for (j = 1; j <= na; j++) printf "$%d\r\n%s\r\n", length(a[j]), a[j]
			printf "$%d\r\n%s\r\n", length(key), key
			for (j = 1; j <= nb; j++) {
				w = b[j]
				if (w == "@ID") w = sprintf("id:%d", i)
				printf "$%d\r\n%s\r\n", length(w), w
			}
		}
	}'
}
rss() { awk '{print $2 * 4096}' "/proc/$1/statm"; }
wait_up() {
	for _ in $(seq 100); do
		redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	echo "bench_memory: server on $port did not start" >&2
	exit 1
}
# measure sluice|redis SCRIPT PRE POST prints RSS bytes per key.
measure() {
	local server=$1 script=$2 pre=$3 post=$4 before after keys sha
	rm -rf "$work/data"
	if [ "$server" = sluice ]; then
		"$SLUICE" --addr "127.0.0.1:$port" --data-dir "$work/data" --log-level warn &
	else
		redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >/dev/null &
	fi
	pid=$!
	wait_up
	if [ -n "$script" ]; then
		sha=$(redis-cli -p "$port" script load "$(cat "$script")")
		pre="EVALSHA $sha 1"
	fi
	before=$(rss "$pid")
	gen "$pre" "$post" | redis-cli -p "$port" --pipe >/dev/null
	sleep 1
	after=$(rss "$pid")
	keys=$(redis-cli -p "$port" dbsize)
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=""
	if [ "$keys" -lt "$KEYS_MEM" ]; then
		echo "bench_memory: $keys keys after loading $KEYS_MEM ($server $pre)" >&2
		exit 1
	fi
	echo $(((after - before) / KEYS_MEM))
}

month_end=$(($(date +%s) + 30 * 86400))
kinds=(gcra sliding-counter sliding-log fixed-window conc quota)
sluice_cmd=("CL.THROTTLE|100 1 86400 1" "SW.CHECK|100 3600" "SW.CHECK|100 3600 EXACT" "FW.CHECK|100 3600"
	"CONC.ACQUIRE|100 3600 @ID" "QUOTA.CHECK|100 MONTH")
lua=("scripts/gcra.lua|100 1 86400 1" "scripts/lua/sliding_counter.lua|100 3600" "scripts/lua/sliding_log.lua|100 3600"
	"scripts/lua/fixed_window.lua|100 3600" "scripts/concbench/acquire.lua|100 3600000 @ID"
	"scripts/lua/quota.lua|100 1 $month_end")
echo "RSS growth per key, $KEYS_MEM live keys, fresh process each (target: sluice <= 0.5x Redis+Lua):"
printf "%-16s %14s %16s %8s\n" "kind" "sluice B/key" "Redis+Lua B/key" "ratio"
for i in "${!kinds[@]}"; do
	case " ${KINDS:-${kinds[*]}} " in *" ${kinds[$i]} "*) ;; *) continue ;; esac
	s=$(measure sluice "" "${sluice_cmd[$i]%%|*}" "${sluice_cmd[$i]#*|}")
	r=$(measure redis "${lua[$i]%%|*}" "" "${lua[$i]#*|}")
	awk -v k="${kinds[$i]}" -v s="$s" -v r="$r" 'BEGIN { printf "%-16s %14d %16d %7.2fx\n", k, s, r, (r > 0 ? s / r : 0) }'
done
