#!/usr/bin/env bash
# Resident memory against --maxmemory (issue #54): a fresh sluice (built
# without -race) per storing family — new GCRA keys, reservations, lease
# holders, exact sliding logs growing, CONC leases growing, refused 64 KB
# requests — filled until every command answers -OOM, then RSS read after
# SETTLE. Each family runs twice, alternating: with the Go memory limit
# sluice derives from maxmemory, and with it off (GOMEMLIMIT=off: the
# behaviour before it), ROUNDS times; the rows are printed as measured.
#
# Environment: SLUICE (default bin/sluice), MAXMEMORY (default 256mb),
# FAMILIES, ROUNDS (default 1), SETTLE (default 5s), RSS_PORT (7801).
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-bin/sluice}
MAXMEMORY=${MAXMEMORY:-256mb}
FAMILIES=${FAMILIES:-gcra reserve lease exact conc big}
ROUNDS=${ROUNDS:-1}
SETTLE=${SETTLE:-5s}
port=${RSS_PORT:-7801}
[ -r /proc/self/status ] || { echo "bench_rss: needs /proc (Linux)" >&2; exit 0; }
make -s build
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
go build -o "$work/rssbench" ./scripts/rssbench
cat >"$work/rules.yaml" <<'YAML'
domain: bench
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: 1000000000}
YAML
for round in $(seq 1 "$ROUNDS"); do
	for family in $FAMILIES; do
		for limit in derived off; do
			dir="$work/data-$family-$limit-$round"
			if [ "$limit" = off ]; then
				GOMEMLIMIT=off "$SLUICE" --addr "127.0.0.1:$port" --data-dir "$dir" --maxmemory "$MAXMEMORY" --rules "$work/rules.yaml" --log-level error &
			else
				"$SLUICE" --addr "127.0.0.1:$port" --data-dir "$dir" --maxmemory "$MAXMEMORY" --rules "$work/rules.yaml" --log-level error &
			fi
			pid=$!
			for _ in $(seq 1 100); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.05; done
			printf 'limit=%-7s ' "$limit"
			"$work/rssbench" -addr "127.0.0.1:$port" -family "$family" -pid "$pid" -settle "$SETTLE"
			kill "$pid"; wait "$pid" 2>/dev/null || true
			rm -rf "$dir"
		done
	done
done
