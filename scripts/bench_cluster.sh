#!/usr/bin/env bash
# Replicated CL.THROTTLE against the leader of a local three-node cluster,
# beside the same binary as one node, in the same run; then failover times
# over repeated SIGKILLs of the leader (scripts/failoverbench).
#
# Environment: SLUICE (binary, default bin/sluice), N (requests, default
# 500000), KILLS (leader kills, default 20).
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-bin/sluice}
N=${N:-500000}
KILLS=${KILLS:-20}
base=${BASE_PORT:-7491}
. scripts/lib.sh

rps() {
	local port=$1 p=$2
	shift 2
	redis-benchmark -p "$port" -c 50 -n "$N" -r 100000 -P "$p" --csv "$@" 2>/dev/null |
		awk -F'","' 'NR==2 {print int($2)}'
}

"$SLUICE" --addr "127.0.0.1:$base" --data-dir "$work/single" --log-level warn &
pids+=($!)
peers=""
for i in 1 2 3; do peers="${peers:+$peers,}n$i=127.0.0.1:$((base + i))"; done
for i in 1 2 3; do
	"$SLUICE" --node-id "n$i" --addr "127.0.0.1:$((base + i))" --data-dir "$work/n$i" --peers "$peers" --log-level warn &
	pids+=($!)
done
leader=""
for _ in $(seq 100); do
	for i in 1 2 3; do
		[ "$(redis-cli -p $((base + i)) ROLE 2>/dev/null | head -1)" = master ] && leader=$((base + i))
	done
	[ -n "$leader" ] && redis-cli -p "$base" ping >/dev/null 2>&1 && break
	sleep 0.1
done
[ -n "$leader" ] || { echo "no leader" >&2; exit 1; }

echo "== replicated CL.THROTTLE (redis-benchmark -c 50 -n $N -r 100000) =="
printf "%-30s %12s %12s\n" "" "-P 1" "-P 16"
s1=$(rps "$base" 1 CL.THROTTLE key:__rand_int__ 100 10 1 1)
s16=$(rps "$base" 16 CL.THROTTLE key:__rand_int__ 100 10 1 1)
r1=$(rps "$leader" 1 CL.THROTTLE key:__rand_int__ 100 10 1 1)
r16=$(rps "$leader" 16 CL.THROTTLE key:__rand_int__ 100 10 1 1)
printf "%-30s %12s %12s\n" "single node" "$s1" "$s16" "3-node leader" "$r1" "$r16"
awk -v a="$r16" -v b="$s16" 'BEGIN { printf "replicated/single at -P 16: %.2f (target >= 0.5)\n", a / b }'
echo "batch sizes (commands per log entry, by power of two):"
redis-cli -p "$leader" RAFT INFO | awk 'p { print "  " $0 } /^batches$/ { p = 1 }'
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
pids=()

echo "== failover: $KILLS SIGKILLs of the leader =="
[ "$KILLS" -gt 0 ] && go run ./scripts/failoverbench --bin "$SLUICE" --kills "$KILLS" --base-port $((base + 10))
true
