#!/usr/bin/env python3
"""The tests' own Redis connections wait as long as the test's bound allows, never a
client library's default (issue 48): redis-rs's async connections give up on a reply
after 500 ms, which a loaded CI machine exceeds, and its blocking ones wait forever.

Fails on a test source (tests/, redlatch-cli/tests/, redlatch-bench/tests/, the test
kit) that opens a connection with redis-rs's defaults instead of the test kit's
`conn::sync_conn`, `conn::async_conn`, `conn::async_config`, `RedisServer::conn` or
`RedisServer::async_conn` (redlatch-testkit/src/conn.rs). A line that must use a
default on purpose says why in a comment ending in `test-conn: default`.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DIRS = ["tests", "redlatch-cli/tests", "redlatch-bench/tests", "redlatch-testkit/src"]
# The one file that builds connections from redis-rs's calls.
HOME = "redlatch-testkit/src/conn.rs"
# What opens a connection with a library default: the async calls without a config
# (500 ms per reply, 1 s to connect), a fresh config (the same defaults), the blocking
# connect without a timeout.
DEFAULTS = [
    (re.compile(r"\.get_multiplexed_async_connection\(\)"), "an async connection with redis-rs's 500 ms reply timeout"),
    (re.compile(r"\.get_multiplexed_tokio_connection\(\)"), "an async connection with redis-rs's 500 ms reply timeout"),
    (re.compile(r"\.get_connection_manager\(\)"), "a connection manager with redis-rs's default timeouts"),
    (re.compile(r"AsyncConnectionConfig::new\(\)"), "redis-rs's default timeouts (use common::conn::async_config())"),
    (re.compile(r"\.get_connection\(\)"), "a blocking connection without timeouts"),
]
EXEMPT = "test-conn: default"


def main() -> int:
    bad = []
    for d in DIRS:
        for path in sorted((ROOT / d).rglob("*.rs")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == HOME:
                continue
            for no, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("//", 1)[0]
                if EXEMPT in line:
                    continue
                for pattern, why in DEFAULTS:
                    if pattern.search(code):
                        bad.append(f"{rel}:{no}: {why}; use redlatch_testkit::conn (IO_TIMEOUT)")
    for b in bad:
        print(b)
    if bad:
        print(f"check-test-conns: {len(bad)} test-side connection(s) with a client library's default timeouts")
        return 1
    print("check-test-conns: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
