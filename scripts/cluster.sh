#!/usr/bin/env bash
# Starts (or stops) a local three-node replicated sluice cluster:
#   scripts/cluster.sh start [bin] [ports] [data-dir]
# ports: the first of three consecutive ports ("7001"), or all three
# ("7001 7005 7009" or "7001,7005,7009"); each node's Raft port is its
# port + 10000.
#   scripts/cluster.sh stop  [data-dir]
set -euo pipefail
cmd=${1:-start}
if [ "$cmd" = stop ]; then
	dir=${2:-./data/cluster}
	for pidfile in "$dir"/n*.pid; do
		[ -e "$pidfile" ] || continue
		kill "$(cat "$pidfile")" 2>/dev/null || true
		rm -f "$pidfile"
	done
	echo "stopped the cluster in $dir"
	exit 0
fi
bin=${2:-bin/sluice}
read -r -a ports <<<"${3:-7001}"
[ ${#ports[@]} -eq 1 ] && IFS=, read -r -a ports <<<"${ports[0]}"
if [ ${#ports[@]} -eq 1 ]; then
	ports=("${ports[0]}" $((ports[0] + 1)) $((ports[0] + 2)))
fi
if [ ${#ports[@]} -ne 3 ]; then
	echo "cluster.sh: want one port or three, got '${3:-}'" >&2
	exit 2
fi
for p in "${ports[@]}"; do
	case $p in '' | *[!0-9]*) echo "cluster.sh: '$p' is not a port" >&2; exit 2 ;; esac
done
base=${ports[0]}
dir=${4:-./data/cluster}
mkdir -p "$dir"
peers=""
for i in 1 2 3; do
	p=${ports[$((i - 1))]}
	peers="${peers:+$peers,}n$i=127.0.0.1:$p@127.0.0.1:$((p + 10000))"
done
for i in 1 2 3; do
	p=${ports[$((i - 1))]}
	if [ -e "$dir/n$i.pid" ] && kill -0 "$(cat "$dir/n$i.pid")" 2>/dev/null; then
		echo "n$i is already running (pid $(cat "$dir/n$i.pid"))"
		continue
	fi
	"$bin" --node-id "n$i" --addr "127.0.0.1:$p" --data-dir "$dir/n$i" --peers "$peers" >"$dir/n$i.log" 2>&1 &
	echo $! >"$dir/n$i.pid"
done
# Wait for a leader.
for _ in $(seq 1 100); do
	for i in 1 2 3; do
		if [ "$(redis-cli -p "${ports[$((i - 1))]}" ROLE 2>/dev/null | head -1)" = master ]; then
			cat <<MSG
a three-node sluice cluster runs on 127.0.0.1 ports ${ports[*]}; the leader is n$i (127.0.0.1:${ports[$((i - 1))]})
  use it:   redis-cli -c -p $base CL.THROTTLE user123 15 30 60
            redis-cli -p $base RAFT INFO
  logs:     $dir/n1.log … n3.log
  stop it:  make cluster-stop DATA=${dir%/cluster}
MSG
			exit 0
		fi
	done
	sleep 0.1
done
echo "no leader after 10 s; see $dir/n*.log" >&2
exit 1
