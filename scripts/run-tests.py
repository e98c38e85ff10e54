#!/usr/bin/env python3
"""Runs the workspace's test binaries at once (scripts/test.sh's runner, issue 48).

The suite waits more than it computes (servers starting, leases running out, JVMs
answering), so its binaries run side by side instead of one after the other. Input:
the JSON messages of `cargo test --no-run --message-format=json` (the binaries cargo
would run, already built) on stdin or in the file named by the first argument; the doc
tests run as one more job (`cargo test --doc`, which builds them itself).

Each binary runs as cargo would run it (in its package's directory, with the CARGO_*
variables cargo sets), its output in a log of its own (target/test-logs/NAME.log). When a
binary ends, its log is printed whole under cargo's "Running" line, so the output reads
as `cargo test`'s (scripts/flakes.sh parses it so). At the end:

    redlatch: finished standalone in 171.2 s (exit 0, 212 passed)     one per binary, slowest first
    redlatch: FAILED standalone::waits::a_test_name                   one per failed test
    redlatch:   thread '...' panicked at tests/...: message           where each failed
    redlatch: N passed, N failed, N skipped                           the last line

Environment: REDLATCH_TEST_JOBS (binaries at once, longest first; default 4), REDLATCH_TEST_TIMEOUT
(seconds one binary may run before it is killed and counted failed; default 1800),
REDLATCH_TEST_FEATURES (the doc tests' --features), REDLATCH_TEST_LOGS (the logs'
directory), REDLATCH_TEST_TIMES=1 (each test's time, libtest's unstable --report-time,
allowed on a stable toolchain by RUSTC_BOOTSTRAP=1 in the binaries' environment only;
the 25 slowest are listed at the end). Exits 1 if any binary failed.
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Binaries known to run longest start first; the rest by name. The doc tests (mostly
# compiling) come before the bench, whose peers run starts JVMs with a bounded time.
LONGEST_FIRST = ["redisson", "topologies", "standalone", "cli", "doc", "bench", "metrics"]
# Binaries at once by default: all at once overloaded a busy 2-core machine (load 30,
# the bench's peers run out of time); four keep the CPU busy while they wait.
DEFAULT_JOBS = 4


class Job:
    def __init__(self, label, header, argv, cwd, env):
        self.label, self.header, self.argv, self.cwd, self.env = label, header, argv, cwd, env
        self.log = None
        self.status = None
        self.seconds = 0.0
        self.timed_out = False


def cargo_packages():
    """package id -> (name, version, manifest path), from `cargo metadata`."""
    out = subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    return {p["id"]: (p["name"], p["version"], p["manifest_path"]) for p in json.loads(out)["packages"]}


def rel(path):
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def binary_jobs(messages, packages):
    jobs = []
    for line in messages:
        if not line.startswith("{"):
            continue
        m = json.loads(line)
        if m.get("reason") != "compiler-artifact" or not m.get("executable"):
            continue
        if not m.get("profile", {}).get("test"):
            continue
        name, version, manifest = packages[m["package_id"]]
        target = m["target"]
        src = rel(target["src_path"])
        exe = m["executable"]
        unit = "test" not in target["kind"]
        label = f"{name} (unittests {target['kind'][0]} {target['name']})" if unit else target["name"]
        header = f"     Running {'unittests ' if unit else ''}{src} ({rel(exe)})"
        env = dict(os.environ)
        env.update({
            "CARGO_MANIFEST_DIR": str(Path(manifest).parent),
            "CARGO_MANIFEST_PATH": manifest,
            "CARGO_PKG_NAME": name,
            "CARGO_PKG_VERSION": version,
            "CARGO_CRATE_NAME": target["name"].replace("-", "_"),
        })
        env.setdefault("CARGO", "cargo")
        argv = [exe]
        if os.environ.get("REDLATCH_TEST_TIMES") == "1":
            env["RUSTC_BOOTSTRAP"] = "1"
            argv += ["-Z", "unstable-options", "--report-time"]
        jobs.append(Job(label, header, argv, str(Path(manifest).parent), env))
    return jobs


def doc_job():
    features = os.environ.get("REDLATCH_TEST_FEATURES", "")
    argv = ["cargo", "test", "--workspace", "--doc", "--no-fail-fast"]
    if features:
        argv += ["--features", features]
    return Job("doc tests", "   Doc-tests (cargo test --workspace --doc)", argv, str(ROOT), dict(os.environ))


def order(jobs):
    def rank(job):
        base = job.label.split(" ")[0]
        return (LONGEST_FIRST.index(base) if base in LONGEST_FIRST else len(LONGEST_FIRST), job.label)

    return sorted(jobs, key=rank)


def run(job, logs, timeout, printer):
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", job.label).strip("_")
    job.log = logs / f"{safe}.log"
    start = time.monotonic()
    with open(job.log, "wb") as out:
        proc = subprocess.Popen(job.argv, cwd=job.cwd, env=job.env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        RUNNING.append(proc)
        try:
            job.status = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            job.timed_out = True
            proc.kill()
            job.status = proc.wait()
    job.seconds = time.monotonic() - start
    printer(job)


# The jobs' processes, killed when the runner is told to stop.
RUNNING = []
RESULT = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored")


def tally(text):
    passed = failed = ignored = results = 0
    for line in text.splitlines():
        m = RESULT.match(line)
        if m:
            results += 1
            passed, failed, ignored = passed + int(m[1]), failed + int(m[2]), ignored + int(m[3])
    return passed, failed, ignored, results


def binary_name(job):
    """The name cargo's output gives the binary's tests (`standalone`, `doc:redlatch`)."""
    return job.label.split(" ")[0]


def main():
    source = open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin
    jobs = order(binary_jobs(source, cargo_packages()) + [doc_job()])
    logs = Path(os.environ.get("REDLATCH_TEST_LOGS", ROOT / "target" / "test-logs"))
    logs.mkdir(parents=True, exist_ok=True)
    for old in logs.glob("*.log"):
        old.unlink()
    width = int(os.environ.get("REDLATCH_TEST_JOBS", "0") or 0) or DEFAULT_JOBS
    timeout = float(os.environ.get("REDLATCH_TEST_TIMEOUT", "1800"))
    lock = threading.Lock()

    def printer(job):
        with lock:
            print(job.header, flush=True)
            sys.stdout.write(job.log.read_text(errors="replace"))
            if job.timed_out:
                print(f"redlatch: {job.label} killed after {timeout:.0f} s (REDLATCH_TEST_TIMEOUT)")
            print(f"redlatch: {job.label} finished in {job.seconds:.1f} s (exit {job.status})", flush=True)

    print(f"redlatch: running {len(jobs)} test jobs, {width} at once (logs in {rel(logs)}/)", flush=True)
    started = time.monotonic()
    todo = list(jobs)  # taken in order (longest first) by `width` workers

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                job = todo.pop(0)
            run(job, logs, timeout, printer)

    def stop(signum, _frame):
        # flakes.sh's timeout signals the runner: its jobs stop with it.
        for proc in RUNNING:
            proc.kill()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(width)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    total = [0, 0, 0]
    failed_tests, panics, broken, times = [], [], [], []
    print()
    for job in sorted(jobs, key=lambda j: -j.seconds):
        text = job.log.read_text(errors="replace")
        p, f, i, results = tally(text)
        total = [total[0] + p, total[1] + f, total[2] + i]
        print(f"redlatch: finished {job.label} in {job.seconds:.1f} s (exit {job.status}, {p} passed, {f} failed, {i} skipped)")
        lines = text.splitlines()
        for n, line in enumerate(lines):
            m = re.match(r"^test (.*) \.\.\. FAILED( <[0-9.]+s>)?$", line)
            if m:
                failed_tests.append(f"{binary_name(job)}::{m[1]}")
            m = re.match(r"^test (.*) \.\.\. \w+ <([0-9.]+)s>$", line)
            if m:
                times.append((float(m[2]), f"{binary_name(job)}::{m[1]}"))
            if re.match(r"^thread .* panicked at ", line):
                panics.append(line)
                if n + 1 < len(lines):
                    panics.append("  " + lines[n + 1])
        if job.status != 0 and (results == 0 or job.timed_out):
            broken.append(f"{job.label} exited {job.status}" + (" (killed: timeout)" if job.timed_out else " without a result line"))
    for seconds, name in sorted(times, reverse=True)[:25]:
        print(f"redlatch: slow {seconds:7.1f} s {name}")
    for t in failed_tests:
        print(f"redlatch: FAILED {t}")
    for b in broken:
        print(f"redlatch: BROKEN {b}")
    if failed_tests or broken:
        # Each panic's place and message, repeated here: a failed run's backtraces can
        # push them out of a CI log's excerpt.
        for line in panics[:40]:
            print(f"redlatch: {line}")
    print(f"({len(jobs)} test jobs, {width} at once, in {time.monotonic() - started:.0f} s; logs in {rel(logs)}/)")
    print(f"redlatch: {total[0]} passed, {total[1]} failed, {total[2]} skipped")
    return 1 if any(j.status != 0 for j in jobs) else 0


if __name__ == "__main__":
    sys.exit(main())
