#!/usr/bin/env python3
"""Render the Redisson compatibility matrix from the JVM interop tests' result lines.

Each test of tests/redisson/redisson_jvm*.rs that passed wrote `primitive|version|deployment|result`
lines to target/interop-matrix/<test>.txt (result: `pass`, or `diff: one line`). A cell
is `pass` when every line for it passed, the difference's footnote when one was recorded,
and `—` when no test covered it in this run (not tested, or its test failed).

    scripts/interop_matrix.py            print the table
    scripts/interop_matrix.py --write    also put it into docs/redisson-compat.md
                                         (between the matrix markers)
    scripts/interop_matrix.py --summary  print the short table (one row per primitive)
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")),
                       "interop-matrix")
DOC = os.path.join(ROOT, "docs", "redisson-compat.md")
BEGIN, END = "<!-- matrix:begin -->", "<!-- matrix:end -->"

VERSIONS = ["3.27.2", "3.52.0", "4.7.0"]
PRIMITIVES = ["RLock", "RFairLock", "RFencedLock", "RReadWriteLock", "RSemaphore",
              "RPermitExpirableSemaphore", "RCountDownLatch", "RedissonMultiLock",
              "RedissonFasterMultiLock", "RedissonNonReentrantLock",
              "RedissonNonReentrantFairLock", "RedissonSpinLock"]
DEPLOYMENTS = ["standalone", "cluster", "sentinel"]


def load():
    cells = {}
    if not os.path.isdir(RESULTS):
        return cells
    for name in sorted(os.listdir(RESULTS)):
        if not name.endswith(".txt"):
            continue
        with open(os.path.join(RESULTS, name), encoding="utf-8") as f:
            for line in f:
                parts = line.rstrip("\n").split("|", 3)
                if len(parts) != 4:
                    continue
                primitive, version, deployment, result = parts
                cells.setdefault((primitive, deployment, version), set()).add(result)
    return cells


def render(cells):
    notes = []

    def cell(results):
        if not results:
            return "—"
        diffs = sorted(r[len("diff: "):] for r in results if r.startswith("diff: "))
        if not diffs:
            return "pass"
        marks = []
        for d in diffs:
            if d not in notes:
                notes.append(d)
            marks.append(f"diff [{notes.index(d) + 1}]")
        return ", ".join(marks)

    deployments = DEPLOYMENTS + sorted({d for (_, d, _) in cells} - set(DEPLOYMENTS))
    lines = ["| primitive | deployment | " + " | ".join(f"Redisson {v}" for v in VERSIONS) + " |",
             "|---|---|" + "---|" * len(VERSIONS)]
    for p in PRIMITIVES:
        for d in deployments:
            row = [cell(cells.get((p, d, v))) for v in VERSIONS]
            if all(c == "—" for c in row) and d not in DEPLOYMENTS:
                continue
            lines.append(f"| {p} | {d} | " + " | ".join(row) + " |")
    if notes:
        lines.append("")
        for i, n in enumerate(notes, 1):
            lines.append(f"[{i}] {n}")
    return "\n".join(lines)


def summary(cells):
    lines = ["| primitive | standalone | cluster | sentinel |", "|---|---|---|---|"]
    for p in PRIMITIVES:
        row = []
        for d in DEPLOYMENTS:
            results = [cells.get((p, d, v)) for v in VERSIONS]
            tested = [v for v, r in zip(VERSIONS, results) if r]
            if not tested:
                row.append("—")
                continue
            diff = any(any(x.startswith("diff") for x in r) for r in results if r)
            row.append(("pass" if not diff else "pass*") + " (" + ", ".join(tested) + ")")
        lines.append(f"| {p} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main():
    cells = load()
    if not cells:
        print(f"no results in {RESULTS}: run the JVM interop tests first "
              "(cargo test --test redisson redisson_jvm)", file=sys.stderr)
        return 1
    table = render(cells)
    if "--summary" in sys.argv:
        print(summary(cells))
        return 0
    print(table)
    if "--write" in sys.argv:
        with open(DOC, encoding="utf-8") as f:
            doc = f.read()
        head, rest = doc.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        with open(DOC, "w", encoding="utf-8") as f:
            f.write(head + BEGIN + "\n" + table + "\n" + END + tail)
        print(f"written to {os.path.relpath(DOC, ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
