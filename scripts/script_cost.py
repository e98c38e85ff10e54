#!/usr/bin/env python3
"""The server's own time per operation of redlatch's group-commit and acquire scripts,
read from INFO commandstats (Redis times each EVALSHA itself, so the client's speed and
the network do not enter), for two trees' lua/ side by side in interleaved rounds: an
A/B of a script change that no workload on a shared VM can resolve (BENCHMARKS.md,
"Optimisation log"). Standard library only.

Usage: scripts/script_cost.py [--server redis-server] [--rounds 5] [--calls 400]
                              [--callgrind [--whole | --parsing]] A_ROOT B_ROOT CASE...
CASE: batch:N       batch.lua, N fresh names acquired in one call, released in the next
      node:N        batch_node.lua in the sharded dialect (a Redis >= 7 cluster node's
                    script; run here on a standalone Redis 7, where the same commands run)
      acquire       acquire.lua on a fresh name, then release.lua (W1's pair)
      busy          acquire.lua on a fresh name, then a second holder's acquire.lua
                    refused there (its waiter's ticket registered): a contended
                    lock()'s first two calls
      rslock        the rslock protocol's pair: SET NX PX, then its compare-and-delete
                    script (lua/bench_rslock_release.lua); --callgrind --whole only
      empty         two EVALSHA of a script that returns 1: what any script call costs
Every acquire is sent as the tree's library sends a lock()'s first attempt: with a new
waiter's ticket, marked new when the tree knows that mark ("A" in batches, ARGV[4] = "1"
for acquire.lua).
Prints one JSON line per case, side and round, then a summary per case: the median
(min-max) of usec per operation for A and B and of B/A.

--callgrind: instead, each case and side runs on a server of its own under valgrind's
callgrind, counting only the instructions inside EVALSHA (`--toggle-collect` of the
server's evalShaCommand): the same commands give the same count on any machine under any
load, so one round decides what the timings above cannot (needs valgrind).
--whole (with --callgrind): count every command's execution (`processCommand`: a plain
command's as well as EVALSHA's, not the network or the parsing of requests), so that a
script's pair can be set beside a plain command's (`rslock`). Counters are zeroed once the
scripts are loaded.
--parsing (with --callgrind; implies --whole): count from the reading of each request
(`readQueryFromClient`): the parsing of every argument into an object as well, which
`--whole` leaves out and which grows with a call's argument count (not the kernel's
share of the socket reads).
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# The test kit's raw-RESP client (standard library), pipelined here.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "redlatch-testkit", "peers"))
from redlock_peer import Conn as _Conn  # noqa: E402


class Conn(_Conn):
    def send(self, *cmds):
        """Sends every command at once, then reads their replies in order."""
        out = []
        for args in cmds:
            out.append(b"*%d\r\n" % len(args))
            for a in args:
                a = a if isinstance(a, bytes) else str(a).encode()
                out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        return [self.reply() for _ in cmds]


def read(root, *files):
    return "".join(open(os.path.join(root, "lua", f)).read() for f in files)


def knows_first(root):
    """Whether the tree's batch scripts take "A": an acquire whose ticket is new."""
    return '"A" (an acquire whose ticket' in read(root, "batch.lua")


def knows_compact(root):
    """Whether the tree's batch scripts take the operations' codes in one string and
    their shared lease once (ARGV[1], ARGV[2])."""
    return "ARGV[1] = the operations' codes" in read(root, "batch.lua")


def scripts(root):
    classic = read(root, "dialect_classic.lua")
    sharded = read(root, "cross_slot_write_flags.lua", "dialect_sharded.lua")
    return {
        "first": knows_first(root),
        "compact": knows_compact(root),
        "batch": classic + read(root, "pass_on.lua", "acquire_op.lua", "batch.lua"),
        "node": sharded + read(root, "pass_on.lua", "acquire_op.lua", "batch_node.lua"),
        "acquire": classic + read(root, "acquire.lua"),
        "release": classic + read(root, "pass_on.lua", "release.lua"),
        "rslock": read(root, "bench_rslock_release.lua"),
        "empty": "return 1",
    }


def evalsha_usec(conn):
    info = conn.send(["INFO", "commandstats"])[0]
    for line in info.splitlines():
        if line.startswith("cmdstat_evalsha:"):
            fields = dict(kv.split("=") for kv in line.split(":", 1)[1].split(","))
            return int(fields["usec"]), int(fields["calls"])
    return 0, 0


