#!/usr/bin/env python3
"""Turns the JSON lines of `redlatch bench --json` into BENCHMARKS.md (medians per
workload and master count, and each target of issue 6 checked against figures of the
same run)."""
import json
import platform
import statistics
import subprocess
import sys
from collections import defaultdict
from datetime import date


def load(path):
    groups = defaultdict(list)
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                r = json.loads(line)
                groups[(r["workload"], r["masters"])].append(r)
    return groups


def median(rows, field):
    vals = [r[field] for r in rows if isinstance(r.get(field), (int, float))]
    if vals:
        return statistics.median(vals)
    lists = [r[field] for r in rows if isinstance(r.get(field), list)]
    return [statistics.median(col) for col in zip(*lists)] if lists else None


def fmt(v):
    if isinstance(v, list):
        return "[" + ", ".join(fmt(x) for x in v) + "]"
    if isinstance(v, float):
        return f"{v:,.2f}" if abs(v) < 100 else f"{v:,.0f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def machine():
    cpu = "unknown cpu"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    redis = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()
    version = next((w.split("=")[1] for w in redis if w.startswith("v=")), "?")
    return f"{platform.machine()}, {cpu}, {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} vCPUs, redis-server {version}"


def main(path):
    g = load(path)
    m = lambda w, n, f: median(g.get((w, n), []), f)
    runs = max((len(v) for v in g.values()), default=0)
    out = ["# Benchmarks", "",
           f"Produced by `scripts/bench.sh` on {date.today()} ({machine()}); medians of {runs} runs.",
           "Masters are throwaway `redis-server` processes pinned to CPU 0, the client is pinned",
           "to CPU 1 (`taskset`), so every round trip crosses cores. Raw lines:",
           "`target/bench/results.jsonl`; one workload alone: `redlatch bench --workload W3 --redis URL`.",
           ""]
    ev = m("ceiling", 1, "evalsha_single_client_p50_us")
    out += ["## Ceiling (redis-benchmark, our own scripts, 1 master)", "",
            "| figure | value |", "|---|---|"]
    for f in ["evalsha_single_client_p50_us", "acquire_ops_per_s_p1", "release_ops_per_s_p1",
              "pairs_per_s_p1", "acquire_ops_per_s_p16", "release_ops_per_s_p16", "pairs_per_s_p16"]:
        out.append(f"| {f} | {fmt(m('ceiling', 1, f))} |")
    out.append("")
    out += ["## Floor (bare redis-rs, the W1 pair, no library)", "",
            "`redlatch bench --workload floor`: W1's acquire + release pair with the same scripts,",
            "sent by bare redis-rs multiplexed connections on the same tokio runtime (to every",
            "master at once, done at a majority). W1 / floor is what the library adds; floor /",
            "EVALSHA p50 is what a Rust client on tokio pays here over redis-benchmark's C loop.", "",
            "| masters | floor p50_us | W1 p50_us | W1 / floor | floor / EVALSHA p50 |", "|---|---|---|---|---|"]
    for n in (1, 3):
        fl, w1n = m("floor", n, "p50_us"), m("W1", n, "p50_us")
        if fl:
            out.append(f"| {n} | {fmt(fl)} | {fmt(w1n)} | {w1n / fl:.2f}× | {fl / ev:.2f}× |" if w1n and ev else f"| {n} | {fmt(fl)} | | | |")
    out.append("")
    fields = {
        "W1": ["ops", "p50_us", "p99_us", "ops_per_s"],
        "W2": ["ops_per_s", "p50_us", "p99_us"],
        "W3": ["ops_per_s", "cross_handoffs_per_s", "cross_p50_us", "cross_p99_us", "acquire_wait_p99_us", "per_task_min", "per_task_max", "violations"],
        "W4": ["ops_per_s", "cross_handoffs_per_s", "cross_p50_us", "cross_p99_us", "acquire_wait_p99_us", "per_task_min_max_ratio", "violations"],
        "W5": ["locks", "seconds", "max_renew_cmds_per_s", "rss_bytes_per_lock", "survived"],
        "W6": ["waiters", "connections_per_master", "pool_size", "rss_bytes_per_waiter", "all_acquired_ms"],
    }
    out += ["## Workloads", ""]
    for w, fs in fields.items():
        out += [f"### {w}", "", "| masters | " + " | ".join(fs) + " |", "|---" * (len(fs) + 1) + "|"]
        for n in (1, 3):
            if (w, n) in g:
                out.append(f"| {n} | " + " | ".join(fmt(m(w, n, f)) for f in fs) + " |")
        out.append("")
    checks = []

    def check(name, ok, detail):
        checks.append(f"| {name} | {'pass' if ok else '**miss**'} | {detail} |")

    def ratio(a, b):
        return a / b if a is not None and b else float("nan")

    w1, w1_3 = m("W1", 1, "p50_us"), m("W1", 3, "p50_us")
    if ev and w1:
        check("W1 p50 ≤ 2.2× EVALSHA p50", w1 <= 2.2 * ev, f"{fmt(w1)} µs vs {fmt(ev)} µs = {ratio(w1, ev):.2f}×")
    if w1 and w1_3:
        check("W1 3 masters ≤ 1.15× 1 master", w1_3 <= 1.15 * w1, f"{fmt(w1_3)} vs {fmt(w1)} µs = {ratio(w1_3, w1):.2f}×")
    ceil = m("ceiling", 1, "pairs_per_s_p16")
    for n, share in ((1, 0.85), (3, 0.40)):
        w2 = m("W2", n, "ops_per_s")
        if ceil and w2:
            check(f"W2 {n} master(s) ≥ {share:.0%} of the -P 16 pair ceiling", w2 >= share * ceil, f"{fmt(w2)} vs {fmt(ceil)} pairs/s = {ratio(w2, ceil):.0%}")
    cp50, cp99, wait99 = m("W3", 1, "cross_p50_us"), m("W3", 1, "cross_p99_us"), m("W3", 1, "acquire_wait_p99_us")
    if ev and cp50 is not None:
        check("W3 cross-task handoff p50 ≤ 2.5× EVALSHA p50", cp50 <= 2.5 * ev, f"{fmt(cp50)} µs = {ratio(cp50, ev):.2f}×")
    if cp99 is not None:
        check("W3 cross-task handoff p99 ≤ 1 ms", cp99 <= 1000, f"{fmt(cp99)} µs")
    if wait99 is not None:
        check("W3 acquire-wait p99 ≤ 5 ms", wait99 <= 5000, f"{fmt(wait99)} µs")
    for n in (1, 3):
        for w in ("W3", "W4"):
            v = m(w, n, "violations")
            if v is not None:
                check(f"{w} {n} master(s): zero violations", v == 0, fmt(v))
    fair, w3ops, w4x = m("W4", 1, "per_task_min_max_ratio"), m("W3", 1, "ops_per_s"), m("W4", 1, "cross_handoffs_per_s")
    if fair is not None:
        check("W4 per-task min/max ≥ 0.8", fair >= 0.8, fmt(fair))
    if w3ops and w4x:
        check("W4 cross handoffs/s ≥ 60% of W3 acq/s", w4x >= 0.6 * w3ops, f"{fmt(w4x)} vs {fmt(w3ops)} = {ratio(w4x, w3ops):.0%}")
    for n in (1, 3):
        locks, surv = m("W5", n, "locks"), m("W5", n, "survived")
        if locks:
            check(f"W5 {n} master(s): all locks kept", surv == locks, f"{fmt(surv)} of {fmt(locks)}")
            rn = m("W5", n, "max_renew_cmds_per_s")
            check(f"W5 {n} master(s): renewal ≤ 50 commands/s per master", rn <= 50, fmt(rn))
            rss = m("W5", n, "rss_bytes_per_lock")
            check(f"W5 {n} master(s): ≤ 1 KiB RSS per lock", rss <= 1024, f"{fmt(rss)} B")
        conns, pool, ms = m("W6", n, "connections_per_master"), m("W6", n, "pool_size"), m("W6", n, "all_acquired_ms")
        if conns is not None:
            check(f"W6 {n} master(s): connections ≤ pool + 1", max(conns) <= pool + 1, f"{fmt(conns)} (pool {fmt(pool)})")
            check(f"W6 {n} master(s): all acquire within 2 s", ms <= 2000, f"{fmt(ms)} ms")
    out += ["## Targets (ratios to figures of the same run)", "", "| target | result | figures |", "|---|---|---|"] + checks + [""]
    try:
        with open("benches/optimisations.md") as f:
            out += [f.read()]
    except OSError:
        pass
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1])
