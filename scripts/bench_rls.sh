#!/usr/bin/env bash
# Envoy's ShouldRateLimit with one descriptor of random values at 1, 10 and
# 50 concurrent callers (scripts/rlsbench, Envoy's generated client),
# against, in the same run: sluice as one node, a 3-node sluice cluster's
# leader and one of its followers (which forwards to the leader), and
# envoyproxy/ratelimit over a local redis-server. Rounds alternate the
# targets; ROUNDS (default 3) rounds, D (default 5s) per measurement;
# BASELINE=<binary> adds one node and a 3-node cluster's follower of another
# build to every round.
#
# Targets (issue #20): sluice single node >= 3x the reference's calls/s at
# 50 callers with <= 1/3 of its p99; the 3-node cluster >= 1x the reference.
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-bin/sluice}
ROUNDS=${ROUNDS:-3}
D=${D:-5s}
base=${BASE_PORT:-7591}
. scripts/lib.sh

make -s build
go build -o "$work/rlsbench" ./scripts/rlsbench
REF_VERSION=v1.4.1-0.20260122083618-3fb702589d36
REF_DIR=${RLS_REFERENCE_DIR:-$PWD/bin/reference}
[ -x "$REF_DIR/service_cmd" ] || GOBIN=$REF_DIR go install "github.com/envoyproxy/ratelimit/src/service_cmd@$REF_VERSION"

rules="$work/rules"
mkdir -p "$rules" "$work/runtime/ratelimit/config"
cat >"$rules/bench.yaml" <<'YAML'
domain: bench
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000}
YAML
cp "$rules/bench.yaml" "$work/runtime/ratelimit/config/"

# sluice, one node
"$SLUICE" --addr "127.0.0.1:$base" --grpc-addr "127.0.0.1:$((base + 100))" --data-dir "$work/single" --rules "$rules" --log-level error &
pids+=($!)
# BASELINE (a binary of another version): one node of it, in the same rounds.
if [ -n "${BASELINE:-}" ]; then
	"$BASELINE" --addr "127.0.0.1:$((base + 60))" --grpc-addr "127.0.0.1:$((base + 160))" --data-dir "$work/baseline" --rules "$rules" --log-level error &
	pids+=($!)
fi
# sluice, three nodes
peers=""
for i in 1 2 3; do peers="${peers:+$peers,}n$i=127.0.0.1:$((base + i))"; done
for i in 1 2 3; do
	"$SLUICE" --node-id "n$i" --addr "127.0.0.1:$((base + i))" --grpc-addr "127.0.0.1:$((base + 100 + i))" \
		--data-dir "$work/n$i" --peers "$peers" --rules "$rules" --log-level error &
	pids+=($!)
done
# BASELINE: three nodes of it too (its follower is measured beside ours).
if [ -n "${BASELINE:-}" ]; then
	bpeers=""
	for i in 1 2 3; do bpeers="${bpeers:+$bpeers,}b$i=127.0.0.1:$((base + 70 + i))"; done
	for i in 1 2 3; do
		"$BASELINE" --node-id "b$i" --addr "127.0.0.1:$((base + 70 + i))" --grpc-addr "127.0.0.1:$((base + 170 + i))" \
			--data-dir "$work/b$i" --peers "$bpeers" --rules "$rules" --log-level error &
		pids+=($!)
	done
fi
# envoyproxy/ratelimit over redis-server
redis-server --bind 127.0.0.1 --port $((base + 50)) --save "" --appendonly no >/dev/null &
pids+=($!)
# The reference exits if Redis does not answer at its start.
for _ in $(seq 100); do
	redis-cli -p $((base + 50)) ping >/dev/null 2>&1 && break
	sleep 0.05
done
RUNTIME_ROOT="$work/runtime" RUNTIME_SUBDIRECTORY=ratelimit RUNTIME_WATCH_ROOT=false REDIS_SOCKET_TYPE=tcp \
	REDIS_URL=127.0.0.1:$((base + 50)) USE_STATSD=false LOG_LEVEL=warn HOST=127.0.0.1 GRPC_HOST=127.0.0.1 DEBUG_HOST=127.0.0.1 \
	GRPC_PORT=$((base + 150)) PORT=$((base + 151)) DEBUG_PORT=$((base + 152)) "$REF_DIR/service_cmd" 2>"$work/ref.log" &
pids+=($!)

leader="" follower=""
for _ in $(seq 100); do
	leader=""
	for i in 1 2 3; do
		[ "$(redis-cli -p $((base + i)) ROLE 2>/dev/null | head -1)" = master ] && leader=$i
	done
	[ -n "$leader" ] && redis-cli -p "$base" ping >/dev/null 2>&1 && break
	sleep 0.1
done
[ -n "$leader" ] || { echo "no leader" >&2; exit 1; }
follower=$((leader % 3 + 1))
bfollower=""
if [ -n "${BASELINE:-}" ]; then
	for _ in $(seq 100); do
		for i in 1 2 3; do
			[ "$(redis-cli -p $((base + 70 + i)) ROLE 2>/dev/null | head -1)" = slave ] && bfollower=$i
		done
		[ -n "$bfollower" ] && break
		sleep 0.1
	done
fi
for _ in $(seq 100); do
	curl -sf "http://127.0.0.1:$((base + 151))/healthcheck" >/dev/null 2>&1 && break
	sleep 0.1
done
curl -sf "http://127.0.0.1:$((base + 151))/healthcheck" >/dev/null || { echo "envoyproxy/ratelimit did not start:" >&2; cat "$work/ref.log" >&2; exit 1; }
sleep 1 # the leader's rules reach every node

for round in $(seq "$ROUNDS"); do
	echo "== round $round"
	for c in ${CALLERS:-1 10 50}; do
		"$work/rlsbench" -addr "127.0.0.1:$((base + 150))" -c "$c" -d "$D" -label "envoyproxy/ratelimit+redis"
		"$work/rlsbench" -addr "127.0.0.1:$((base + 100))" -c "$c" -d "$D" -label "sluice single node"
		[ -z "${BASELINE:-}" ] || "$work/rlsbench" -addr "127.0.0.1:$((base + 160))" -c "$c" -d "$D" -label "baseline single node"
		"$work/rlsbench" -addr "127.0.0.1:$((base + 100 + leader))" -c "$c" -d "$D" -label "sluice 3-node leader"
		"$work/rlsbench" -addr "127.0.0.1:$((base + 100 + follower))" -c "$c" -d "$D" -label "sluice 3-node follower"
		[ -z "$bfollower" ] || "$work/rlsbench" -addr "127.0.0.1:$((base + 170 + bfollower))" -c "$c" -d "$D" -label "baseline 3-node follower"
	done
done
