#!/usr/bin/env python3
"""A W7 child running python-redis-lock itself (the library, over redis-py), for
`redlatch-bench --workload peers` (redlatch-bench/src/bench/signal_peer.rs): the line
protocol of the bench's W7 children (fleet.rs): prints "ready", reads "go END" (END in
CLOCK_MONOTONIC nanoseconds), loops acquire -> release on one lock until END, prints
"called acquired released tries" per acquisition (tries: the SET NX calls it took),
then "done", and exits when stdin closes.

Usage: w7_python_redis_lock.py REDIS_URL NAME
Needs `pip install redis python-redis-lock` (scripts/requirements-bench.txt).
"""
import sys
import time

import redis
import redis_lock


def now():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def main():
    url, name = sys.argv[1], sys.argv[2]
    client = redis.Redis.from_url(url)
    # Counts the library's acquire tries: each is one SET NX on this client.
    sets = [0]
    plain_set = client.set

    def counted_set(*args, **kwargs):
        sets[0] += 1
        return plain_set(*args, **kwargs)

    client.set = counted_set
    lock = redis_lock.Lock(client, name, expire=10)
    print("ready", flush=True)
    go = sys.stdin.readline().split()
    if len(go) != 2 or go[0] != "go":
        sys.exit(f"W7 child: expected \"go END\", got {go!r}")
    end = int(go[1])
    records = []
    while now() < end:
        called, before = now(), sets[0]
        lock.acquire()
        acquired = now()
        released = now()
        lock.release()
        records.append(f"{called} {acquired} {released} {sets[0] - before}")
    records.append("done")
    print("\n".join(records), flush=True)
    for _ in sys.stdin:
        pass


if __name__ == "__main__":
    main()
