#!/usr/bin/env bash
# The MULTI queue's memory bound (issue #31): one client queues N (default
# 1000000) CL.THROTTLE commands of 200-byte keys inside MULTI, reading the
# replies as they come, and the server's RSS (INFO memory) is read before
# and with the queue full; EXEC then aborts. Before the bound, 1M queued
# commands took RSS from 156 MB to 1.39 GB.
#
# Environment: SLUICE (binary, default bin/sluice), N, BASE_PORT.
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-bin/sluice}
N=${N:-1000000}
port=${BASE_PORT:-7591}
. scripts/lib.sh
"$SLUICE" --addr "127.0.0.1:$port" --data-dir "$work/data" --log-level warn &
pids+=($!)
for _ in $(seq 50); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
python3 - "$port" "$N" <<'PY'
import socket, sys, threading
port, n = int(sys.argv[1]), int(sys.argv[2])
def rss():
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"INFO memory\r\n")
    d = b""
    while b"used_memory_rss:" not in d or not d.endswith(b"\r\n"):
        d += s.recv(65536)
    return int(next(l for l in d.split(b"\r\n") if l.startswith(b"used_memory_rss:")).split(b":")[1])
before = rss()
c = socket.create_connection(("127.0.0.1", port))
exec_reply = []
def reader():
    f = c.makefile("rb")
    for _ in range(n + 1):
        f.readline()
    exec_reply.append(f.readline().decode().strip())
t = threading.Thread(target=reader)
t.start()
c.sendall(b"MULTI\r\n")
key, buf = b"k" * 190, []
for i in range(n):
    k = key + b"%08d" % i
    buf.append(b"*5\r\n$11\r\nCL.THROTTLE\r\n$%d\r\n%s\r\n$2\r\n10\r\n$2\r\n20\r\n$2\r\n60\r\n" % (len(k), k))
    if len(buf) == 10000:
        c.sendall(b"".join(buf))
        buf = []
c.sendall(b"".join(buf))
full = rss()
c.sendall(b"EXEC\r\n")
t.join()
print("%d queued CL.THROTTLEs of 200-byte keys: RSS %.0f MB before, %.0f MB with the queue full (+%.0f MB); EXEC: %s"
      % (n, before / 1e6, full / 1e6, (full - before) / 1e6, exec_reply[0][:60]))
PY
