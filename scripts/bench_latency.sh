#!/usr/bin/env bash
# Replicated latency (issues #21, #57): CL.THROTTLE at -P 1 with 1, 10 and
# 50 callers, p50/p99 and rps, against one node, a 3-node cluster syncing
# its Raft log on every append (the default, the leader writing beside its
# replication), the same with --raft-leader-write first (hashicorp/raft's
# order: the leader's write, then the followers'), and one syncing on a
# timer (--raft-log-sync interval:200ms), all on disk, in the same run;
# ROUNDS alternating rounds (default 3), medians printed at the end, with
# the median time of one fdatasync of 4 KiB in the work directory.
#
# Environment: SLUICE (default bin/sluice), N (requests per measurement,
# default 20000), ROUNDS, BASE_PORT, DISK_DELAY (e.g. 1ms: the cluster
# members are built with -tags failpoints and every Raft log append waits
# that long first, a slower disk than this box's; the one node is not).
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-bin/sluice}
N=${N:-20000}
ROUNDS=${ROUNDS:-3}
base=${BASE_PORT:-7691}
WORK_PARENT=${TMPDIR:-/var/tmp}
. scripts/lib.sh
make -s build
member_flags=()
if [ -n "${DISK_DELAY:-}" ]; then
	go build -tags failpoints,vtprotobuf -o "$work/sluice-failpoints" ./cmd/sluice
	member_bin="$work/sluice-failpoints"
	member_flags=(--failpoints "raftlog-write=sleep-$DISK_DELAY")
fi

cluster() { # cluster <first port> <name> [flags…]
	local first=$1 name=$2
	shift 2
	local peers=""
	for i in 1 2 3; do peers="${peers:+$peers,}n$i=127.0.0.1:$((first + i))"; done
	for i in 1 2 3; do
		"${member_bin:-$SLUICE}" --node-id "n$i" --addr "127.0.0.1:$((first + i))" --data-dir "$work/$name$i" --peers "$peers" --log-level error "${member_flags[@]}" "$@" &
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
cluster $((base + 30)) first --raft-leader-write first
always=$(leader_of $((base + 10)))
interval=$(leader_of $((base + 20)))
first=$(leader_of $((base + 30)))
sleep 1

# measure <port> <callers>: "rps p50 p99"
measure() {
	redis-benchmark -p "$1" -c "$2" -n "$N" -r 100000 -P 1 --csv CL.THROTTLE key:__rand_int__ 100 10 1 1 2>/dev/null |
		awk -F'","' 'NR==2 { gsub(/"/, "", $0); split($0, f, ","); printf "%d %s %s\n", f[2], f[5], f[7] }'
}

results="$work/results"
for round in $(seq "$ROUNDS"); do
	for c in 1 10 50; do
		for target in single:$base always:$always first:$first interval:$interval; do
			name=${target%%:*} port=${target##*:}
			echo "$round $c $name $(measure "$port" "$c")" >>"$results"
		done
	done
done

echo "== CL.THROTTLE -P 1, medians of $ROUNDS rounds (rps, p50 ms, p99 ms) =="
printf "%-8s %-28s %-28s %-28s %-28s\n" callers "one node" "3-node, sync every append" "  the same, leader writes first" "3-node, sync every 200ms"
for c in 1 10 50; do
	row="$c"
	for name in single always first interval; do
		med=$(awk -v c="$c" -v n="$name" '$2 == c && $3 == n { print $4, $5, $6 }' "$results" | sort -n -k2 |
			awk '{ a[NR] = $0 } END { print a[int((NR + 1) / 2)] }')
		read -r rps p50 p99 <<<"$med"
		row="$row|$(printf "%6s/s %6s %6s" "$rps" "$p50" "$p99")"
	done
	echo "$row" | awk -F'|' '{ printf "%-8s %-28s %-28s %-28s %-28s\n", $1, $2, $3, $4, $5 }'
done
python3 - "$work" <<'PY'
import os, statistics, sys, time
path = os.path.join(sys.argv[1], "fsync-probe")
fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
times = []
for _ in range(200):
    os.pwrite(fd, b"x" * 4096, 0)
    t = time.perf_counter()
    os.fdatasync(fd)
    times.append(time.perf_counter() - t)
os.close(fd)
print("one fdatasync of 4 KiB here: median %.2f ms" % (statistics.median(times) * 1000))
PY
[ -z "${DISK_DELAY:-}" ] || echo "every Raft log append on the cluster members waited $DISK_DELAY first (DISK_DELAY)"
