#!/usr/bin/env bash
# Starts (or stops) a local three-node replicated sluice cluster:
#   scripts/cluster.sh start [bin] [base-port] [data-dir]
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
base=${3:-7001}
dir=${4:-./data/cluster}
mkdir -p "$dir"
peers=""
for i in 1 2 3; do
	p=$((base + i - 1))
	peers="${peers:+$peers,}n$i=127.0.0.1:$p@127.0.0.1:$((p + 10000))"
done
for i in 1 2 3; do
	p=$((base + i - 1))
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
		if [ "$(redis-cli -p $((base + i - 1)) ROLE 2>/dev/null | head -1)" = master ]; then
			cat <<MSG
a three-node sluice cluster runs on 127.0.0.1:$base-$((base + 2)); the leader is n$i (127.0.0.1:$((base + i - 1)))
  use it:   redis-cli -c -p $base CL.THROTTLE user123 15 30 60
            redis-cli -p $base RAFT INFO
  logs:     $dir/n1.log … n3.log
  stop it:  make cluster-stop
MSG
			exit 0
		fi
	done
	sleep 0.1
done
echo "no leader after 10 s; see $dir/n*.log" >&2
exit 1
