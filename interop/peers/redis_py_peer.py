"""redis-py's `Lock` (redis-py from PyPI, installed into target/peers/python by the test
kit: redlatch-testkit/src/foreign.rs) contending for one simple-lock name beside redlatch.

    python3 redis_py_peer.py PORT NAME SECONDS INSIDE_KEY

For SECONDS: take NAME with `Lock(timeout=10 s, sleep=2-10 ms)`, INCR INSIDE_KEY (more
than 1: someone else is inside too, an overlap), hold 2 ms, DECR, release (a release of
a lock it no longer holds raises: exit 1). Prints `entered N overlaps M`.
"""

import random
import sys
import time

import redis


def main():
    port, name, seconds, inside = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4]
    r = redis.Redis(port=port, socket_timeout=30)
    entered = overlaps = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = max(deadline - time.monotonic(), 0.001)
        lock = r.lock(name, timeout=10, sleep=random.uniform(0.002, 0.010), blocking_timeout=left)
        if not lock.acquire():
            continue
        if r.incr(inside) != 1:
            overlaps += 1
        time.sleep(0.002)
        r.decr(inside)
        lock.release()
        entered += 1
    print(f"entered {entered} overlaps {overlaps}", flush=True)


if __name__ == "__main__":
    main()
