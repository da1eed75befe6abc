#!/usr/bin/env bash
# What a sharded cluster's decisions cost (issue #33), in CPU summed over
# every member process — what predicts real machines on a box whose two
# cores cannot show throughput scaling:
#   - single-group commands (CL.THROTTLE on random keys) at one offered
#     rate per group, on a cluster of one group of three and on one of two
#     groups of three (twice the rate): CPU per decision must stay flat;
#   - RL.CHECK of two descriptors on the two-group cluster, both counters in
#     the domain's group (one apply) or one in each group (split, reserved
#     in both, kept): CPU and p50 of a check across groups against one
#     within a group.
# Alternating rounds, one run; medians and ratios at the end.
#
# Environment: SLUICE (binary, default bin/sluice), ROUNDS (3), SECONDS_EACH
# (10), RATE (throttles/s per group, 3000), CHECK_RATE (checks/s, 300), CONNS (50),
# LOOP_CONNS (closed-loop callers per group, 8),
# BASE_PORT (7700).
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-bin/sluice}
ROUNDS=${ROUNDS:-3}
SECONDS_EACH=${SECONDS_EACH:-10}
RATE=${RATE:-3000}
CHECK_RATE=${CHECK_RATE:-300}
CONNS=${CONNS:-50}
LOOP_CONNS=${LOOP_CONNS:-8}
base=${BASE_PORT:-7700}
. scripts/lib.sh
cat >"$work/bench.yaml" <<'YAML'
domain: bench
descriptors:
  - key: user
    rate_limit: {name: per-user, unit: second, requests_per_unit: 1000000, sluice: {algorithm: gcra, burst: 1000000}}
  - key: endpoint
    rate_limit: {name: per-endpoint, unit: second, requests_per_unit: 100000000, sluice: {algorithm: gcra, burst: 100000000}}
YAML
go build -o "$work/groupsbench" ./scripts/groupsbench

# map <file> <first port> <slot ranges of each group…>: groups of three.
map() {
	local file=$1 port=$2
	shift 2
	echo "epoch: 1" >"$file"
	echo "groups:" >>"$file"
	local g=1
	for ranges in "$@"; do
		local m=""
		for j in 1 2 3; do
			m+="g${g}n${j}: \"127.0.0.1:$port@127.0.0.1:$((port + 1000))\", "
			port=$((port + 1))
		done
		printf '  - id: g%d\n    slots: [%s]\n    members: {%s}\n' "$g" "$ranges" "${m%, }" >>"$file"
		g=$((g + 1))
	done
}
# start <map> <name>: every member of the map; their pids in $<name>_pids.
start() {
	local file=$1 name=$2 list=""
	while read -r id addr; do
		"$SLUICE" --addr "${addr%@*}" --node-id "$id" --cluster-map "$file" --data-dir "$work/$name/$id" \
			--rules "$work/bench.yaml" --log-level warn &
		pids+=($!)
		list+="$!,"
	done < <(grep -o 'g[0-9]*n[0-9]*: "[^"]*"' "$file" | sed -E 's/^([^:]*): "([^"]*)"$/\1 \2/')
	printf -v "${name}_pids" '%s' "${list%,}"
}
map "$work/one.yaml" "$base" '"0-16383"'
map "$work/two.yaml" "$((base + 10))" '"0-8191"' '"8192-16383"'
start "$work/one.yaml" one
start "$work/two.yaml" two
# Ready: every member answers, and a check through each cluster passes.
for p in $(seq "$base" $((base + 2))) $(seq $((base + 10)) $((base + 15))); do
	for _ in $(seq 100); do redis-cli -p "$p" PING >/dev/null 2>&1 && break; sleep 0.1; done
done
for p in "$base" $((base + 10)); do
	for _ in $(seq 100); do
		[ "$(redis-cli -c -p "$p" RL.CHECK bench DESCRIPTOR user warm 2>/dev/null | head -1)" = 0 ] && break
		sleep 0.2
	done
