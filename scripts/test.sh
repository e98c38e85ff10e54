#!/usr/bin/env bash
# The whole test suite: installs redis-server if missing, then runs unit, integration
# (each test starts its own redis-server processes on free loopback ports) and doc tests
# of the whole workspace: the library, the CLI (redlatch-cli/) and the bench harness.
# Extra arguments go to the test runner, e.g. `scripts/test.sh redlock`.
# With the cargo features `tls`, `metrics` and `serde`, so their tests run too.
# The Redisson JVM interop (tests/redisson/redisson_jvm*.rs, the real Java client from Maven Central)
# runs when `java` and `mvn` are on the PATH and is skipped, said plainly, when not;
# REDLATCH_REQUIRE_JAVA=1 (set by .ci/run) makes their absence an error. The fencing
# tests need PostgreSQL (scripts/ensure-postgres.sh installs it) and say
# SKIPPED without them, unless REDLATCH_REQUIRE_POSTGRES=1 (set by .ci/run); the S3
# fence's tests need moto's server (scripts/ensure-moto.sh installs it from PyPI), the
# same way with REDLATCH_REQUIRE_MOTO=1.
# Under cargo-nextest when it is installed (its own summary line ends the output). Else,
# without arguments, the test binaries side by side (scripts/run-tests.py: they wait more
# than they compute), each logged to target/test-logs/; with arguments, `cargo test ARGS`.
# Either way the result lines (one per test binary) are summed up in one line at the end,
# "redlatch: N passed, N failed, N skipped", after the failed tests. nextest is not
# installed here: a fresh clone runs the
# suite with cargo alone (no download, no minutes spent building a test runner).
# scripts/flakes.sh repeats the suite to find flaky tests.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ensure-redis.sh
. scripts/ensure-postgres.sh
. scripts/ensure-moto.sh
if command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; then
    echo "Redisson JVM interop: ON (java and mvn found; Redisson from Maven Central)"
    if [ "$#" -eq 0 ]; then
        rm -rf target/interop-matrix  # this run's results only
    fi
elif [ "${REDLATCH_REQUIRE_JAVA:-}" = 1 ]; then
    echo "Redisson JVM interop: REQUIRED (REDLATCH_REQUIRE_JAVA=1) but java or mvn is missing" >&2
    exit 1
else
    echo "Redisson JVM interop: SKIPPED (no java or mvn on the PATH; tests/redisson/redisson_jvm*.rs return at once)"
fi
# The simple lock's real peers (tests/standalone/simple_peers.rs), installed from their
# registries into target/peers/ on first use: REDLATCH_REQUIRE_PEERS=1 (.ci/run) makes a
# missing toolchain an error.
for tool in python3 go node npm; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        if [ "${REDLATCH_REQUIRE_PEERS:-}" = 1 ]; then
            echo "simple-lock peers: REQUIRED (REDLATCH_REQUIRE_PEERS=1) but $tool is missing" >&2
            exit 1
        fi
        echo "simple-lock peers: $tool missing, its peer's test is SKIPPED"
    fi
done
. scripts/features.sh
cargo build --workspace --all-targets --features "$features" --quiet

matrix() {
    if [ -d target/interop-matrix ] && command -v python3 >/dev/null 2>&1; then
        echo "Redisson compatibility matrix of this run (scripts/interop_matrix.py):"
        python3 scripts/interop_matrix.py || true
    fi
}

if cargo nextest --version >/dev/null 2>&1; then
    # nextest runs no doc tests.
    cargo test --workspace --doc --features "$features" --quiet
    status=0
    cargo nextest run --workspace --features "$features" --no-fail-fast --hide-progress-bar "$@" || status=$?
    matrix
    exit "$status"
fi
if [ "$#" -eq 0 ] && command -v python3 >/dev/null 2>&1; then
    # The whole suite: every test binary built once (the JSON lists them), then run side
    # by side by scripts/run-tests.py, each with a log of its own in target/test-logs/,
    # the doc tests as one more job; its last line is the summary below.
    target="${CARGO_TARGET_DIR:-target}"
    artifacts="$target/test-artifacts.json"
    status=0
    cargo test --workspace --features "$features" --no-run --quiet \
        --message-format=json-render-diagnostics >"$artifacts" || status=$?
    if [ "$status" -ne 0 ]; then
        echo "redlatch: cargo test failed before running tests (exit $status)"
        exit "$status"
    fi
    # .ci/run starts its background builds once the test binaries are built.
    if [ -n "${REDLATCH_TEST_BUILT:-}" ]; then touch "$REDLATCH_TEST_BUILT"; fi
    REDLATCH_TEST_FEATURES="$features" REDLATCH_TEST_LOGS="$target/test-logs" \
        python3 scripts/run-tests.py "$artifacts" || status=$?
    matrix
    exit "$status"
fi
# A part of the suite (arguments for cargo test): one binary after the other.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
# Doc tests included (cargo test runs them after each package's other tests).
cargo test --workspace --features "$features" --no-fail-fast "$@" 2>&1 | tee "$log" || status=$?
matrix
sed -nE 's/^test (.*) \.\.\. FAILED$/redlatch: FAILED \1/p' "$log"
# On a failure, each panic's place and message, repeated here: a failed run's
# backtraces can push them out of a CI log's excerpt.
if [ "$status" -ne 0 ]; then
    awk '/^thread .* panicked at / { print "redlatch: " $0; getline; print "redlatch:   " $0 }' "$log" | head -40
fi
if [ "$status" -ne 0 ] && ! grep -q '^test result: ' "$log"; then
    echo "redlatch: cargo test failed before running tests (exit $status)"
fi
# "test result: ok. 31 passed; 0 failed; 2 ignored; 0 measured; ..." per test binary,
# summed into the last line: "redlatch: N passed, N failed, N skipped".
awk '/^test result: / { p += $4; f += $6; i += $8; n++ }
     END { printf "(%d test binaries, cargo test)\nredlatch: %d passed, %d failed, %d skipped\n", n, p, f, i }' "$log"
exit "$status"
