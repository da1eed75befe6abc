#!/usr/bin/env bash
# The memory budgets' cost (issue #43): one node of this build with every
# budget on (--requirepass, so the gRPC door checks each call's headers and
# times its body; --maxmemory, so each command that may store reads the
# sampled use; maxmemory-clients, always on) against one node built from
# BASE_REV (default: the commit before the budgets), in the same run.
# ROUNDS (default 5) rounds alternate which goes first; each measures
# CL.THROTTLE with redis-benchmark (-c 50, -P 1 and -P 16, N requests) and
# ShouldRateLimit with scripts/rlsbench (50 callers, D seconds). It prints
# every measurement, then each one's medians and the ratio new/base.
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-bin/sluice}
BASE_REV=${BASE_REV:-ddbb65e}
ROUNDS=${ROUNDS:-5}
N=${N:-400000}
D=${D:-5s}
port=${BASE_PORT:-7691}
. scripts/lib.sh

make -s build
go build -o "$work/rlsbench" ./scripts/rlsbench
git worktree add -q --detach "$work/base" "$BASE_REV"
trap 'git worktree remove --force "$work/base" 2>/dev/null; cleanup' EXIT
(cd "$work/base" && go build -tags=vtprotobuf -o "$work/sluice-base" ./cmd/sluice)

cat >"$work/rules.yaml" <<'YAML'
domain: bench
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000}
YAML

# new: port, port+100 (gRPC); base: port+1, port+101.
"$SLUICE" --addr "127.0.0.1:$port" --grpc-addr "127.0.0.1:$((port + 100))" --data-dir "$work/new" --rules "$work/rules.yaml" \
	--requirepass bench --maxmemory 4gb --log-level error &
pids+=($!)
"$work/sluice-base" --addr "127.0.0.1:$((port + 1))" --grpc-addr "127.0.0.1:$((port + 101))" --data-dir "$work/base-data" \
	--rules "$work/rules.yaml" --requirepass bench --log-level error &
pids+=($!)
for _ in $(seq 100); do
	redis-cli -a bench --no-auth-warning -p "$port" ping >/dev/null 2>&1 &&
		redis-cli -a bench --no-auth-warning -p $((port + 1)) ping >/dev/null 2>&1 && break
	sleep 0.1
done

# resp PORT PIPELINE prints requests/s.
resp() {
	redis-benchmark -a bench -p "$1" -c 50 -n "$N" -r 100000 -P "$2" --csv CL.THROTTLE key:__rand_int__ 100 10 1 1 2>/dev/null |
		awk -F'","' 'NR==2 {print int($2)}'
}
# grpc PORT prints calls/s.
grpc() {
	"$work/rlsbench" -addr "127.0.0.1:$1" -c 50 -d "$D" -token bench | awk '{for (i = 1; i <= NF; i++) if ($i ~ /\/s$/) {sub(/\/s$/, "", $i); print int($i)}}'
}

results="$work/results"
: >"$results"
measure() { # which port grpcport
	echo "$1 resp-P1 $(resp "$2" 1)" | tee -a "$results"
	echo "$1 resp-P16 $(resp "$2" 16)" | tee -a "$results"
	echo "$1 grpc-c50 $(grpc "$3")" | tee -a "$results"
}
for round in $(seq "$ROUNDS"); do
	echo "== round $round"
	if ((round % 2)); then
		measure new "$port" $((port + 100))
		measure base $((port + 1)) $((port + 101))
	else
		measure base $((port + 1)) $((port + 101))
		measure new "$port" $((port + 100))
	fi
done

echo "== medians over $ROUNDS rounds (requests or calls per second), and the median of each round's ratio"
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for what in resp-P1 resp-P16 grpc-c50; do
	n=$(awk -v w="$what" '$1 == "new" && $2 == w {print $3}' "$results" | median)
	b=$(awk -v w="$what" '$1 == "base" && $2 == w {print $3}' "$results" | median)
	# The i-th new and the i-th base measurement of a kind are one round's pair.
	pairs=$(awk -v w="$what" '$2 == w && $1 == "new" {n[++i] = $3} $2 == w && $1 == "base" {b[++j] = $3}
		END {for (k = 1; k <= i; k++) printf "%.3f\n", n[k] / b[k]}' "$results")
	printf "%-9s new %8d  base %8d  ratio of medians %s  median ratio %s (rounds: %s)\n" "$what" "$n" "$b" \
		"$(awk -v a="$n" -v b="$b" 'BEGIN {printf "%.3f", a / b}')" "$(echo "$pairs" | median)" "$(echo $pairs)"
done