done
one_addrs="127.0.0.1:$base"
two_addrs="127.0.0.1:$((base + 10))"
run() { "$work/groupsbench" -conns "$CONNS" -duration "${SECONDS_EACH}s" "$@"; }
out="$work/results"
for r in $(seq "$ROUNDS"); do
	echo "round $r"
	run -mode idle -pids "$one_pids" | sed 's/^/one-group /' | tee -a "$out"
	run -mode idle -pids "$two_pids" | sed 's/^/two-groups /' | tee -a "$out"
	run -mode throttle -rate "$RATE" -addrs "$one_addrs" -pids "$one_pids" | sed 's/^/one-group /' | tee -a "$out"
	run -mode throttle -rate "$((2 * RATE))" -addrs "$two_addrs" -pids "$two_pids" | sed 's/^/two-groups /' | tee -a "$out"
	run -mode throttle -rate "$((2 * RATE))" -addrs "$one_addrs" -pids "$one_pids" | sed 's/^/one-group-double /' | tee -a "$out"
	# Closed loops, the same callers per group: each group batches alike.
	"$work/groupsbench" -duration "${SECONDS_EACH}s" -mode throttle -rate 0 -conns "$LOOP_CONNS" -addrs "$one_addrs" -pids "$one_pids" | sed 's/^/one-group-closed /' | tee -a "$out"
	"$work/groupsbench" -duration "${SECONDS_EACH}s" -mode throttle -rate 0 -conns "$((2 * LOOP_CONNS))" -addrs "$two_addrs" -pids "$two_pids" | sed 's/^/two-groups-closed /' | tee -a "$out"
	run -mode single -rate "$CHECK_RATE" -rules "$work/bench.yaml" -addrs "$two_addrs" -pids "$two_pids" | tee -a "$out"
	run -mode cross -rate "$CHECK_RATE" -rules "$work/bench.yaml" -addrs "$two_addrs" -pids "$two_pids" | tee -a "$out"
done
python3 - "$out" "$SECONDS_EACH" <<'PY'
import re, statistics, sys
rows, idle = {}, {}
for line in open(sys.argv[1]):
    m = re.search(r"^(one-group|two-groups) idle: cpu ([\d.]+)s", line)
    if m:
        idle.setdefault(m[1], []).append(float(m[2]))
        continue
    m = re.search(r"^(one-group throttle|two-groups throttle|one-group-double throttle|one-group-closed throttle|two-groups-closed throttle|single|cross): (\d+) decisions in ([\d.]+)s.* p50 ([\d.]+)(µs|ms|s) p99 ([\d.]+)(µs|ms|s), cpu ([\d.]+)s", line)
    if not m:
        continue
    unit = {"µs": 1, "ms": 1000, "s": 1e6}
    rows.setdefault(m[1], []).append((float(m[4]) * unit[m[5]], float(m[6]) * unit[m[7]], int(m[2]), float(m[3]), float(m[8])))
# Each run's CPU less what its cluster spends idle in as long (the
# median idle of the rounds), per decision.
base = {k: statistics.median(v) / float(sys.argv[2]) for k, v in idle.items()}
for k, v in base.items():
    print(f"idle {k}: {v:.3f} CPU-seconds per second (all members)")
def cluster(k):
    return "one-group" if k.startswith("one") else "two-groups"
med = {}
for k, v in rows.items():
    cpu = [(x[4] - base.get(cluster(k), 0) * x[3]) * 1e6 / x[2] for x in v]
    med[k] = (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v), statistics.median(cpu), statistics.median(x[4] * 1e6 / x[2] for x in v))
for k, (p50, p99, cpu, raw) in med.items():
    print(f"median {k}: {cpu:.1f} µs CPU per decision beyond idle ({raw:.1f} with it), p50 {p50:.0f} µs, p99 {p99:.0f} µs")
if "one-group throttle" in med and "two-groups throttle" in med:
    print(f"CPU per decision, two groups / one group, the same rate per group: {med['two-groups throttle'][2] / med['one-group throttle'][2]:.3f} (target within 10%)")
if "one-group-double throttle" in med and "two-groups throttle" in med:
    print(f"CPU per decision, two groups / one group, the same total rate: {med['two-groups throttle'][2] / med['one-group-double throttle'][2]:.3f}")
if "one-group-closed throttle" in med and "two-groups-closed throttle" in med:
    print(f"CPU per decision, two groups / one group, closed loops of the same callers per group: {med['two-groups-closed throttle'][2] / med['one-group-closed throttle'][2]:.3f}")
if "single" in med and "cross" in med:
    print(f"check across groups / within a group: CPU {med['cross'][2] / med['single'][2]:.2f}x (target <= 2), p50 {med['cross'][0] / med['single'][0]:.2f}x (target <= 1.5)")
PY
