#!/usr/bin/env bash
# Starts (or stops) a local three-node replicated sluice cluster:
#   scripts/cluster.sh start [bin] [ports] [data-dir]
# ports: the first of three consecutive ports ("7001"), or all three
# ("7001 7005 7009" or "7001,7005,7009"); each node's Raft port is its
# port + 10000.
#   scripts/cluster.sh stop  [data-dir]
#   scripts/cluster.sh add-group [bin] [port] [data-dir]   (see below)
# With SLUICE_GROUPS=n (n > 1; make cluster GROUPS=n; bash keeps GROUPS
# for itself) it starts a sharded cluster instead: n groups of
# three nodes on consecutive ports from the first one, the slots split
# evenly between the groups in a cluster map written to data-dir.
# HTTP=1 and GRPC=1 open each node's HTTP and gRPC doors on its port +
# 20000 and + 22000; RULES=path loads rules (a file or a directory). Every
# port must lie outside the system's ephemeral range (where an outgoing
# connection may take it before the node binds it); the script refuses
# one inside, and waits for every node it started, naming any that did
# not come up.
set -euo pipefail
httpOffset=20000
grpcOffset=22000
# ephemeral prints the system's ephemeral port range, "low high".
ephemeral() {
	if [ -r /proc/sys/net/ipv4/ip_local_port_range ]; then
		read -r lo hi </proc/sys/net/ipv4/ip_local_port_range
		echo "$lo $hi"
	else
		echo "32768 60999"
	fi
}
# checkPorts refuses a node port $1 whose own, Raft or door ports fall in
# the ephemeral range or past 65535.
checkPorts() {
	local lo hi
	read -r lo hi < <(ephemeral)
	local what port
	for what in "port:0" "Raft port:10000" "HTTP door:$httpOffset" "gRPC door:$grpcOffset"; do
		case $what in HTTP*) [ "${HTTP:-}" = 1 ] || continue ;; gRPC*) [ "${GRPC:-}" = 1 ] || continue ;; esac
		port=$(($1 + ${what##*:}))
		if [ "$port" -gt 65535 ] || { [ "$port" -ge "$lo" ] && [ "$port" -le "$hi" ]; }; then
			echo "cluster.sh: the ${what%%:*} of the node on $1 would be $port, inside the ephemeral range $lo-$hi (or past 65535),"\
				"where an outgoing connection can take it first; choose PORT so that port + $((${what##*:})) stays below $lo" >&2
			exit 2
		fi
	done
}
# awaitMembers waits up to 10 s for each node "id:port" given to answer
# PING, and names those that did not (their process exited, or they do not
# answer).
awaitMembers() {
	local dir=$1
	shift
	local missing=""
	for _ in $(seq 1 100); do
		missing=""
		for m in "$@"; do
			if [ "$(redis-cli -p "${m##*:}" PING 2>/dev/null)" != PONG ]; then missing="$missing $m"; fi
		done
		[ -z "$missing" ] && return 0
		sleep 0.1
	done
	for m in $missing; do
		id=${m%%:*}
		if [ -e "$dir/$id.pid" ] && ! kill -0 "$(cat "$dir/$id.pid")" 2>/dev/null; then
			echo "$id (127.0.0.1:${m##*:}) exited: $(grep -m1 -iE 'error|fatal|address already in use' "$dir/$id.log" 2>/dev/null || tail -1 "$dir/$id.log")" >&2
		else
			echo "$id (127.0.0.1:${m##*:}) does not answer after 10 s; see $dir/$id.log" >&2
		fi
	done
	return 1
}
# doors prints the extra flags of the node on port $1, one per line.
doors() {
	[ -n "${RULES:-}" ] && printf '%s\n' --rules "$RULES"
	[ "${HTTP:-}" = 1 ] && printf '%s\n' --http-addr "127.0.0.1:$(($1 + httpOffset))"
	[ "${GRPC:-}" = 1 ] && printf '%s\n' --grpc-addr "127.0.0.1:$(($1 + grpcOffset))"
	return 0
}
# doorsNote says where the doors are, for ports $1 to $2.
doorsNote() {
	[ "${HTTP:-}" = 1 ] && echo "  HTTP:     127.0.0.1 ports $(($1 + httpOffset))-$(($2 + httpOffset)) (POST /json, /metrics, the status page at /)"
	[ "${GRPC:-}" = 1 ] && echo "  gRPC:     127.0.0.1 ports $(($1 + grpcOffset))-$(($2 + grpcOffset)) (envoy.service.ratelimit.v3)"
	[ -n "${RULES:-}" ] && echo "  rules:    $RULES"
	return 0
}
# leaderAmong <port>…: prints the first of the ports whose node leads its
# group, waiting up to 10 s for one; fails if none does.
leaderAmong() {
	for _ in $(seq 1 100); do
		for q in "$@"; do
			if [ "$(redis-cli -p "$q" ROLE 2>/dev/null | head -1)" = master ]; then
				echo "$q"
				return 0
			fi
		done
		sleep 0.1
	done
	return 1
}
# startNode <id> <port> <flag>…: starts node id of $bin on port, with its
# data in $dir/id, its doors and the flags given (unless it runs already),
# and notes its pid.
startNode() {
	local id=$1 p=$2
	shift 2
	if [ -e "$dir/$id.pid" ] && kill -0 "$(cat "$dir/$id.pid")" 2>/dev/null; then
		echo "$id is already running (pid $(cat "$dir/$id.pid"))"
		return 0
	fi
	mapfile -t more < <(doors "$p")
	"$bin" --node-id "$id" --addr "127.0.0.1:$p" --data-dir "$dir/$id" "$@" "${more[@]}" >"$dir/$id.log" 2>&1 &
	echo $! >"$dir/$id.pid"
}
cmd=${1:-start}
if [ "$cmd" = stop ]; then
	dir=${2:-./data/cluster}
	for pidfile in "$dir"/*.pid; do
		[ -e "$pidfile" ] || continue
		kill "$(cat "$pidfile")" 2>/dev/null || true
		rm -f "$pidfile"
	done
	echo "stopped the cluster in $dir"
	exit 0
fi
if [ "$cmd" = add-group ]; then
	# scripts/cluster.sh add-group [bin] [port] [data-dir]: the README's
	# procedure for growing a running sharded cluster (make cluster
	# GROUPS=n started it on port): three new members on the next three
	# ports join it (--cluster-join), and a leader of one of its groups
	# adds them as a group (CLUSTER ADDGROUP). The map file is never
	# rewritten. The new group owns no slots until some move to it.
	bin=${2:-bin/sluice}
	base=${3:-7001}
	dir=${4:-./data/cluster}
	if [ ! -e "$dir/cluster.yaml" ]; then
		echo "cluster.sh: $dir holds no sharded cluster (start one with make cluster GROUPS=2)" >&2
		exit 2
	fi
	had=0
	while [ -d "$dir/g$((had + 1))n1" ]; do had=$((had + 1)); done
	next=$((had + 1))
	p=$((base + had * 3))
	for i in 1 2 3; do checkPorts $((p + i - 1)); done
	running=()
	for q in $(seq "$base" $((p - 1))); do
		[ "$(redis-cli -p "$q" PING 2>/dev/null)" = PONG ] && running+=("$q")
	done
	if [ ${#running[@]} -eq 0 ]; then
		echo "cluster.sh: no member of the cluster in $dir answers on ports $base-$((p - 1)); start it first (make cluster GROUPS=$had)" >&2
		exit 2
	fi
	started=()
	spec=()
	for i in 1 2 3; do
		id="g${next}n$i" q=$((p + i - 1))
		started+=("$id:$q")
		spec+=("$id" "127.0.0.1:$q" "127.0.0.1:$((q + 10000))")
		startNode "$id" "$q" --cluster-join "127.0.0.1:${running[0]}"
	done
	# A joining member opens its client port only once it is added: check
	# now only that none exited (a port taken, a bad flag).
	sleep 0.5
	for m in "${started[@]}"; do
		id=${m%%:*}
		if ! kill -0 "$(cat "$dir/$id.pid")" 2>/dev/null; then
			echo "$id (127.0.0.1:${m##*:}) exited: $(grep -m1 -iE 'error|fatal|address already in use' "$dir/$id.log" 2>/dev/null || tail -1 "$dir/$id.log")" >&2
			exit 1
		fi
	done
	# A group is added by a leader (of any group): ask each member until
	# one leads.
	if ! q=$(leaderAmong "${running[@]}"); then
		echo "cluster.sh: no member on ports ${running[*]} leads a group after 10 s" >&2
		exit 1
	fi
	out=$(redis-cli -p "$q" CLUSTER ADDGROUP "g$next" "${spec[@]}" 2>&1) || true
	if [ "$out" != OK ]; then
		echo "cluster.sh: CLUSTER ADDGROUP on 127.0.0.1:$q: $out" >&2
		exit 1
	fi
	awaitMembers "$dir" "${started[@]}" || exit 1
	if ! leaderAmong "$p" $((p + 1)) $((p + 2)) >/dev/null; then
		echo "cluster.sh: group g$next has no leader 10 s after it was added; see $dir/g${next}n*.log" >&2
		exit 1
	fi
	cat <<MSG
group g$next (127.0.0.1 ports $p-$((p + 2))) joined the cluster in $dir; it owns no slots yet. Move some to it,
sent to a leader of the group that has them (redis-cli -p <port> ROLE says master):
  redis-cli -p <that leader's port> CLUSTER MIGRATESLOTS SLOTSRANGE <start> <end> NODE g${next}n1
MSG
	doorsNote "$p" $((p + 2))
	exit 0
fi
bin=${2:-bin/sluice}
groups=${SLUICE_GROUPS:-1}
case $groups in '' | *[!0-9]* | 0) echo "cluster.sh: SLUICE_GROUPS='$groups' is not a positive number" >&2; exit 2 ;; esac
if [ "$groups" -gt 1 ]; then
	read -r -a first <<<"${3:-7001}"
	base=${first[0]%%,*}
	dir=${4:-./data/cluster}
	mkdir -p "$dir"
	map="$dir/cluster.yaml"
	if [ -e "$map" ]; then
		# The map only starts a cluster: rewritten with another split at
		# the same epoch, two groups would claim the same slots (the
		# members refuse it). A running cluster grows by joining.
		had=$(grep -c '^  - id:' "$map" || true)
		if [ "$had" != "$groups" ]; then
			next=$((had + 1))
			p=$((base + had * 3))
			cat >&2 <<MSG
cluster.sh: $dir holds a cluster of $had groups; GROUPS=$groups would split its slots again at the same epoch,
and two groups would claim the same slots. Start it again with GROUPS=$had, then add a group to it:
  make cluster-add-group PORT=$base DATA=${dir%/cluster}
  (that is: for i in 1 2 3; do p=\$(($p + i - 1)); bin/sluice --node-id g${next}n\$i --addr 127.0.0.1:\$p \\
      --data-dir $dir/g${next}n\$i --cluster-join 127.0.0.1:$base >$dir/g${next}n\$i.log 2>&1 & done
  redis-cli -p <a leader's port> CLUSTER ADDGROUP g$next g${next}n1 127.0.0.1:$p 127.0.0.1:$((p + 10000)) \\
      g${next}n2 127.0.0.1:$((p + 1)) 127.0.0.1:$((p + 10001)) g${next}n3 127.0.0.1:$((p + 2)) 127.0.0.1:$((p + 10002)))
  redis-cli -p <a leader's port> CLUSTER MIGRATESLOTS SLOTSRANGE <start> <end> NODE g${next}n1
(sent to a leader of the group that has the slots; the README: Growing and shrinking)
or start afresh: make cluster-stop DATA=${dir%/cluster}; rm -r $dir
MSG
			exit 2
		fi
	fi
	echo "epoch: 1" >"$map"
	echo "groups:" >>"$map"
	per=$((16384 / groups))
	for g in $(seq 1 "$groups"); do
		from=$(((g - 1) * per))
		to=$((g == groups ? 16383 : g * per - 1))
		members=""
		for i in 1 2 3; do
			p=$((base + (g - 1) * 3 + i - 1))
			members="${members:+$members, }g${g}n$i: \"127.0.0.1:$p@127.0.0.1:$((p + 10000))\""
		done
		printf '  - id: g%d\n    slots: ["%d-%d"]\n    members: {%s}\n' "$g" "$from" "$to" "$members" >>"$map"
	done
	started=()
	for g in $(seq 1 "$groups"); do
		for i in 1 2 3; do
			checkPorts $((base + (g - 1) * 3 + i - 1))
		done
	done
	for g in $(seq 1 "$groups"); do
		for i in 1 2 3; do
			p=$((base + (g - 1) * 3 + i - 1))
			started+=("g${g}n$i:$p")
			startNode "g${g}n$i" "$p" --cluster-map "$map"
		done
	done
	# Groups added later (make cluster-add-group) are not in the map:
	# their members come back from their data directories.
	added=$groups
	while [ -d "$dir/g$((added + 1))n1" ]; do
		added=$((added + 1))
		for i in 1 2 3; do
			p=$((base + (added - 1) * 3 + i - 1))
			started+=("g${added}n$i:$p")
			startNode "g${added}n$i" "$p" --cluster-join "127.0.0.1:$base"
		done
	done
	awaitMembers "$dir" "${started[@]}" || exit 1
	groups=$added
	for g in $(seq 1 "$groups"); do
		p=$((base + (g - 1) * 3))
		if ! leaderAmong "$p" $((p + 1)) $((p + 2)) >/dev/null; then
			echo "group g$g has no leader after 10 s; see $dir/g${g}n*.log" >&2
			exit 1
		fi
	done
	# Each group serves keyed commands once it logged its slots: wait until
	# keys spread over the slots all answer.
	for _ in $(seq 1 100); do
		busy=""
		for k in $(seq 1 $((groups * 40))); do
			if redis-cli -c -p "$base" EXISTS "probe:$k" 2>&1 | grep -qE 'TRYAGAIN|CLUSTERDOWN'; then busy=1; break; fi
		done
		[ -z "$busy" ] && break
		sleep 0.1
	done
	last=$((base + groups * 3 - 1))
	cat <<MSG
a sharded sluice cluster of $groups groups of three runs on 127.0.0.1 ports $base-$last (map: $map)
  use it:   redis-cli -c -p $base CL.THROTTLE user123 15 30 60
            redis-cli --cluster check 127.0.0.1:$base
  logs:     $dir/g*n*.log
  stop it:  make cluster-stop DATA=${dir%/cluster}
MSG
	doorsNote "$base" "$last"
	exit 0
fi
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
for p in "${ports[@]}"; do
	checkPorts "$p"
done
for i in 1 2 3; do
	startNode "n$i" "${ports[$((i - 1))]}" --peers "$peers"
done
awaitMembers "$dir" "n1:${ports[0]}" "n2:${ports[1]}" "n3:${ports[2]}" || exit 1
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
			doorsNote "${ports[0]}" "${ports[2]}"
			exit 0
		fi
	done
	sleep 0.1
done
echo "no leader after 10 s; see $dir/n*.log" >&2
exit 1
