"""redis-py's RedisCluster against a sharded sluice cluster (two groups):
every limiter command, on keys spread over both groups' slots, routed to
its owner with no help; RL.CHECK and RL.SHOULDRATELIMIT whose counters sit
in both groups. Run by tests/python_test.go with any member's port; prints
each key it wrote (for the test to find in its owner group only), then ok.

    python3 tests/python/sharded.py <port>
"""
import sys

import redis
from redis.cluster import RedisCluster


def check(cond, what):
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)


def main():
    rc = RedisCluster(host="127.0.0.1", port=int(sys.argv[1]))
    slots = set()
    for i in range(40):
        k = f"py{i}"
        slots.add(rc.keyslot(k))
        try:
            cmd = [
                ("CL.THROTTLE", k, 2, 5, 60),
                ("SW.CHECK", k, 5, 60),
                ("FW.CHECK", k, 5, 60),
                ("QUOTA.CHECK", k, 5, "DAY"),
                ("CONC.ACQUIRE", k, 2, 30, "r1"),
            ][i % 5]
            first = rc.execute_command(*cmd)
            check(first[0] == 0, f"{cmd}: {first}")
            if cmd[0] == "CL.THROTTLE":
                for _ in range(2):
                    rc.execute_command(*cmd)
                r = rc.execute_command(*cmd)
                check(r[0] == 1, f"{cmd} a fourth time within a burst of 3: {r}")
        except redis.RedisError as e:
            check(False, f"RedisCluster {k}: {e}")
        print("key", k)
    check(any(s < 8192 for s in slots) and any(s >= 8192 for s in slots), f"keys in one group only: {sorted(slots)}")
    # Checks whose counters sit in both groups: all or nothing.
    admitted = 0
    for i in range(8):
        r = rc.execute_command("RL.CHECK", "x", "DESCRIPTOR", "user", f"pyu{i}", "DESCRIPTOR", "endpoint", "/py")
        admitted += r[0] == 0
    check(admitted == 3, f"{admitted} RL.CHECKs admitted on an endpoint limit of 3")
    r = rc.execute_command("RL.SHOULDRATELIMIT", "x", 1, 1, "-", "-", "-", "user", "pyrls", 1, "-", "-", "-", "endpoint", "/py-rls")
    check(r[0] == 1 and r[1][4] == 9 and r[2][4] == 2, f"RL.SHOULDRATELIMIT: {r}")
    print("ok")


main()
