#!/usr/bin/env bash
# A slot migration under load (issue #35): two groups of three, KEYS
# counters (default 1M) filled over the whole key space, callers on keys of
# the moving slots and of the others, then slots FROM-TO (0-4095: a
# quarter of the keys, half of group 1's) move from group 1 to group 2.
# Reports keys/s and MB/s moved, each chunk's TRYAGAIN window (p50/p99 from
# the source's histogram) and the callers' latency before and during the
# move. ROUNDS (default 1) rounds of fresh clusters, one after the other;
# each round runs one cluster per value of CLIENTS (default "separate";
# or "separate shared"): the callers of moving and of other slots on separate
# ClusterClients (what the servers do to other slots' callers), or on one
# (go-redis then reloads its slot map for every MOVED, which all its
# callers feel), alternating on the same box. Latency is reported before,
# during and after the move (the new layout, as long as -after).
# Targets: callers on other slots see no change in p99; callers on a moving
# chunk are blocked ≤ 20 ms at p99.
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-bin/sluice}
ROUNDS=${ROUNDS:-1}
KEYS=${KEYS:-1000000}
FROM=${FROM:-0}
TO=${TO:-4095}
CALLERS=${CALLERS:-8}
CLIENTS=${CLIENTS:-separate}
base=${BASE_PORT:-7800}
. scripts/lib.sh
make -s build
go build -o "$work/migratebench" ./scripts/migratebench

for round in $(seq "$ROUNDS"); do
for clients in $CLIENTS; do
	echo "== round $round, $clients clients"
	m="$work/map$round-$clients.yaml"
	{
		echo "epoch: 1"
		echo "groups:"
		port=$base
		for g in 1 2; do
			slots='"0-8191"'
			[ $g = 2 ] && slots='"8192-16383"'
			mem=""
			for j in 1 2 3; do
				mem+="g${g}n${j}: \"127.0.0.1:$port@127.0.0.1:$((port + 1000))\", "
				port=$((port + 1))
			done
			printf '  - id: g%d\n    slots: [%s]\n    members: {%s}\n' "$g" "$slots" "${mem%, }"
		done
	} >"$m"
	round_pids=()
	port=$base
	addrs=""
	for g in 1 2; do
		for j in 1 2 3; do
			"$SLUICE" --addr "127.0.0.1:$port" --node-id "g${g}n${j}" --cluster-map "$m" --data-dir "$work/r$round-$clients/g${g}n${j}" \
				--http-addr "127.0.0.1:$((port + 100))" --log-level error &
			pids+=($!)
			round_pids+=($!)
			addrs="${addrs:+$addrs,}127.0.0.1:$port"
			port=$((port + 1))
		done
	done
	leader=""
	for _ in $(seq 200); do
		for j in 0 1 2; do
			[ "$(redis-cli -p $((base + j)) ROLE 2>/dev/null | head -1)" = master ] && leader=$((base + j))
		done
		[ -n "$leader" ] && redis-cli -p "$leader" INFO cluster | grep -q sluice_slots_epoch && break
		sleep 0.1
	done
	[ -n "$leader" ] || { echo "group 1 has no leader" >&2; exit 1; }
	sleep 1 # every member learns the other group's leader (probed every 250 ms)
	"$work/migratebench" -addrs "$addrs" -source "127.0.0.1:$leader" -source-metrics "127.0.0.1:$((leader + 100))" \
		-target "127.0.0.1:$((base + 3))" -keys "$KEYS" -from "$FROM" -to "$TO" -callers "$CALLERS" \
		-shared-client="$([ "$clients" = shared ] && echo true || echo false)"
	for p in "${round_pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait "${round_pids[@]}" 2>/dev/null || true
	base=$((base + 10))
done
done
