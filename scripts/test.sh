#!/usr/bin/env bash
# The whole test suite: installs redis-server if missing, then runs unit, integration
# (each test starts its own redis-server processes on free loopback ports) and doc tests
# of the whole workspace: the library and the CLI (redlatch-cli/).
# Extra arguments go to the test runner, e.g. `scripts/test.sh redlock`.
# With the cargo features `tls` and `metrics`, so tests/tls.rs and tests/metrics.rs run too.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ensure-redis.sh
features="redlatch/tls,redlatch/metrics,redlatch/serde,redlatch-cli/tls"
cargo build --workspace --all-targets --features "$features" --quiet
cargo test --workspace --doc --features "$features" --quiet
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --features "$features" --no-fail-fast --hide-progress-bar "$@"
else
    cargo test --workspace --features "$features" --no-fail-fast "$@"
fi
