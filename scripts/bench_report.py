#!/usr/bin/env python3
"""Turns the JSON lines of `redlatch-bench --json` into BENCHMARKS.md (medians per
workload and master count, and each target of issue 6 checked against figures of the
same run), plus the Redis Cluster section (issue 12) from the cluster part's lines.

Charts (PNG, docs/img/) are rendered from the same lines with matplotlib
(`pip install -r scripts/requirements-bench.txt`); without it the text is produced
all the same and the charts are skipped with a note.

Usage: bench_report.py RESULTS.jsonl [CLUSTER.jsonl] > BENCHMARKS.md
       bench_report.py --splice BENCHMARKS.md CLUSTER.jsonl   (rewrites only the
       cluster section of an existing BENCHMARKS.md, in place)
       bench_report.py --charts RESULTS.jsonl [--label COMMAND] [--out DIR]
                                           (only the charts, and the Markdown that
                                           embeds them on stdout)
       bench_report.py --peers-table PEERS.jsonl   (the Markdown table of the summary
                                           lines of one `--workload peers` run)
The charts are labelled with the command that produced the lines: --label, else
$BENCH_LABEL, else "scripts/bench.sh"."""
import json
import os
import platform
import statistics
import subprocess
import sys
import textwrap
from collections import defaultdict
from datetime import date


def load(path):
    groups = defaultdict(list)
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                r = json.loads(line)
                # W7 runs once per process count: "W7 P=8", "W7 P=32".
                w = f"{r['workload']} P={r['procs']}" if "procs" in r else r["workload"]
                groups[(w, r["masters"])].append(r)
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


