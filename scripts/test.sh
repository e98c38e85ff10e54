#!/usr/bin/env bash
# The whole test suite: installs redis-server if missing, then runs unit, integration
# (each test starts its own redis-server processes on free loopback ports) and doc tests.
# Extra arguments go to the test runner, e.g. `scripts/test.sh redlock`.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ensure-redis.sh
cargo build --all-targets --quiet
cargo test --doc --quiet
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --no-fail-fast --hide-progress-bar "$@"
else
    cargo test --no-fail-fast "$@"
fi
