"""redis-py against sluice: the default (transactional) pipeline, WATCH,
and RedisCluster routing every command. Run by tests/python_test.go with
the single node's and a cluster node's ports; exits non-zero on a failure.

    python3 tests/python/clients.py <single-port> <cluster-port>
"""
import sys

import redis
from redis.cluster import RedisCluster


def check(cond, what):
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)


def transactions(r, label):
    # redis-py's pipeline() is MULTI ... EXEC by default.
    p = r.pipeline()
    p.execute_command("CL.THROTTLE", "{py}k", 1, 1, 60)
    p.execute_command("CL.THROTTLE", "{py}k", 1, 1, 60)
    p.execute_command("EXISTS", "{py}k")
    a, b, n = p.execute()
    check(a[0] == 0 and a[2] == 1 and b[2] == 0 and n == 1, f"{label}: pipeline replies {a} {b} {n}")

    # WATCH, then a change by another client, aborts the transaction.
    with r.pipeline() as p:
        p.watch("{py}w")
        p.multi()
        p.execute_command("QUOTA.CHECK", "{py}w", 10, "DAY")
        r.execute_command("QUOTA.CHECK", "{py}w", 10, "DAY")  # another connection of the pool
        try:
            p.execute()
            check(False, f"{label}: EXEC ran though a watched key changed")
        except redis.WatchError:
            pass
    used = r.execute_command("QUOTA.GET", "{py}w")[0]
    check(used == 1, f"{label}: quota used {used} after an aborted transaction, want 1")


def main():
    single, clustered = int(sys.argv[1]), int(sys.argv[2])
    transactions(redis.Redis(port=single), "one node")

    rc = RedisCluster(host="127.0.0.1", port=clustered)
    for cmd in (
        ("CL.THROTTLE", "user123", 15, 30, 60), ("SW.CHECK", "sw", 10, 60), ("FW.CHECK", "fw", 10, 60),
        ("CONC.ACQUIRE", "c", 2, 30, "r1"), ("CONC.GET", "c"), ("CONC.RELEASE", "c", "r1"),
        ("QUOTA.CHECK", "q", 100, "DAY"), ("QUOTA.GET", "q"),
        ("RL.CHECKALL", "LIMIT", "{t}a", "GCRA", 1, 2, 3, "LIMIT", "{t}b", "FIXED", 5, 60),
        ("GET", "user123"), ("TYPE", "user123"), ("TTL", "user123"), ("EXISTS", "user123"), ("DEL", "sw"),
    ):
        try:
            rc.execute_command(*cmd)
        except redis.RedisError as e:
            check(False, f"RedisCluster {cmd[0]}: {e}")
    # A transaction through the cluster client's node for one slot.
    node = rc.get_node_from_key("{py}k")
    transactions(redis.Redis(host=node.host, port=node.port), "cluster")
    print("ok")


main()