def answer(reply):
    """acquire.lua's answer as [status, value]: one string "<status> <value>" since
    2026-11-27, an array of the two before."""
    if isinstance(reply, (bytes, str)):
        return [int(x) for x in reply.split()]
    return reply


def run_case(conn, shas, case, calls):
    """Sends `calls` script calls of `case`; returns (usec, script calls, operations)
    of the acquire and release calls counted by the server."""
    tag = uuid.uuid4().hex[:8]
    before = evalsha_usec(conn)
    ops = 0
    lease, holder = "30000", f"{uuid.uuid4()}:1"
    if case in ("rslock", "empty"):
        for c in range(calls // 2):
            name = f"sc:{tag}:{c}"
            if case == "empty":
                got = conn.send(["EVALSHA", shas["empty"], 0], ["EVALSHA", shas["empty"], 0])
                ok = got == [1, 1]
            else:
                value = str(uuid.uuid4())
                got = conn.send(["SET", name, value, "NX", "PX", lease],
                                ["EVALSHA", shas["rslock"], 1, name, value])
                ok = got[1] == 1
            if not ok:
                raise RuntimeError(f"{case}: unexpected answers {got}")
            ops += 2
    elif case.startswith(("batch:", "node:")):
        kind, n = case.split(":")
        n = int(n)
        for c in range(calls // 2):
            names = [f"sc:{tag}:{c}:{i}" for i in range(n)]
            regs = [f"redlatch_lock_waiters:{{{x}}}" for x in names]
            chans = [f"redisson_lock__channel:{{{x}}}" for x in names]
            # As the library sends W2's operations: every acquire a lock() with a new
            # waiter's ticket (its first attempt), every release with its channel.
            tickets = [f"{holder}:{c * n + i}:{lease}" for i in range(n)]
            for op in ("A" if shas["first"] else "a", "r"):
                if shas["compact"]:
                    # The codes in one string, the shared lease once (2026-11-27 on).
                    keys, argv = [], [op * n, lease]
                    for x, r, ch, t in zip(names, regs, chans, tickets):
                        extra = ch if op == "r" else t
                        if kind == "batch":
                            keys += [x, r]
                            argv += [holder, extra]
                        else:
                            argv += [holder, x, r, extra]
                    script, first = (shas["batch"], keys) if kind == "batch" else (shas["node"], names[:1])
                    cmd = ["EVALSHA", script, len(first)] + first + argv
                elif kind == "batch":
                    keys, argv = [], []
                    for x, r, ch, t in zip(names, regs, chans, tickets):
                        keys += [x, r]
                        argv += [op, lease, holder, ch if op == "r" else "",
                                 "" if op == "r" else t]
                    cmd = ["EVALSHA", shas["batch"], len(keys)] + keys + argv
                else:
                    argv = []
                    for x, r, ch, t in zip(names, regs, chans, tickets):
                        argv += [op, lease, holder, x, r, ch if op == "r" else t]
                    cmd = ["EVALSHA", shas["node"], 1, names[0]] + argv
                reply = conn.send(cmd)[0]
                reply = answer(reply)  # batch.lua answers one string of integers too
                want = 1
                if any(reply[j] != want for j in range(0, len(reply), 2)):
                    raise RuntimeError(f"{case}: unexpected answers {reply[:8]}")
            ops += 2 * n
    elif case == "busy":
        other = f"{uuid.uuid4()}:1"
        for c in range(calls // 2):
            name = f"sc:{tag}:{c}"
            reg = f"redlatch_lock_waiters:{{{name}}}"
            mark = ["1"] if shas["first"] else []
            got, refused = conn.send(
                ["EVALSHA", shas["acquire"], 2, name, reg, lease, holder,
                 f"{holder}:{c}:{lease}"] + mark,
                ["EVALSHA", shas["acquire"], 2, name, reg, lease, other,
                 f"{other}:{c}:{lease}"] + mark,
            )
            got, refused = answer(got), answer(refused)
            if got[0] != 1 or refused[0] != 0:
                raise RuntimeError(f"{case}: unexpected answers {got} {refused}")
            ops += 2
    else:
        first = shas["first"]
        for c in range(calls // 2):
            name = f"sc:{tag}:{c}"
            reg = f"redlatch_lock_waiters:{{{name}}}"
            ticket = f"{holder}:{c}:{lease}"
            argv = [lease, holder, ticket] + (["1"] if first else [])
            got, rel = conn.send(
                ["EVALSHA", shas["acquire"], 2, name, reg] + argv,
                ["EVALSHA", shas["release"], 2, name, reg,
                 f"redisson_lock__channel:{{{name}}}", "0", lease, holder],
            )
            got = answer(got)
            if got[0] != 1 or rel != 1:
                raise RuntimeError(f"{case}: unexpected answers {got} {rel}")
            ops += 2
    after = evalsha_usec(conn)
    return after[0] - before[0], after[1] - before[1], ops


def start(server_cmd, port, d, callgrind_out=None, toggle="evalShaCommand"):
    cmd = list(server_cmd)
    if callgrind_out:
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={callgrind_out}",
               f"--toggle-collect={toggle}"] + cmd
    elif shutil.which("taskset"):
        cmd = ["taskset", "-c", "0"] + cmd
    cmd += ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", d]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            conn = Conn(port)
            conn.send(["PING"])
            return server, conn
        except OSError:
            time.sleep(0.05)
    server.kill()
    sys.exit("script_cost.py: the server did not start")


def load(conn, root):
    texts = scripts(root)
    shas = {"first": texts.pop("first"), "compact": texts.pop("compact")}
    shas.update({k: conn.send(["SCRIPT", "LOAD", v])[0] for k, v in texts.items()})
    return shas


def callgrind(args):
    """One server per case and side under callgrind: instructions per operation."""
    per = {}
    d = tempfile.mkdtemp()
    try:
        for case in args.cases:
            for side, root in (("A", args.a), ("B", args.b)):
                out = os.path.join(d, f"cg-{side}.out")
                toggle = ("readQueryFromClient" if args.parsing
                          else "processCommand" if args.whole else "evalShaCommand")
                server, conn = start([args.server], free_port(), d, out, toggle)
                try:
                    shas = load(conn, root)
                    # What loading the scripts cost is not the case's.
                    subprocess.run(["callgrind_control", "--zero", str(server.pid)],
                                   stdout=subprocess.DEVNULL, check=True)
                    _, n, ops = run_case(conn, shas, case, args.calls)
                finally:
                    server.terminate()
                    server.wait()
                total = 0
                for line in open(out):
                    if line.startswith(("summary:", "totals:")):
                        total = int(line.split()[1])
                per[(case, side)] = total / ops
                print(json.dumps({"case": case, "side": side, "instructions_per_op": total / ops,
                                  "script_calls": n, "ops": ops}))
            a, b = per[(case, "A")], per[(case, "B")]
            print(json.dumps({"summary": case, "A": a, "B": b, "B_over_A": b / a}))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def median(xs):
    xs = sorted(xs)
    return xs[(len(xs) - 1) // 2]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--server", default="redis-server")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=400)
    p.add_argument("--callgrind", action="store_true")
    p.add_argument("--whole", action="store_true")
    p.add_argument("--parsing", action="store_true")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("cases", nargs="+")
    args = p.parse_args()
    if "rslock" in args.cases and not args.whole:
        sys.exit("script_cost.py: the rslock case needs --callgrind --whole (SET is no script)")
    args.whole = args.whole or args.parsing
    if args.whole and not args.callgrind:
        sys.exit("script_cost.py: --whole counts instructions: it needs --callgrind")
    if args.callgrind:
        return callgrind(args)
    d = tempfile.mkdtemp()
    server, conn = start([args.server], free_port(), d)
    try:
        shas = {side: load(conn, root) for side, root in (("A", args.a), ("B", args.b))}
        per = {}
        for rnd in range(1, args.rounds + 1):
            for case in args.cases:
                order = ("A", "B") if rnd % 2 else ("B", "A")
                for side in order:
                    usec, n, ops = run_case(conn, shas[side], case, args.calls)
                    v = usec / ops
                    per.setdefault((case, side), []).append(v)
                    print(json.dumps({"case": case, "side": side, "round": rnd,
                                      "usec_per_op": v, "script_calls": n, "ops": ops}))
                conn.send(["FLUSHALL"])
        for case in args.cases:
            a, b = per[(case, "A")], per[(case, "B")]
            ratios = [y / x for x, y in zip(a, b)]
            print(json.dumps({"summary": case, "A": median(a), "A_min": min(a),
                              "A_max": max(a), "B": median(b), "B_min": min(b),
                              "B_max": max(b), "B_over_A": median(ratios),
                              "B_over_A_min": min(ratios), "B_over_A_max": max(ratios)}))
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
