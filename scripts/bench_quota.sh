#!/usr/bin/env bash
# QUOTA.CHECK throughput under each --quota-fsync policy, beside CL.THROTTLE
# on the same server in the same run: starts three sluice processes (always,
# everysec, no), each with a data directory of its own on the disk under
# $TMPDIR, runs redis-benchmark -P 16 -c 50 against each, and prints a table
# with the fsyncs each policy did (INFO sluice_quota_fsyncs) and how many
# quota changes shared one.
#
# Environment: SLUICE (binary, default bin/sluice, built if missing), PORT
# (first of three ports, default 21480), N (requests per command, default
# 500000), P (pipeline depth, default 16), C (clients, default 50).
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-bin/sluice}
PORT=${PORT:-21480}
N=${N:-500000}
P=${P:-16}
C=${C:-50}
[ -x "$SLUICE" ] || go build -o "$SLUICE" ./cmd/sluice

policies=(always everysec no)
. scripts/lib.sh

for i in "${!policies[@]}"; do
	p=${policies[$i]}
	"$SLUICE" --addr "127.0.0.1:$((PORT + i))" --data-dir "$work/$p" --quota-fsync "$p" \
		--log-level warn 2>"$work/$p.log" &
	pids+=($!)
done
for i in "${!policies[@]}"; do
	for _ in $(seq 100); do
		redis-cli -p $((PORT + i)) PING >/dev/null 2>&1 && break
		sleep 0.1
	done
	redis-cli -p $((PORT + i)) PING >/dev/null
done

# rps PORT ARGS... prints requests per second.
rps() {
	local port=$1
	shift
	redis-benchmark -p "$port" -c "$C" -n "$N" -r 100000 -P "$P" --csv "$@" 2>/dev/null |
		awk -F'","' 'NR==2 {print int($2)}'
}
info() { redis-cli -p "$1" INFO persistence | tr -d '\r' | awk -F: -v f="$2" '$1 == f {print $2}'; }

echo "redis-benchmark -c $C -n $N -r 100000 -P $P, requests/s (data dirs under ${TMPDIR:-/tmp}):"
printf "%-10s %14s %14s %10s %14s\n" "fsync" "QUOTA.CHECK" "CL.THROTTLE" "fsyncs" "checks/fsync"
for i in "${!policies[@]}"; do
	port=$((PORT + i))
	out=$(redis-cli -p "$port" QUOTA.CHECK probe 10 MONTH)
	[ "$(printf '%s\n' "$out" | wc -l)" -eq 5 ] || { echo "QUOTA.CHECK answered: $out" >&2; exit 1; }
	before=$(info "$port" sluice_quota_fsyncs)
	q=$(rps "$port" QUOTA.CHECK "q:__rand_int__" 1000000000 MONTH ANCHOR 1706659200 TZ Europe/Berlin)
	after=$(info "$port" sluice_quota_fsyncs)
	g=$(rps "$port" CL.THROTTLE "g:__rand_int__" 99 100 60)
	syncs=$((after - before))
	per=$(awk -v n="$N" -v s="$syncs" 'BEGIN { if (s > 0) printf "%.0f", n / s; else print "-" }')
	printf "%-10s %14d %14d %10d %14s\n" "${policies[$i]}" "$q" "$g" "$syncs" "$per"
done
