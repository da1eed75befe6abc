#!/usr/bin/env bash
# What leases save (issue #45): HOLDERS processes at RATE requests/s each,
# above their share of a limit of LIMIT per second (a one-second fixed
# window), decide per request (RL.CHECK), from leases
# (httplimit.WithLeases), or as Envoy's rate_limit_quota filter does from
# RLQS shares (issue #58), in alternating runs against one server. Each run
# prints its decisions, the server's calls and CPU per million decisions,
# and what was admitted per whole window against the limit; the last lines
# are the medians' ratios.
#
# Environment: SLUICE (binary, default bin/sluice), ROUNDS (3), SECONDS_EACH
# (10), HOLDERS (4), RATE (2500), LIMIT (5000), BASE_PORT.
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-bin/sluice}
ROUNDS=${ROUNDS:-3}
SECONDS_EACH=${SECONDS_EACH:-10}
HOLDERS=${HOLDERS:-4}
RATE=${RATE:-2500}
LIMIT=${LIMIT:-5000}
port=${BASE_PORT:-7631}
. scripts/lib.sh
cat >"$work/bench.yaml" <<YAML
domain: bench
descriptors:
  - key: route
    rate_limit: {name: per-route, unit: second, requests_per_unit: $LIMIT}
YAML
go build -o "$work/leasebench" ./scripts/leasebench
grpc=$((port + 1))
"$SLUICE" --addr "127.0.0.1:$port" --grpc-addr "127.0.0.1:$grpc" --data-dir "$work/data" --rules "$work/bench.yaml" --log-level warn &
pid=$!
pids+=("$pid")
for _ in $(seq 50); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
for r in $(seq "$ROUNDS"); do
	for mode in check lease rlqs; do
		"$work/leasebench" -addr "127.0.0.1:$port" -grpc "127.0.0.1:$grpc" -pid "$pid" -mode "$mode" -holders "$HOLDERS" -rate "$RATE" \
			-limit "$LIMIT" -duration "${SECONDS_EACH}s" -round "round=$r" | tee -a "$work/runs"
	done
done
python3 - "$work/runs" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    f = dict(re.findall(r"(\S+)=(\S+)", line))
    runs.setdefault(f["mode"], []).append(f)
def med(mode, key):
    return statistics.median(float(r[key]) for r in runs[mode])
for key in ["calls_per_1M", "cpu_us_per_decision"]:
    c = med("check", key)
    for mode in ["lease", "rlqs"]:
        l = med(mode, key)
        print(f"median {key}: per request {c:.3f}, {mode} {l:.3f}: {c / max(l, 1e-9):.1f}x fewer with {mode}")
for mode in ["check", "lease", "rlqs"]:
    print(f"{mode}: admitted per window / limit, median of medians {med(mode, 'median'):.3f}, worst {max(float(r['max']) for r in runs[mode]):.3f}")
PY
