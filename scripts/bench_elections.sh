#!/usr/bin/env bash
# Spurious elections under load, and failover after SIGKILL, for a set of
# Raft timeouts (issue #30 item 3). A local three-node cluster takes
# redis-benchmark at -c 50 on its leader while a busy loop runs on every
# core (the CPU oversubscribed); leader changes are counted from the term
# of each member over the run. Then scripts/failoverbench kills the leader
# KILLS times under the same timeouts and reports the median failover.
#
# Environment: SLUICE (binary, default bin/sluice), SECONDS_UNDER_LOAD
# (default 600), KILLS (default 15), RAFT (flags for every node, e.g.
# "--raft-heartbeat-timeout 300ms --raft-election-timeout 300ms
# --raft-leader-lease-timeout 250ms"; default: the binary's defaults),
# PIPELINE (redis-benchmark -P, default 1), BUSY (busy loops per core,
# default 1), PAIR=1 (kill a follower halfway: the last half runs on two
# members, whose every heartbeat counts), DISK_DELAY (e.g. 5ms: the members
# are built with -tags failpoints and every Raft log append waits that
# long first, a slow disk).
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-bin/sluice}
DURATION=${SECONDS_UNDER_LOAD:-600}
KILLS=${KILLS:-15}
RAFT=${RAFT:-}
PIPELINE=${PIPELINE:-1}
BUSY=${BUSY:-1}
PAIR=${PAIR:-0}
base=${BASE_PORT:-7611}
. scripts/lib.sh

member_flags=()
if [ -n "${DISK_DELAY:-}" ]; then
	go build -tags failpoints,vtprotobuf -o "$work/sluice-failpoints" ./cmd/sluice
	SLUICE="$work/sluice-failpoints"
	member_flags=(--failpoints "raftlog-write=sleep-$DISK_DELAY")
fi
peers=""
for i in 1 2 3; do peers="${peers:+$peers,}n$i=127.0.0.1:$((base + i))"; done
for i in 1 2 3; do
	# shellcheck disable=SC2086
	"$SLUICE" --node-id "n$i" --addr "127.0.0.1:$((base + i))" --data-dir "$work/n$i" --peers "$peers" --log-level info $RAFT "${member_flags[@]}" 2>"$work/n$i.log" &
	pids+=($!)
done
leader() {
	for i in 1 2 3; do
		[ "$(redis-cli -p $((base + i)) ROLE 2>/dev/null | head -1)" = master ] && { echo $((base + i)); return 0; }
	done
	return 0
}
term() { redis-cli -p "$1" RAFT INFO 2>/dev/null | awk 'p { print; exit } $0 == "term" { p = 1 }'; }
l=""
for _ in $(seq 100); do l=$(leader); [ -n "$l" ] && break; sleep 0.1; done
[ -n "$l" ] || { echo "no leader" >&2; exit 1; }
sleep 1
t0=$(term "$l")

# The CPU oversubscribed: a busy loop per core, beside the load.
for _ in $(seq $(($(nproc) * BUSY))); do
	bash -c 'while :; do :; done' &
	pids+=($!)
done
end=$((SECONDS + DURATION))
half=$((SECONDS + DURATION / 2))
requests=0
while [ $SECONDS -lt $end ]; do
	if [ "$PAIR" = 1 ] && [ $SECONDS -ge $half ]; then
		PAIR=done
		cur=$(leader)
		for i in 1 2 3; do
			if [ $((base + i)) != "$cur" ]; then
				kill -9 "${pids[$((i - 1))]}"
				echo "killed follower n$i at $((DURATION / 2))s: the rest runs on two members"
				break
			fi
		done
	fi
	cur=$(leader)
	[ -n "$cur" ] || { sleep 0.1; continue; }
	# Bounded rounds, so a leader change moves the load to the new leader.
	redis-benchmark -p "$cur" -c 50 -P "$PIPELINE" -n 200000 -r 100000 -q CL.THROTTLE key:__rand_int__ 100 10 1 1 >/dev/null 2>&1 || true
	requests=$((requests + 200000))
done
for p in "${pids[@]:3}"; do kill "$p" 2>/dev/null || true; done
pids=("${pids[@]:0:3}")
l=$(leader)
t1=$(term "$l")
# The first election, before the load, is the cluster's start.
changes=$(($(cat "$work"/n*.log | grep -c "election won" || true) - 1))
echo "raft flags: ${RAFT:-(defaults)}${DISK_DELAY:+; every log append waited $DISK_DELAY first}"
echo "under load for ${DURATION}s (redis-benchmark -c 50 -P $PIPELINE on the leader, $BUSY busy loop(s) on each of $(nproc) cores, ~$requests requests):"
echo "  term $t0 -> $t1, leader changes $changes (per 10 minutes: $(awk -v c="$changes" -v d="$DURATION" 'BEGIN { printf "%.1f", c * 600 / d }'))"
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
pids=()
go run ./scripts/failoverbench -bin "$SLUICE" -kills "$KILLS" -base-port $((base + 20)) -args "$RAFT" | tail -1
