#!/usr/bin/env bash
# The whole test suite: installs redis-server if missing, then runs unit, integration
# (each test starts its own redis-server processes on free loopback ports) and doc tests
# of the whole workspace: the library and the CLI (redlatch-cli/).
# Extra arguments go to the test runner, e.g. `scripts/test.sh redlock`.
# With the cargo features `tls` and `metrics`, so tests/tls.rs and tests/metrics.rs run too.
# The Redisson JVM interop (tests/redisson_jvm*.rs, the real Java client from Maven Central)
# runs when `java` and `mvn` are on the PATH and is skipped, said plainly, when not;
# REDLATCH_REQUIRE_JAVA=1 (set by .ci/run) makes their absence an error.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ensure-redis.sh
if command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; then
    echo "Redisson JVM interop: ON (java and mvn found; Redisson from Maven Central)"
    if [ "$#" -eq 0 ]; then
        rm -rf target/interop-matrix  # this run's results only
    fi
elif [ "${REDLATCH_REQUIRE_JAVA:-}" = 1 ]; then
    echo "Redisson JVM interop: REQUIRED (REDLATCH_REQUIRE_JAVA=1) but java or mvn is missing" >&2
    exit 1
else
    echo "Redisson JVM interop: SKIPPED (no java or mvn on the PATH; tests/redisson_jvm*.rs return at once)"
fi
features="redlatch/tls,redlatch/metrics,redlatch/serde,redlatch-cli/tls"
cargo build --workspace --all-targets --features "$features" --quiet
cargo test --workspace --doc --features "$features" --quiet
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --features "$features" --no-fail-fast --hide-progress-bar "$@"
else
    cargo test --workspace --features "$features" --no-fail-fast "$@"
fi
if [ -d target/interop-matrix ] && command -v python3 >/dev/null 2>&1; then
    echo "Redisson compatibility matrix of this run (scripts/interop_matrix.py):"
    python3 scripts/interop_matrix.py || true
fi
