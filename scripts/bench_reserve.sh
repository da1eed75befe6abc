#!/usr/bin/env bash
# What a reservation costs (issue #32): RL.RESERVE + RL.SETTLE pairs against
# one RL.CHECK on the same rules (two descriptors, random users), at
# pipeline 1 and 16, in alternating runs against one server; then the
# memory one held reservation takes (INFO memory, N held).
#
# Environment: SLUICE (binary, default bin/sluice), ROUNDS (3), SECONDS_EACH
# (5), CONNS (50), N (100000), BASE_PORT.
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-bin/sluice}
ROUNDS=${ROUNDS:-3}
SECONDS_EACH=${SECONDS_EACH:-5}
CONNS=${CONNS:-50}
N=${N:-100000}
port=${BASE_PORT:-7611}
. scripts/lib.sh
cat >"$work/bench.yaml" <<'YAML'
domain: bench
descriptors:
  - key: user
    rate_limit: {name: per-user, unit: minute, requests_per_unit: 1000000}
  - key: endpoint
    rate_limit: {name: per-endpoint, unit: second, requests_per_unit: 100000000}
YAML
go build -o "$work/reservebench" ./scripts/reservebench
"$SLUICE" --addr "127.0.0.1:$port" --data-dir "$work/data" --rules "$work/bench.yaml" --log-level warn &
pids+=($!)
for _ in $(seq 50); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
for p in 1 16; do
	for r in $(seq "$ROUNDS"); do
		for mode in check pair; do
			"$work/reservebench" -addr "127.0.0.1:$port" -mode "$mode" -pipeline "$p" -conns "$CONNS" -duration "${SECONDS_EACH}s"
		done
	done
done
mem() { redis-cli -p "$port" INFO memory | tr -d '\r' | awk -F: -v f="$1" '$1 == f {print $2}'; }
redis-cli -p "$port" FLUSHALL >/dev/null
before=$(( $(mem used_memory_heap) + $(mem used_memory_offheap) ))
python3 - "$port" "$N" <<'PY'
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
c = socket.create_connection(("127.0.0.1", port))
f = c.makefile("rb")
def cmd(*a):
    return b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in a)
batch = []
for i in range(n):
    batch.append(cmd(b"RL.RESERVE", b"bench", b"held-%d" % i, b"3600", b"DESCRIPTOR", b"user", b"u:%d" % (i % 1000), b"DESCRIPTOR", b"endpoint", b"/e"))
    if len(batch) == 1000 or i == n - 1:
        c.sendall(b"".join(batch))
        for _ in batch:
            line = f.readline()
            for _ in range(int(line[1:])):
                x = f.readline()
                if x.startswith(b"$"):
                    f.readline()
        batch = []
PY
redis-cli -p "$port" DEBUG GC >/dev/null 2>&1 || true
after=$(( $(mem used_memory_heap) + $(mem used_memory_offheap) ))
held=$(redis-cli -p "$port" INFO stats | tr -d '\r' | awk -F: '$1 == "reservations_held" {print $2}')
echo "memory: $held reservations held (two limits each, with their counters): $(( (after - before) / N )) bytes each (heap + off-heap, counters included)"
