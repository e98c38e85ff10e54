#!/usr/bin/env bash
# The whole test suite: installs redis-server if missing, then runs unit, integration
# (each test starts its own redis-server processes on free loopback ports) and doc tests.
# Extra arguments go to the test runner, e.g. `scripts/test.sh redlock`.
# With the cargo feature `tls`, so the rediss:// tests (tests/tls.rs) run too.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ensure-redis.sh
cargo build --all-targets --features tls --quiet
cargo test --doc --features tls --quiet
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --features tls --no-fail-fast --hide-progress-bar "$@"
else
    cargo test --features tls --no-fail-fast "$@"
fi
