#!/usr/bin/env python3
"""Fairness of `redlatch run --simple` beside redis-py `Lock` workers (issue 46.7).

On one lock name, for SECONDS: PY redis-py workers (threads) each loop
acquire (retrying every 2-10 ms: `sleep` drawn per acquisition), hold HOLD ms, release;
beside them RL shell-style loops each run `REDLATCH run --simple NAME [ARGS] -- sleep
HOLD` one after the other. Prints the sections each side entered and how many times a
redis-py holder found its token gone when it released (an overlap would show there).

    PYTHONPATH=target/peers/python python3 scripts/fairness_simple.py \
        --port 17771 --redlatch target/debug/redlatch -- --backoff 5ms

redis-py comes from PyPI (`pip install --target target/peers/python redis==8.1.0`); the
server is the caller's (a throwaway redis-server on a free port). Bounded: every loop
stops at the deadline, every redlatch run has `--wait` up to it.
"""

import argparse
import random
import subprocess
import threading
import time

import redis


def py_worker(port, name, hold, deadline, counts, lock):
    r = redis.Redis(port=port, socket_timeout=30)
    while time.monotonic() < deadline:
        left = deadline - time.monotonic()
        lk = r.lock(name, timeout=10, sleep=random.uniform(0.002, 0.010),
                    blocking_timeout=max(left, 0.001))
        if not lk.acquire():
            continue
        time.sleep(hold)
        try:
            lk.release()
            with lock:
                counts["py"] += 1
        except redis.exceptions.LockNotOwnedError:
            with lock:
                counts["lost"] += 1


def rl_worker(port, name, hold, deadline, counts, lock, binary, extra):
    while True:
        left = deadline - time.monotonic()
        if left <= 0.05:
            return
        argv = [binary, "run", "--simple", name, "--redis", f"redis://127.0.0.1:{port}",
                "--wait", f"{int(left * 1000)}ms", *extra, "--", "sleep", str(hold)]
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=left + 30)
        if done.returncode == 0:
            with lock:
                counts["rl"] += 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--redlatch", required=True)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--py", type=int, default=2)
    p.add_argument("--rl", type=int, default=2)
    p.add_argument("--hold-ms", type=float, default=5)
    p.add_argument("--name", default="fair:simple")
    p.add_argument("extra", nargs="*", help="more `redlatch run` options, after --")
    a = p.parse_args()
    counts = {"py": 0, "rl": 0, "lost": 0}
    lock = threading.Lock()
    deadline = time.monotonic() + a.seconds
    hold = a.hold_ms / 1000
    threads = [threading.Thread(target=py_worker,
                                args=(a.port, a.name, hold, deadline, counts, lock))
               for _ in range(a.py)]
    threads += [threading.Thread(target=rl_worker,
                                 args=(a.port, a.name, hold, deadline, counts, lock,
                                       a.redlatch, a.extra))
                for _ in range(a.rl)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    left = redis.Redis(port=a.port).exists(a.name)
    print(f"redlatch {counts['rl']} redis-py {counts['py']} lost {counts['lost']} "
          f"key-left {left} ({a.seconds:g} s, {a.py} redis-py workers, {a.rl} redlatch "
          f"loops, hold {a.hold_ms:g} ms, redlatch options {' '.join(a.extra) or '-'})")


if __name__ == "__main__":
    main()
