#!/usr/bin/env bash
# Replicated latency (issue #21): CL.THROTTLE at -P 1 with 1, 10 and 50
# callers, p50/p99 and rps, against one node, a 3-node cluster syncing its
# Raft log on every append (the default) and one syncing on a timer
# (--raft-log-sync interval:200ms), all on disk, in the same run; ROUNDS
# alternating rounds (default 3), medians printed at the end.
#
# Environment: SLUICE (default bin/sluice), N (requests per measurement,
# default 20000), ROUNDS, BASE_PORT.
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-bin/sluice}
N=${N:-20000}
ROUNDS=${ROUNDS:-3}
base=${BASE_PORT:-7691}
WORK_PARENT=${TMPDIR:-/var/tmp}
. scripts/lib.sh
make -s build

cluster() { # cluster <first port> <name> [flags…]
	local first=$1 name=$2
	shift 2
	local peers=""
	for i in 1 2 3; do peers="${peers:+$peers,}n$i=127.0.0.1:$((first + i))"; done
	for i in 1 2 3; do
		"$SLUICE" --node-id "n$i" --addr "127.0.0.1:$((first + i))" --data-dir "$work/$name$i" --peers "$peers" --log-level error "$@" &
		pids+=($!)
	done
}
leader_of() { # leader_of <first port>
	for _ in $(seq 100); do
		for i in 1 2 3; do
			if [ "$(redis-cli -p $(($1 + i)) ROLE 2>/dev/null | head -1)" = master ]; then
				echo $(($1 + i))
				return
			fi
		done
		sleep 0.1
	done
	echo "no leader" >&2
	exit 1
}

"$SLUICE" --addr "127.0.0.1:$base" --data-dir "$work/single" --log-level error &
pids+=($!)
cluster $((base + 10)) always
cluster $((base + 20)) interval --raft-log-sync interval:200ms
always=$(leader_of $((base + 10)))
interval=$(leader_of $((base + 20)))
sleep 1

# measure <port> <callers>: "rps p50 p99"
measure() {
	redis-benchmark -p "$1" -c "$2" -n "$N" -r 100000 -P 1 --csv CL.THROTTLE key:__rand_int__ 100 10 1 1 2>/dev/null |
		awk -F'","' 'NR==2 { gsub(/"/, "", $0); split($0, f, ","); printf "%d %s %s\n", f[2], f[5], f[7] }'
}

results="$work/results"
for round in $(seq "$ROUNDS"); do
	for c in 1 10 50; do
		for target in single:$base always:$always interval:$interval; do
			name=${target%%:*} port=${target##*:}
			echo "$round $c $name $(measure "$port" "$c")" >>"$results"
		done
	done
done

echo "== CL.THROTTLE -P 1, medians of $ROUNDS rounds (rps, p50 ms, p99 ms) =="
printf "%-8s %-28s %-28s %-28s\n" callers "one node" "3-node, sync every append" "3-node, sync every 200ms"
for c in 1 10 50; do
	row="$c"
	for name in single always interval; do
		med=$(awk -v c="$c" -v n="$name" '$2 == c && $3 == n { print $4, $5, $6 }' "$results" | sort -n -k2 |
			awk '{ a[NR] = $0 } END { print a[int((NR + 1) / 2)] }')
		read -r rps p50 p99 <<<"$med"
		row="$row|$(printf "%6s/s %6s %6s" "$rps" "$p50" "$p99")"
	done
	echo "$row" | awk -F'|' '{ printf "%-8s %-28s %-28s %-28s\n", $1, $2, $3, $4 }'
done
