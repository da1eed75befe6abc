#!/usr/bin/env bash
# Policies: RL.CHECK with two descriptors (per user and per endpoint, both
# fixed windows, all-or-nothing) and RL.CHECKALL with two inline limits,
# beside CL.THROTTLE, on the same sluice in the same run. Target: RL.CHECK
# at -P 16 >= 0.8x CL.THROTTLE.
#
# Assumes sluice on $SLUICE_PORT, already running (scripts/bench.sh starts
# it and calls this script); it loads its own rules with RL.RULES LOAD.
# Environment: N (requests per command, default 300000).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${SLUICE_PORT:?set SLUICE_PORT to a running sluice}"
N=${N:-300000}

rules='domain: bench
descriptors:
  - key: user
    rate_limit: {name: per-user, unit: minute, requests_per_unit: 1000}
  - key: endpoint
    rate_limit: {name: per-endpoint, unit: second, requests_per_unit: 100000}
'
[ "$(redis-cli -p "$SLUICE_PORT" RL.RULES LOAD bench.yaml "$rules")" = OK ] || { echo "RL.RULES LOAD failed" >&2; exit 1; }

run() {
	local p=$1
	shift
	redis-benchmark -p "$SLUICE_PORT" -c 50 -n "$N" -r 100000 -P "$p" --csv "$@" 2>/dev/null |
		awk -F'","' 'NR==2 {gsub(/"/, "", $7); print int($2), $7}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

printf "%-40s %12s %8s %12s %8s\n" "command" "-P 1" "p99" "-P 16" "p99"
declare -A rps p99
for p in 1 16; do
	read -r rps[cl,$p] p99[cl,$p] < <(run "$p" CL.THROTTLE key:__rand_int__ 100 10 1 1)
	read -r rps[rl,$p] p99[rl,$p] < <(run "$p" RL.CHECK bench DESCRIPTOR user u:__rand_int__ DESCRIPTOR endpoint /e:__rand_int__)
	read -r rps[all,$p] p99[all,$p] < <(run "$p" RL.CHECKALL LIMIT '{g}:s:__rand_int__' GCRA 100 10 1 LIMIT '{g}:m:__rand_int__' FIXED 1000 60)
done
row() { printf "%-40s %12s %8s %12s %8s\n" "$1" "${rps[$2,1]}" "${p99[$2,1]}" "${rps[$2,16]}" "${p99[$2,16]}"; }
row "CL.THROTTLE" cl
row "RL.CHECK (2 descriptors, rules)" rl
row "RL.CHECKALL (2 inline limits)" all
echo
echo "RL.CHECK / CL.THROTTLE:    -P 1 $(ratio "${rps[rl,1]}" "${rps[cl,1]}")x   -P 16 $(ratio "${rps[rl,16]}" "${rps[cl,16]}")x   (target at -P 16: >= 0.8x)"
echo "RL.CHECKALL / CL.THROTTLE: -P 1 $(ratio "${rps[all,1]}" "${rps[cl,1]}")x   -P 16 $(ratio "${rps[all,16]}" "${rps[cl,16]}")x"
redis-cli -p "$SLUICE_PORT" RL.RULES CLEAR >/dev/null
