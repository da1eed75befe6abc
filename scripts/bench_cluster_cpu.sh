#!/usr/bin/env bash
# Where a replicated decision's CPU goes (issue #57): each member's CPU per
# decision, and the group's sum, against one node of the same binary, in
# the same run. Workloads: CL.THROTTLE over RESP at the leader
# (redis-benchmark -c 50 -P 1, and -c 200 -P 16), Envoy's ShouldRateLimit
# over gRPC at 50 callers (scripts/rlsbench) entered at the leader and at a
# follower. CPU is each process's utime+stime from /proc, before and after
# a measurement; the load generator shares the cores, so CPU per decision
# is what predicts capacity. Rounds alternate the targets; the medians are
# printed.
#
# Environment: SLUICE (binary, default bin/sluice), BASELINE (another
# build, measured beside it in every round), ROUNDS (3), N (RESP requests
# a measurement, 200000), D (gRPC measurement, 5s), CALLERS (gRPC callers,
# 50), WORKLOADS (which to run, "resp1 resp16 grpc"), PROFILE=1 (a 5 s CPU
# profile of each member during the last round's gRPC follower run, kept in
# PROFILE_DIR, default bench-profiles/; PROFILE_RUN="resp16 leader" picks
# another run).
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-bin/sluice}
ROUNDS=${ROUNDS:-3}
N=${N:-200000}
D=${D:-5s}
CALLERS=${CALLERS:-50}
WORKLOADS=${WORKLOADS:-resp1 resp16 grpc}
base=${BASE_PORT:-7691}
. scripts/lib.sh

make -s build
go build -o "$work/rlsbench" ./scripts/rlsbench
tick=$(getconf CLK_TCK)
rules="$work/rules"
mkdir -p "$rules"
cat >"$rules/bench.yaml" <<'YAML'
domain: bench
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000}
YAML

# start <label> <binary> <port>: one node and a 3-node cluster of binary;
# its pids go to $label_single, $label_n1..3.
declare -A pid port grpc
start() {
	local label=$1 bin=$2 p=$3
	"$bin" --addr "127.0.0.1:$p" --grpc-addr "127.0.0.1:$((p + 100))" --http-addr "127.0.0.1:$((p + 200))" --pprof \
		--data-dir "$work/$label-single" --rules "$rules" --log-level error &
	pids+=($!)
	pid[$label-single]=$! port[$label-single]=$p grpc[$label-single]=$((p + 100))
	local peers=""
	for i in 1 2 3; do peers="${peers:+$peers,}$label$i=127.0.0.1:$((p + i))"; done
	for i in 1 2 3; do
		"$bin" --node-id "$label$i" --addr "127.0.0.1:$((p + i))" --grpc-addr "127.0.0.1:$((p + 100 + i))" \
			--http-addr "127.0.0.1:$((p + 200 + i))" --pprof --data-dir "$work/$label-n$i" --peers "$peers" --rules "$rules" --log-level error &
		pids+=($!)
		pid[$label-n$i]=$! port[$label-n$i]=$((p + i)) grpc[$label-n$i]=$((p + 100 + i))
	done
}
start new "$SLUICE" "$base"
labels=(new)
if [ -n "${BASELINE:-}" ]; then
	start old "$BASELINE" $((base + 20))
	labels+=(old)
fi

# roles <label>: the leader's and a follower's node names (n1..n3).
declare -A leader follower
for l in "${labels[@]}"; do
	for _ in $(seq 200); do
		leader[$l]="" follower[$l]=""
		for i in 1 2 3; do
			case "$(redis-cli -p "${port[$l-n$i]}" ROLE 2>/dev/null | head -1)" in
			master) leader[$l]=n$i ;;
			slave) follower[$l]=n$i ;;
			esac
		done
		[ -n "${leader[$l]}" ] && [ -n "${follower[$l]}" ] && redis-cli -p "${port[$l-single]}" ping >/dev/null 2>&1 && break
		sleep 0.1
	done
	[ -n "${leader[$l]}" ] || { echo "$l: no leader" >&2; exit 1; }
	redis-cli -p "${port[$l-${leader[$l]}]}" RL.RULES LIST bench >/dev/null
done

# cpu <pid>...: their utime+stime, in ticks, summed per pid (one line).
cpu() {
	for p in "$@"; do awk '{print $14 + $15}' "/proc/$p/stat"; done | paste -sd' '
}

