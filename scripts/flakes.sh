#!/usr/bin/env bash
# Repeats the test suite (or a filtered part of it) N times and counts failures per test:
# a flake shows up as "name  k/N" with 0 < k < N.
#
# Usage: scripts/flakes.sh N [ARGS...]
#   ARGS go to the test runner as in scripts/test.sh: a name filter, a test binary
#   (`--test topologies`: tests/topologies/main.rs), or both, e.g.
#   scripts/flakes.sh 20 --test topologies redlock_faults::an_unlock_outlasts
# Runs with the features of scripts/test.sh, under cargo-nextest when it is installed;
# else the whole suite (no ARGS) runs as scripts/test.sh runs it, every binary at once,
# and a part of it under plain `cargo test --no-fail-fast` (doc tests are part of every
# run either way).
# Every run is bounded by FLAKES_RUN_TIMEOUT seconds (default 1800): a run that hangs
# is killed and counted as "<run timed out>" (plus the tests cargo reported as still
# running). The runs' output is kept in FLAKES_LOG_DIR (default target/flakes/).
# Prints a table "test  failures/N" at the end; exits 1 if any run failed.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: scripts/flakes.sh N [test runner args...]" >&2; exit 2; }
[[ $# -ge 1 && $1 =~ ^[1-9][0-9]*$ ]] || usage
runs=$1
shift

. scripts/ensure-redis.sh
. scripts/features.sh
run_timeout="${FLAKES_RUN_TIMEOUT:-1800}"
logs="${FLAKES_LOG_DIR:-${CARGO_TARGET_DIR:-target}/flakes}"
mkdir -p "$logs"
rm -f "$logs"/run-*.log "$logs"/run-*.failed

if cargo nextest --version >/dev/null 2>&1; then
    runner=nextest
    cmd=(cargo nextest run --workspace --features "$features" --no-fail-fast
        --hide-progress-bar --retries 0 "$@")
elif [[ $# -eq 0 ]]; then
    # The whole suite as CI runs it: every binary at once (scripts/run-tests.py), whose
    # output reads as cargo test's.
    runner="scripts/test.sh"
    cmd=(bash scripts/test.sh)
else
    runner="cargo test"
    cmd=(cargo test --workspace --features "$features" --no-fail-fast "$@")
fi

# Build once, outside the timed runs.
cargo build --workspace --all-targets --features "$features" --quiet

# failed_tests LOG: one line per failed test of a run, "binary::test" (cargo test) or
# nextest's "crate::binary test"; a test binary that died without naming a test counts
# as "binary (crashed)"; a run killed by the timeout adds the tests still running.
failed_tests() {
    if [[ $runner == nextest ]]; then
        # "        FAIL [   0.512s] redlatch::redlock_faults an_unlock_..." (also SIGSEGV,
        # SIGABRT, SIGKILL, TIMEOUT, LEAK-FAIL, ABORT); the summary repeats them.
        sed -nE 's/^ *(FAIL|TIMEOUT|SIGSEGV|SIGABRT|SIGKILL|SIGBUS|ABORT|LEAK-FAIL) +\[ *[0-9.]+s\] +(\([^)]*\) +)?//p' "$1" |
            sed -E 's/ +$//' | sort -u
    else
        awk '
            # "     Running tests/topologies/main.rs (target/debug/deps/...)": the binary
            # (topologies), its tests named by module (redlock_faults::an_unlock_...);
            # "     Running tests/metrics.rs (...)": a binary of one file (metrics);
            # "     Running unittests src/lib.rs (target/debug/deps/redlatch-...)"
            /^ +Running / {
                bin = $0
                sub(/^ +Running +(unittests +)?/, "", bin)
                sub(/ +\(.*$/, "", bin)
                sub(/\/main\.rs$/, "", bin)
                sub(/^.*\//, "", bin); sub(/\.rs$/, "", bin)
                if ($0 ~ /redlatch-cli\//) bin = "redlatch-cli/" bin
                named[bin] = 0
                next
            }
            /^ +Doc-tests / { bin = "doc:" $2; next }
            /^test .* \.\.\. FAILED$/ {
                t = $0; sub(/^test /, "", t); sub(/ \.\.\. FAILED$/, "", t)
                print bin "::" t; named[bin] = 1; next
            }
            /^test .* has been running for over/ {
                t = $0; sub(/^test /, "", t); sub(/ has been running.*$/, "", t)
                running[bin "::" t] = 1; next
            }
            /^test .* \.\.\. (ok|ignored)$/ {
                t = $0; sub(/^test /, "", t); sub(/ \.\.\. (ok|ignored)$/, "", t)
                delete running[bin "::" t]; next
            }
            # A binary that exited without a result line (abort, signal); the runner of
            # scripts/test.sh says "redlatch: BROKEN <binary> exited ...".
            /^error: test failed, to rerun pass/ && !named[bin] { print bin " (crashed)" }
            /^redlatch: BROKEN / { b = $3; print b " (crashed)" }
            /^<run timed out>$/ {
                print "<run timed out>"
                for (t in running) print t " (still running)"
            }
        ' "$1" | sort -u
    fi
}

echo "flakes: $runs run(s) of: ${cmd[*]}" >&2
failed_runs=0
for ((i = 1; i <= runs; i++)); do
    log="$logs/run-$i.log"
    start=$SECONDS
    status=0
    # --kill-after: a runner that ignores SIGTERM is killed; timeout signals the whole
    # process group (the test binaries and the redis-servers they started).
    timeout --kill-after=30 "$run_timeout" "${cmd[@]}" >"$log" 2>&1 || status=$?
    if [[ $status -eq 124 || $status -eq 137 ]]; then
        echo "<run timed out>" >>"$log"
    fi
    failed_tests "$log" >"$logs/run-$i.failed"
    if [[ $status -ne 0 && ! -s $logs/run-$i.failed ]]; then
        # Failed, but not in a test (a build or harness error): count the run.
        echo "<run failed: exit $status, see $log>" >"$logs/run-$i.failed"
    fi
    n=$(wc -l <"$logs/run-$i.failed")
    [[ $n -eq 0 ]] || failed_runs=$((failed_runs + 1))
    echo "flakes: run $i/$runs: exit $status, $n failed, $((SECONDS - start)) s" \
        "$(paste -sd' ' "$logs/run-$i.failed")" >&2
done

echo
if [[ $failed_runs -eq 0 ]]; then
    echo "no failures in $runs run(s) ($runner; logs in $logs)"
    exit 0
fi
printf '%-80s %s\n' "test" "failures/$runs"
cat "$logs"/run-*.failed | sort | uniq -c | sort -k1,1nr -k2 |
    while read -r count name; do printf '%-80s %s\n' "$name" "$count/$runs"; done
echo "$failed_runs of $runs run(s) failed ($runner; logs in $logs)"
exit 1
