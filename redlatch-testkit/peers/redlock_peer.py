#!/usr/bin/env python3
"""A Redlock reference client's lock on the wire, for interop tests (the library's
simple_lock modules, through redlatch_testkit::peer). redis-py is not installed on the test
machines, so this speaks RESP over raw sockets, doing exactly what redis-py's Lock and
Go's redsync send:

- acquire:  SET name <random token> NX PX lease   (on each master; a majority wins)
- release:  EVAL of the compare-and-delete script   (redsync's deleteScript)
- extend:   EVAL of the compare-and-pexpire script  (redsync's touchScript)

Retries after a fixed delay, as those clients do (no pub/sub on this wire).

Usage: redlock_peer.py PORT[,PORT...] NAME LEASE_MS WAIT_MS
Prints "held TOKEN" once it holds NAME on a majority (or "timeout" and exits 1), then
reads commands from stdin, one per line: "release" (prints "released N", N = the
masters whose key it deleted, and exits), "extend MS" (prints "extended N").
Standard library only; every socket has a timeout; exits when stdin closes.
"""
import os
import socket
import sys
import time

RELEASE = """
local val = redis.call("GET", KEYS[1])
if val == ARGV[1] then
    return redis.call("DEL", KEYS[1])
elseif val == false then
    return -1
else
    return 0
end
"""

EXTEND = """
if redis.call("GET", KEYS[1]) == ARGV[1] then
    return redis.call("PEXPIRE", KEYS[1], ARGV[2])
else
    return 0
end
"""


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buf = b""

    def call(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return self.reply()

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self):
        line = self.line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise ConnectionError("connection closed")
                self.buf += chunk
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data.decode()
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RuntimeError("unexpected reply %r" % line)


def on_all(conns, f):
    out = []
    for c in conns:
        try:
            out.append(f(c))
        except (OSError, ConnectionError, RuntimeError):
            out.append(None)
    return out


def main():
    ports, name, lease_ms, wait_ms = sys.argv[1:5]
    conns = []
    for p in ports.split(","):
        try:
            conns.append(Conn(int(p)))
        except OSError:
            conns.append(None)
    live = [c for c in conns if c is not None]
    quorum = len(conns) // 2 + 1
    token = os.urandom(16).hex()
    deadline = time.monotonic() + int(wait_ms) / 1000.0
    while True:
        got = on_all(live, lambda c: c.call("SET", name, token, "NX", "PX", lease_ms))
        if sum(1 for r in got if r == "OK") >= quorum:
            break
        on_all(live, lambda c: c.call("EVAL", RELEASE, 1, name, token))
        if time.monotonic() >= deadline:
            print("timeout", flush=True)
            return 1
        time.sleep(0.05)
    print("held " + token, flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["release"]:
            got = on_all(live, lambda c: c.call("EVAL", RELEASE, 1, name, token))
            print("released %d" % sum(1 for r in got if r == 1), flush=True)
            return 0
        if words[:1] == ["extend"]:
            ms = words[1]
            got = on_all(live, lambda c: c.call("EVAL", EXTEND, 1, name, token, ms))
            print("extended %d" % sum(1 for r in got if r == 1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