# measure <label> <workload> <target>: one measurement; appends
# "<label> <workload> <target> <decisions> <ticks of each process>" to $work/raw.
measure() {
	local l=$1 w=$2 target=$3 procs entry decisions before after
	if [ "$target" = single ]; then procs=("${pid[$l-single]}"); entry=$l-single
	else
		procs=("${pid[$l-n1]}" "${pid[$l-n2]}" "${pid[$l-n3]}")
		entry=$l-${leader[$l]}
		[ "$target" = follower ] && entry=$l-${follower[$l]}
	fi
	before=$(cpu "${procs[@]}")
	case $w in
	resp1 | resp16)
		local c=50 P=1
		[ "$w" = resp16 ] && c=200 P=16
		redis-benchmark -p "${port[$entry]}" -c $c -n "$N" -r 100000 -P $P -q CL.THROTTLE key:__rand_int__ 100 10 1 1 >/dev/null
		decisions=$N
		;;
	grpc)
		local out rate
		out=$("$work/rlsbench" -addr "127.0.0.1:${grpc[$entry]}" -c "$CALLERS" -d "$D" -warmup 0s -domain bench -label x)
		rate=$(awk '{for (i = 1; i <= NF; i++) if ($i ~ /\/s$/) {sub("/s", "", $i); print $i}}' <<<"$out")
		decisions=$(awk -v r="$rate" -v d="${D%s}" 'BEGIN {printf "%d", r * d}')
		echo "$l $target $out" >>"$work/latency"
		;;
	esac
	after=$(cpu "${procs[@]}")
	echo "$l $w $target $decisions $(paste -d- <(tr ' ' '\n' <<<"$after") <(tr ' ' '\n' <<<"$before") | bc | paste -sd' ')" >>"$work/raw"
}

: >"$work/raw"
: >"$work/latency"
for round in $(seq "$ROUNDS"); do
	order=("${labels[@]}")
	[ $((round % 2)) -eq 0 ] && order=($(printf '%s\n' "${labels[@]}" | tac))
	for w in $WORKLOADS; do
		targets=(single leader)
		[ "$w" = grpc ] && targets=(single leader follower)
		for t in "${targets[@]}"; do
			for l in "${order[@]}"; do
				prof=()
				if [ "${PROFILE:-}" = 1 ] && [ "$round" = "$ROUNDS" ] && [ "$w $t" = "${PROFILE_RUN:-grpc follower}" ]; then
					mkdir -p "${PROFILE_DIR:-bench-profiles}"
					off=0
					[ "$l" = old ] && off=20
					for i in 1 2 3; do
						role=other
						[ "n$i" = "${leader[$l]}" ] && role=leader
						[ "n$i" = "${follower[$l]}" ] && role=entry
						curl -s "http://127.0.0.1:$((base + off + 200 + i))/debug/pprof/profile?seconds=5" \
							-o "${PROFILE_DIR:-bench-profiles}/$l-$role.pprof" &
						prof+=($!)
					done
				fi
				measure "$l" "$w" "$t"
				[ ${#prof[@]} -gt 0 ] && wait "${prof[@]}"
			done
		done
	done
done

# Medians of µs of CPU per decision: each process, and the cluster's sum.
echo "== CPU per decision (µs, median of $ROUNDS alternating rounds; load generator on the same cores) =="
printf "%-6s %-8s %-9s %10s %10s %10s %10s %10s\n" build workload entered total m1 m2 m3 "decisions"
awk -v tick="$tick" '
{
	key = $1 " " $2 " " $3
	n[key]++
	total = 0
	for (i = 5; i <= NF; i++) { us = $i * 1e6 / tick / $4; v[key, n[key], i - 4] = us; total += us }
	v[key, n[key], 0] = total
	procs[key] = NF - 4
	dec[key, n[key]] = $4
	if (!(key in seen)) { seen[key] = 1; keys[++k] = key }
}
function median(key, col,   m, i, j, a, t) {
	m = n[key]
	for (i = 1; i <= m; i++) a[i] = v[key, i, col]
	for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
END {
	for (x = 1; x <= k; x++) {
		key = keys[x]
		split(key, f, " ")
		line = sprintf("%-6s %-8s %-9s %10.2f", f[1], f[2], f[3], median(key, 0))
		for (c = 1; c <= 3; c++) line = line sprintf(" %10s", c <= procs[key] ? sprintf("%.2f", median(key, c)) : "-")
		print line sprintf(" %10d", dec[key, 1])
	}
}' "$work/raw"
echo "(m1..m3: the members n1..n3 of the cluster; leader/follower roles:"
for l in "${labels[@]}"; do echo "  $l: leader ${leader[$l]}, follower entered ${follower[$l]})"; done
if [ -s "$work/latency" ]; then
	echo "== gRPC calls/s and latency at $CALLERS callers, each round (median over rounds: sort these) =="
	sort -k1,2 -s "$work/latency"
fi