def main(path, cluster_path=None):
    g = load(path)
    m = lambda w, n, f: median(g.get((w, n), []), f)
    runs = max((len(v) for v in g.values()), default=0)
    out = ["# Benchmarks", "",
           f"Produced by `scripts/bench.sh` on {date.today()} ({machine()}); medians of {runs} runs.",
           "Masters are throwaway `redis-server` processes pinned to CPU 0, the client is pinned",
           "to CPU 1 (`taskset`), so every round trip crosses cores. Raw lines:",
           "`target/bench/results.jsonl`; one workload alone: `redlatch-bench --workload W3 --redis URL`.",
           ""]
    out += charts_section(path, os.environ.get("BENCH_LABEL", f"scripts/bench.sh {runs}")) + [""]
    ev = m("ceiling", 1, "evalsha_single_client_p50_us")
    out += ["## Ceiling (redis-benchmark, our own scripts, 1 master)", "",
            "| figure | value |", "|---|---|"]
    for f in ["evalsha_single_client_p50_us", "acquire_ops_per_s_p1", "release_ops_per_s_p1",
              "pairs_per_s_p1", "acquire_ops_per_s_p16", "release_ops_per_s_p16", "pairs_per_s_p16"]:
        out.append(f"| {f} | {fmt(m('ceiling', 1, f))} |")
    out.append("")
    out += ["## Floor (bare redis-rs, the W1 pair, no library)", "",
            "`redlatch-bench --workload floor`: W1's acquire + release pair with the same scripts,",
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
    w7 = ["ops_per_s", "cross_handoffs_per_s", "cross_p50_us", "cross_p99_us", "tries_per_acquisition", "acquire_wait_p99_us", "per_proc_min", "per_proc_max", "violations"]
    for p in sorted({int(w.split("P=")[1]) for (w, _) in g if w.startswith("W7 P=")}):
        fields[f"W7 P={p}"] = w7
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
    x8, x32 = m("W7 P=8", 1, "cross_handoffs_per_s"), m("W7 P=32", 1, "cross_handoffs_per_s")
    if x8 and x32:
        tries = m("W7 P=32", 1, "tries_per_acquisition")
        check("W7 P=32 tries per acquisition ≤ 1.5", tries <= 1.5, fmt(tries))
        check("W7 P=32 cross handoffs/s ≥ 80% of P=8", x32 >= 0.8 * x8, f"{fmt(x32)} vs {fmt(x8)} = {ratio(x32, x8):.0%}")
        # Issue 14: 1.5× the 806/s that BLPOP-signalled python-redis-lock reached here.
        check("W7 P=32 cross handoffs/s ≥ 1.5× 806/s", x32 >= 1.5 * 806, f"{fmt(x32)} vs {fmt(1.5 * 806)}")
        p99 = m("W7 P=32", 1, "cross_p99_us")
        check("W7 P=32 handoff p99 ≤ 3 ms", p99 <= 3000, f"{fmt(p99)} µs")
        v = (m("W7 P=8", 1, "violations") or 0) + (m("W7 P=32", 1, "violations") or 0)
        check("W7 zero violations", v == 0, fmt(v))
    out += ["## Targets (ratios to figures of the same run)", "", "| target | result | figures |", "|---|---|---|"] + checks + [""]
    if cluster_path:
        out += cluster_section(cluster_path) + [""]
    try:
        with open("benches/optimisations.md") as f:
            out += [f.read()]
    except OSError:
        pass
    print("\n".join(out))


BEGIN, END = "<!-- cluster-bench:begin -->", "<!-- cluster-bench:end -->"
DEPLOYMENTS = [  # (label, topology, sync) in the order of the tables
    ("standalone, 1 master", "masters", "auto"),
    ("standalone + 1 replica, sync auto", "masters+replica", "auto"),
    ("standalone + 1 replica, sync off", "masters+replica", "off"),
    ("cluster 3+3, sync auto", "cluster", "auto"),
    ("cluster 3+3, sync off", "cluster", "off"),
]


def cluster_section(path):
    """The Redis Cluster section: W1, W2, W5 on the standalone master and the cluster
    (sync auto and off) from interleaved runs, ratios per round, and `grouping`."""
    rows = defaultdict(list)  # (workload, topology, sync) -> lines in run order
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                r = json.loads(line)
                topology = r.get("topology", "masters")
                if topology == "masters" and r.get("replicas"):
                    topology = "masters+replica"
                rows[(r["workload"], topology, r.get("sync", "auto"))].append(r)
    runs = max((len(v) for v in rows.values()), default=0)
    med = lambda w, t, s, f: median(rows.get((w, t, s), []), f)

    def per_round_ratio(w, a, b, f):
        """Median over rounds of a[f] / b[f], each round's lines paired in run order."""
        xs, ys = rows.get((w,) + a, []), rows.get((w,) + b, [])
        rs = [x[f] / y[f] for x, y in zip(xs, ys) if y.get(f)]
        return statistics.median(rs) if rs else None

    def ratio_fmt(v):
        return f"{v:.2f}×" if v is not None else ""

    base = ("masters", "auto")
    out = [BEGIN, "## Redis Cluster", "",
           f"Produced by `scripts/bench.sh --cluster` on {date.today()} ({machine()}); medians of {runs} rounds.",
           "A cluster of 3 primaries + 3 replicas (`redis-cli --cluster create ... --cluster-replicas 1`),",
           "one standalone master and one standalone master with a replica, all pinned to CPU 0, the",
           "client on CPU 1; each round runs every workload on the standalone master and on the",
           "cluster with the default `--sync-replicas auto` (a WAIT for the replica after every",
           "acquisition) and with `--sync-replicas off` (W1 also on the master with a replica),",
           "one after the other, so the ratios (medians of each round's",
           "ratio) are steadier than the absolute figures. **Other agents' builds and tests were",
           "running on the same 2 vCPUs during this run** (load average 4 to 9 on 2 vCPUs): absolute",
           "figures are noisy (standalone W2 moved between rounds by 3×), read the ratios.",
           f"Raw lines: `target/bench/cluster.jsonl`. One run: `redlatch-bench --workload W2 --cluster --redis redis://127.0.0.1:PORT`.",
           ""]
    out += ["### W1 (one task, uncontended acquire + release)", "",
            "| deployment | p50_us | p99_us | pairs/s | p50 / standalone (per round) |", "|---|---|---|---|---|"]
    for label, t, s in DEPLOYMENTS:
        if ("W1", t, s) in rows:
            out.append(f"| {label} | {fmt(med('W1', t, s, 'p50_us'))} | {fmt(med('W1', t, s, 'p99_us'))} | "
                       f"{fmt(med('W1', t, s, 'ops_per_s'))} | {ratio_fmt(per_round_ratio('W1', (t, s), base, 'p50_us'))} |")
    lines = []
    for t, what in (("cluster", "same cluster"), ("masters+replica", "standalone master with a replica")):
        wait = per_round_ratio("W1", (t, "auto"), (t, "off"), "p50_us")
        if wait is not None:
            a, o = med("W1", t, "auto", "p50_us"), med("W1", t, "off", "p50_us")
            lines.append(f"- WAIT, {what}: sync auto vs off p50 {fmt(a)} vs {fmt(o)} µs, {ratio_fmt(wait)} per round "
                         f"({a - o:+,.0f} µs per pair: the replica's acknowledgement is on the critical path of "
                         "every acquisition; the WAIT itself is pipelined with the script).")
    route = per_round_ratio("W1", ("cluster", "off"), ("masters+replica", "off"), "p50_us")
    if route is not None:
        lines.append(f"- Cluster vs a standalone master that also replicates (both sync off): p50 "
                     f"{fmt(med('W1', 'cluster', 'off', 'p50_us'))} vs {fmt(med('W1', 'masters+replica', 'off', 'p50_us'))} µs, "
                     f"{ratio_fmt(route)} per round: what routing by slot costs, apart from replication.")
    if lines:
        out += [""] + lines
    out += ["", "### W2 (64 tasks, one name each, spread over all slots)", "",
            "Redis calls are counted on the servers: `INFO commandstats` deltas of EVALSHA + EVAL",
            "summed over the primaries, divided by pairs (`rejected`: calls refused before running,",
            "`rejected_calls`, e.g. CROSSSLOT; WAIT counted apart). Per-slot grouping would need one",
            "call per operation here: a batch never holds two operations of one name, and the 64",
            "names lie in the number of distinct slots shown.", "",
            "| deployment | pairs/s | vs standalone (per round) | p50_us | p99_us | script calls/pair | rejected/pair | WAIT calls/pair | ops per script call | server CPU µs/pair | per-slot calls/pair |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, t, s in DEPLOYMENTS:
        if ("W2", t, s) in rows:
            g = lambda f: med("W2", t, s, f)
            ps = g("per_slot_calls_per_pair")
            ds = g("names_distinct_slots")
            out.append(f"| {label} | {fmt(g('ops_per_s'))} | {ratio_fmt(per_round_ratio('W2', (t, s), base, 'ops_per_s'))} | "
                       f"{fmt(g('p50_us'))} | {fmt(g('p99_us'))} | {fmt(g('script_calls_per_pair'))} | "
                       f"{fmt(g('rejected_script_calls_per_pair'))} | "
                       f"{fmt(g('wait_calls_per_pair'))} | {fmt(g('ops_per_script_call'))} | {fmt(g('server_cpu_us_per_pair'))} | "
                       + (f"{fmt(ps)} ({fmt(ds)} slots)" if ps is not None else "—") + " |")
    out += ["", "### W5 (100,000 locks under a 3 s watchdog: one round per second)", "",
            "Renewal calls counted on each primary over the 3 s hold (only the watchdog runs then);",
            "per round = calls / (hold time / 1 s period). The last two columns count one full round",
            "over the same 100,000 names cut into the watchdog's chunks of 5,000 locks: per-slot",
            "grouping would be one call per distinct slot of a chunk on that primary, per-node",
            "grouping (the library's: `renew.lua` names its locks in ARGV) one call per chunk and",
            "primary.", "",
            "| deployment | acquire s | kept | renew calls/s per primary | renew calls per round per primary | full round per slot | full round per node |",
            "|---|---|---|---|---|---|---|"]
    for label, t, s in DEPLOYMENTS:
        if ("W5", t, s) in rows:
            g = lambda f: med("W5", t, s, f)
            out.append(f"| {label} | {fmt(g('seconds'))} | {fmt(g('survived'))} of {fmt(g('locks'))} | "
                       f"{fmt(g('renew_cmds_per_s_per_master'))} | {fmt(g('renew_calls_per_round_per_master'))} | "
                       f"{fmt(g('per_slot_calls_per_full_round')) if g('per_slot_calls_per_full_round') else '—'} | "
                       f"{fmt(g('per_node_calls_per_full_round')) if g('per_node_calls_per_full_round') else '—'} |")
    gr = rows.get(("grouping", "cluster", "off"), [])
    if gr:
        g = lambda f: median(gr, f)
        out += ["", "### Per-node vs per-slot grouping (`redlatch-bench --workload grouping --cluster`)", "",
                "The same key sets sent each way by bare redis-rs with the project's scripts (EVALSHA;",
                "the calls of one primary in a chunk pipelined, the best case for the many-call ways);",
                "cost read from the three primaries: script calls, server CPU (`INFO cpu` user + system:",
                "all the servers' work, replication to the replicas included) and wall time. Redis 7.0",
                "refuses declared KEYS of several slots with CROSSSLOT even with `allow-cross-slot-keys`,",
                "so a per-node call names the locks in ARGV: `renew.lua` and `batch_node.lua` do (per node",
                "is the library's way for renewals, and for group commit on Redis >= 7; per slot before).",
                "Per key is no grouping at all. Renew: one full",
                "round over 100,000 held locks in chunks of 5,000 (W5's shape). Batch B: B acquires then B releases on B names in B distinct",
                "slots of each primary, 4,096 pairs per primary (W2's shape: one `batch_node.lua` call per",
                "node vs one `acquire.lua` / `release.lua` call per slot, which is per key here).", "",
                "| shape | way | script calls | server CPU | wall | server CPU vs per node |",
                "|---|---|---|---|---|---|"]
        nc = g("renew_node_server_cpu_ms_per_round")
        for way in ("node", "slot", "key"):
            c = g(f"renew_{way}_server_cpu_ms_per_round")
            if c is None:
                continue
            out.append(f"| renew, one round of 100,000 locks | per {way} | {fmt(g(f'renew_{way}_calls_per_round'))} | "
                       f"{fmt(c)} ms | {fmt(g(f'renew_{way}_ms_per_round'))} ms | {ratio_fmt(c / nc if nc else None)} |")
        for b in (8, 32):
            k = f"batch{b}"
            nc = g(f"{k}_node_server_cpu_us_per_pair")
            if nc is None:
                continue
            for way in ("node", "slot"):
                c = g(f"{k}_{way}_server_cpu_us_per_pair")
                out.append(f"| batch of {b}, per pair | per {way} | {fmt(g(f'{k}_{way}_calls_per_pair'))} | {fmt(c)} µs | "
                           f"{fmt(g(f'{k}_{way}_pairs_per_s'))} pairs/s | {ratio_fmt(c / nc if nc else None)} |")
    checks = []

    def check(name, ok, detail):
        checks.append(f"| {name} | {'pass' if ok else '**miss**'} | {detail} |")

    r = per_round_ratio("W1", ("cluster", "off"), base, "p50_us")
    if r is not None:
        check("W1 cluster (sync off) p50 ≤ 1.15× standalone (\"should equal\")", r <= 1.15, f"{r:.2f}× per round")
    r = per_round_ratio("W1", ("cluster", "off"), ("masters+replica", "off"), "p50_us")
    if r is not None:
        check("W1 cluster (sync off) p50 ≤ 1.15× standalone with a replica (sync off)", r <= 1.15, f"{r:.2f}× per round")
    for s_ in ("auto", "off"):
        locks, kept = med("W5", "cluster", s_, "locks"), med("W5", "cluster", s_, "survived")
        if locks:
            check(f"W5 cluster (sync {s_}): all locks kept", kept == locks, f"{fmt(kept)} of {fmt(locks)}")
        per_round = med("W5", "cluster", s_, "renew_calls_per_round_per_master")
        if per_round:
            check(f"W5 cluster (sync {s_}): ≤ 50 renew calls per primary per round (\"a handful\")",
                  max(per_round) <= 50, f"{fmt(per_round)} measured; a full round per node "
                  f"{fmt(med('W5', 'cluster', s_, 'per_node_calls_per_full_round'))}, per slot "
                  f"{fmt(med('W5', 'cluster', s_, 'per_slot_calls_per_full_round'))}")
        w2 = med("W2", "cluster", s_, "ops_per_script_call")
        if w2:
            check(f"W2 cluster (sync {s_}): group commit batches (> 1 operation per script call)", w2 > 1.0,
                  f"{fmt(w2)} operations per call")
    if checks:
        out += ["", "### Checks (the cluster targets against this run)", "",
                "| check | result | figures |", "|---|---|---|"] + checks
    out.append(END)
    return out


def splice(doc_path, cluster_path):
    """Replaces the cluster section of `doc_path` (or inserts it before the optimisation
    log, else at the end)."""
    with open(doc_path) as f:
        doc = f.read()
    section = "\n".join(cluster_section(cluster_path))
    if BEGIN in doc and END in doc:
        head, rest = doc.split(BEGIN, 1)
        doc = head + section + rest.split(END, 1)[1]
    elif "## Optimisation log" in doc:
        head, rest = doc.split("## Optimisation log", 1)
        doc = head + section + "\n\n## Optimisation log" + rest
    else:
        doc = doc.rstrip("\n") + "\n\n" + section + "\n"
    with open(doc_path, "w") as f:
        f.write(doc)


# ---------------------------------------------------------------------------------
# Charts (issue 26 item 7): PNGs under docs/img/, embedded in BENCHMARKS.md.

CHART_DIR = "docs/img"
CHARTS = [  # file, alt text, caption
    ("w7-handoffs.png", "cross-process handoffs per second against the number of processes",
     "W7: cross-process handoffs/s as more processes contend for one lock (one master). "
     "Each process is its own `Client`; every acquisition is handed to a waiting process."),
    ("w2-pairs.png", "W2 acquire+release pairs per second",
     "W2: 64 tasks, one name each, acquire + release pairs/s, beside the redis-benchmark "
     "ceiling of the same scripts and any reference library whose lines the JSON holds."),
    ("w2-peers.png", "W2 beside the rslock protocol and redlatch's wire floor: pairs/s and CPU per pair",
     "W2 in one `--workload peers` run per round: redlatch, the rslock protocol (SET NX PX and a "
     "compare-and-delete script) and redlatch's wire floor (batch.lua in perfect batches, no "
     "library): pairs/s, and the server's and the client's CPU per acquire+release pair."),
    ("peers.png", "redlatch beside Redisson 4.7.0, the rslock protocol and python-redis-lock's wire: W1, W2, W3 and W7",
     "`--workload peers` in interleaved rounds (each round a point, the bar its median): W1 p50 "
     "(lower is better), W2 pairs/s, W3 cross-thread and W7 (P = 8 processes) cross-process "
     "hand-overs/s, log scale; Redisson is the real client (4.7.0) in JVMs, rslock has no waiting, "
     "py-redis-lock is python-redis-lock's wire (SET NX EX, BLPOP on a signal list) from Rust."),
    ("acquire-wait.png", "acquire-wait latency p50 and p99 per workload",
     "Acquire wait (from the `lock()` call to the grant) under contention: p50 and p99 of "
     "each run, log scale."),
]


def rows_of(path):
    """Every JSON line of `path`, in order."""
    with open(path) as f:
        return [json.loads(l) for l in (x.strip() for x in f) if l.startswith("{")]


def charts_section(path, label, out_dir=CHART_DIR):
    """Renders the charts from the lines of `path` into `out_dir` and returns the
    Markdown that embeds them (or says why there are none)."""
    out = ["## Charts", ""]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return out + ["Charts skipped: matplotlib is not installed "
                      "(`pip install -r scripts/requirements-bench.txt`, then run "
                      "`scripts/bench_report.py` again)."]
    rows = rows_of(path)
    os.makedirs(out_dir, exist_ok=True)
    source = f"`{label}` on {date.today()}, {machine()}"
    made = []
    for name, _alt, _caption in CHARTS:
        fig = {"w7-handoffs.png": w7_chart, "w2-pairs.png": w2_chart, "w2-peers.png": peers_chart,
               "peers.png": rounds_chart,
               "acquire-wait.png": wait_chart}[name](plt, rows)
        if fig is None:
            continue
        footer = textwrap.wrap("data: " + source.replace("`", ""), 125)
        fig.tight_layout(rect=(0, 0.012 + 0.028 * len(footer), 1, 1))
        fig.text(0.01, 0.01, "\n".join(footer), fontsize=7, color="0.35")
        fig.savefig(os.path.join(out_dir, name), dpi=110)
        plt.close(fig)
        made.append(name)
    rel = os.path.relpath(out_dir, ".")
    for name, alt, caption in CHARTS:
        if name in made:
            out += [f"![{alt}]({rel}/{name})", "", f"*{caption}*", ""]
    if not made:
        out += ["No chart: the lines hold none of W2, W3, W4, W7.", ""]
    out.append(f"Rendered by `scripts/bench_report.py` from the JSON lines of {source}.")
    return out


def _median_by(rows, key, field):
    by = defaultdict(list)
    for r in rows:
        if isinstance(r.get(field), (int, float)):
            by[key(r)].append(r[field])
    return {k: statistics.median(v) for k, v in by.items()}, by


def w7_chart(plt, rows):
    w7 = [r for r in rows if r.get("workload") == "W7" and "procs" in r]
    if not w7:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for lib in sorted({r.get("lib", "redlatch") for r in w7}):
        mine = [r for r in w7 if r.get("lib", "redlatch") == lib]
        med, every = _median_by(mine, lambda r: r["procs"], "cross_handoffs_per_s")
        xs = sorted(med)
        line, = ax.plot(xs, [med[x] for x in xs], marker="o", label=f"{lib} (median)")
        for x in xs:
            ax.scatter([x] * len(every[x]), every[x], color=line.get_color(), alpha=0.35, s=14)
        tries, _ = _median_by(mine, lambda r: r["procs"], "tries_per_acquisition")
        for x in xs:
            note = f"{med[x]:,.0f}/s" + (f"\n{tries[x]:.2f} tries/acq." if x in tries else "")
            ax.annotate(note, (x, med[x]), textcoords="offset points", xytext=(0, 8),
                        ha="center", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted({r["procs"] for r in w7}))
    ax.get_xaxis().set_major_formatter(plt.matplotlib.ticker.ScalarFormatter())
    ax.set_ylim(bottom=0, top=ax.get_ylim()[1] * 1.2)
    ax.set_xlabel("processes contending for one lock (W7, one master)")
    ax.set_ylabel("cross-process handoffs / s")
    ax.set_title("Cross-process handoffs/s against the number of processes")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    return fig


def _peers_run(r):
    """A line of a `--workload peers` run (charted by peers_chart, not w2_chart)."""
    return (r.get("lib") in ("rslock-protocol", "batch-floor", "redisson", "python-redis-lock-protocol",
                             "python-redis-lock")
            or "ops_per_s_vs_rslock" in r or "round" in r)


def rounds_chart(plt, rows):
    """redlatch, the rslock protocol and Redisson in the rounds of `--workload peers`."""
    rows = [r for r in rows if "round" in r and r.get("lib") != "summary"]
    panels = [("W1", "p50_us", "W1 p50 µs (lower is better)", False),
              ("W2", "ops_per_s", "W2 pairs/s, 64 tasks", True),
              ("W3", "cross_handoffs_per_s", "W3 cross-thread hand-overs/s", True),
              ("W7", "cross_handoffs_per_s", "W7 P = 8 cross-process hand-overs/s", True)]
    if not any(r.get("lib") == "redisson" for r in rows):
        return None
    libs = ["redlatch", "rslock-protocol", "python-redis-lock-protocol", "python-redis-lock",
            "redisson"]
    colors = {"redlatch": "C0", "rslock-protocol": "C1", "python-redis-lock-protocol": "C2",
              "python-redis-lock": "C4", "redisson": "C3"}
    servers = sorted({r.get("server", "") for r in rows})
    fig, axes = plt.subplots(len(servers), 4, figsize=(12, 3.6 * len(servers)), squeeze=False)
    for row, server in enumerate(servers):
        for ax, (w, field, title, log) in zip(axes[row], panels):
            shown = []
            for lib in libs:
                vals = [r[field] for r in rows if r.get("server", "") == server and r["workload"] == w
                        and r.get("lib") == lib and isinstance(r.get(field), (int, float)) and r[field] > 0]
                if not vals:
                    continue
                i = len(shown)
                med = statistics.median(vals)
                ax.bar(i, med, color=colors[lib], alpha=0.85)
                ax.scatter([i] * len(vals), vals, color="black", s=10, zorder=3)
                ax.annotate(f"{med:,.0f}", (i, med), textcoords="offset points", xytext=(0, 3),
                            ha="center", fontsize=8)
                shown.append({"python-redis-lock-protocol": "python-\nredis-lock's\nwire (Rust)",
                              "python-redis-lock": "python-\nredis-lock"}.get(lib, lib.replace("-protocol", "")))
            if log:
                ax.set_yscale("log")
            ax.set_xticks(range(len(shown)), shown, fontsize=7 if len(shown) > 3 else 8)
            ax.set_title(f"{title}" + (f"\n{server}" if server else ""), fontsize=9)
            ax.grid(axis="y", alpha=0.3)
    return fig


def w2_chart(plt, rows):
    w2 = [r for r in rows if r.get("workload") == "W2" and r.get("topology", "masters") == "masters"
          and not _peers_run(r)]
    if not w2:
        return None
    libs = sorted({r.get("lib", "redlatch") for r in w2}, key=lambda l: (l != "redlatch", l))
    bars = []  # (label, median, every value)
    for lib in libs:
        med, every = _median_by([r for r in w2 if r.get("lib", "redlatch") == lib], lambda r: r["masters"], "ops_per_s")
        for n in sorted(med):
            bars.append((f"{lib}\n{n} master{'s' if n > 1 else ''}", med[n], every[n], lib))
    fig, ax = plt.subplots(figsize=(7, 4.2))
    colors = {lib: f"C{i}" for i, lib in enumerate(libs)}
    for i, (label, med, every, lib) in enumerate(bars):
        ax.bar(i, med, color=colors[lib], alpha=0.85)
        ax.scatter([i] * len(every), every, color="black", s=10, zorder=3)
        ax.annotate(f"median {med:,.0f}/s", (i, med), textcoords="offset points", xytext=(0, 4), ha="center",
                    fontsize=8, bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="none", alpha=0.8))
    ax.set_xticks(range(len(bars)), [b[0] for b in bars], fontsize=8)
    ceiling = [r["pairs_per_s_p16"] for r in rows if r.get("workload") == "ceiling" and r.get("pairs_per_s_p16")]
    if ceiling:
        c = statistics.median(ceiling)
        ax.axhline(c, color="0.4", linestyle="--", linewidth=1)
        ax.text(0.99, c, f"redis-benchmark -P 16 pair ceiling, same scripts: {c:,.0f}/s ",
                transform=ax.get_yaxis_transform(), ha="right", va="bottom", fontsize=8, color="0.3")
    ax.set_ylim(top=ax.get_ylim()[1] * 1.1)
    ax.set_ylabel("acquire + release pairs / s (W2, 64 tasks)")
    peers = [l for l in libs if l != "redlatch"]
    ax.set_title("W2 throughput against " + ", ".join(peers) if peers else
                 "W2 throughput: redlatch alone (no reference peer in this JSON)")
    ax.grid(axis="y", alpha=0.3)
    return fig


def peers_chart(plt, rows):
    w2 = [r for r in rows if r.get("workload") == "W2" and _peers_run(r) and "round" not in r]
    if not w2:
        return None
    libs = ["redlatch", "rslock-protocol", "batch-floor"]
    libs = [l for l in libs if any(r.get("lib", "redlatch") == l for r in w2)]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 4.2))
    for i, lib in enumerate(libs):
        mine = [r for r in w2 if r.get("lib", "redlatch") == lib]
        ops = [r["ops_per_s"] for r in mine]
        left.bar(i, statistics.median(ops), color=f"C{i}", alpha=0.85)
        left.scatter([i] * len(ops), ops, color="black", s=10, zorder=3)
        for j, (field, hatch) in enumerate((("server_cpu_us_per_pair", ""), ("client_cpu_us_per_pair", "//"))):
            vals = [r[field] for r in mine if isinstance(r.get(field), (int, float))]
            if vals:
                x = i + (j - 0.5) * 0.38
                right.bar(x, statistics.median(vals), width=0.36, color=f"C{i}", alpha=0.85, hatch=hatch)
                right.scatter([x] * len(vals), vals, color="black", s=10, zorder=3)
                right.annotate(f"{statistics.median(vals):.1f}", (x, statistics.median(vals)),
                               textcoords="offset points", xytext=(0, 3), ha="center", fontsize=8)
    for ax in (left, right):
        ax.set_xticks(range(len(libs)), libs, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    left.set_ylabel("acquire + release pairs / s (W2, 1 master)")
    left.set_title("W2 throughput", fontsize=10)
    right.set_ylabel("CPU µs per pair (plain: Redis server; hatched: client)")
    right.set_title("Where the time goes", fontsize=10)
    fig.tight_layout()
    return fig


def wait_chart(plt, rows):
    groups = []  # (label, [(p50, p99) per run])
    for w in ("W3", "W4"):
        for n in (1, 3):
            rs = [r for r in rows if r.get("workload") == w and r.get("masters") == n
                  and r.get("topology", "masters") == "masters" and "acquire_wait_p99_us" in r]
            if rs:
                tasks = rs[0].get("tasks", "")
                groups.append((f"{w}{' fair' if w == 'W4' else ''}\n{tasks} tasks, {n} master{'s' if n > 1 else ''}",
                               [(r.get("acquire_wait_p50_us"), r["acquire_wait_p99_us"]) for r in rs]))
    for p in sorted({r["procs"] for r in rows if r.get("workload") == "W7" and "procs" in r}):
        rs = [r for r in rows if r.get("workload") == "W7" and r.get("procs") == p and "acquire_wait_p99_us" in r]
        if rs:
            groups.append((f"W7\n{p} processes", [(r.get("acquire_wait_p50_us"), r["acquire_wait_p99_us"]) for r in rs]))
    if not groups:
        return None
    fig, ax = plt.subplots(figsize=(max(7, 1.25 * len(groups) + 2), 4.4))
    for i, (_label, runs) in enumerate(groups):
        p50 = [a / 1000 for a, _ in runs if a is not None]  # ms
        p99 = [b / 1000 for _, b in runs]
        m50 = statistics.median(p50) if p50 else None
        m99 = statistics.median(p99)
        if m50 is not None:
            ax.vlines(i, m50, m99, color="C0", linewidth=6, alpha=0.35)
            ax.scatter([i] * len(p50), p50, color="C0", s=16, label="p50" if i == 0 else None, zorder=3)
            ax.annotate(f"{m50:.2g} ms", (i, m50), textcoords="offset points", xytext=(8, -3), fontsize=7)
        ax.scatter([i] * len(p99), p99, color="C3", marker="^", s=18, label="p99" if i == 0 else None, zorder=3)
        ax.annotate(f"{m99:.2g} ms", (i, m99), textcoords="offset points", xytext=(8, -3), fontsize=7)
    ax.set_yscale("log")
    ax.set_xticks(range(len(groups)), [g[0] for g in groups], fontsize=8)
    ax.set_xlim(-0.6, len(groups) - 0.3)
    ticker = plt.matplotlib.ticker
    ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_ylabel("acquire wait, ms (log scale)")
    ax.set_title("Acquire wait under contention: p50 and p99 (each run a point)")
    ax.grid(axis="y", which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="upper left")
    return fig

PEER_COLUMNS = [("redlatch", "redlatch"), ("rslock", "rslock protocol"),
                ("signal", "python-redis-lock wire"), ("python", "python-redis-lock"),
                ("redisson", "Redisson 4.7.0"),
                ("floor", "wire floor")]


def peers_table(path):
    """One row per summary line of a `--workload peers` run: each library's median
    (min–max) over the rounds, then redlatch's per-round ratios to each peer."""
    def fmt(v):
        return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"
    rows = [json.loads(l) for l in open(path) if l.strip()]
    rows = [r for r in rows if r.get("lib") == "summary"]
    libs = [(k, t) for k, t in PEER_COLUMNS if any(k in r for r in rows)]
    peers = [(k, t) for k, t in libs if k != "redlatch" and any(f"vs_{k}" in r for r in rows)]
    head = ["figure"] + [t for _, t in libs] + [f"vs {t}" for _, t in peers]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [f"{r['workload']} {r['figure']}"]
        for k, _ in libs:
            cells.append(f"{fmt(r[k])} ({fmt(r[k + '_min'])}–{fmt(r[k + '_max'])})" if k in r else "—")
        for k, _ in peers:
            v = f"vs_{k}"
            cells.append(f"**{r[v]:.2f}×** ({r[v + '_min']:.2f}–{r[v + '_max']:.2f})" if v in r else "—")
        out.append("| " + " | ".join(cells) + " |")
    return out


if __name__ == "__main__":
    if sys.argv[1] == "--peers-table":
        print("\n".join(peers_table(sys.argv[2])))
    elif sys.argv[1] == "--splice":
        splice(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "--charts":
        args = sys.argv[2:]
        opt = lambda name, default: args[args.index(name) + 1] if name in args else default
        print("\n".join(charts_section(args[0], opt("--label", os.environ.get("BENCH_LABEL", "scripts/bench.sh")),
                                        opt("--out", CHART_DIR))))
    else:
        main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
