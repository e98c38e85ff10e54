#!/usr/bin/env bash
# The whole test suite: installs redis-server if missing, then runs unit, integration
# (each test starts its own redis-server processes on free loopback ports) and doc tests
# of the whole workspace: the library and the CLI (redlatch-cli/).
# Extra arguments go to the test runner, e.g. `scripts/test.sh redlock`.
# With the cargo features `tls` and `metrics`, so tests/tls.rs and tests/metrics.rs run too.
# Under cargo-nextest when it is installed (its own summary line ends the output), else
# `cargo test`, whose result lines (one per test binary) are summed up in one line at
# the end, with the failed tests. nextest is not installed here: a fresh clone runs the
# suite with cargo alone (no download, no minutes spent building a test runner).
# scripts/flakes.sh repeats the suite to find flaky tests.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ensure-redis.sh
features="redlatch/tls,redlatch/metrics,redlatch-cli/tls"
cargo build --workspace --all-targets --features "$features" --quiet
if cargo nextest --version >/dev/null 2>&1; then
    # nextest runs no doc tests.
    cargo test --workspace --doc --features "$features" --quiet
    exec cargo nextest run --workspace --features "$features" --no-fail-fast --hide-progress-bar "$@"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
# Doc tests included (cargo test runs them after each package's other tests).
cargo test --workspace --features "$features" --no-fail-fast "$@" 2>&1 | tee "$log" || status=$?
# "test result: ok. 31 passed; 0 failed; 2 ignored; 0 measured; ..." per test binary.
awk '/^test result: / { p += $4; f += $6; i += $8; n++ }
     END { printf "\nredlatch: %d passed, %d failed, %d ignored in %d test binaries (cargo test)\n", p, f, i, n }' "$log"
sed -nE 's/^test (.*) \.\.\. FAILED$/redlatch: FAILED \1/p' "$log"
if [ "$status" -ne 0 ] && ! grep -q '^test result: ' "$log"; then
    echo "redlatch: cargo test failed before running tests (exit $status)"
fi
exit "$status"
