#!/usr/bin/env bash
# Runs redlatch's real-server test binaries against another Redis or Valkey build:
#
#   scripts/versions.sh BIN_DIR [TEST...] [-- TEST-HARNESS-ARGS...]
#
# BIN_DIR is a directory of ALREADY-BUILT server binaries holding at least
# `redis-server` and `redis-cli` (for Valkey, links so named to valkey-server and
# valkey-cli). It goes first on the PATH, so the test harness (redlatch-testkit/), which
# starts `redis-server` from the PATH on free loopback ports, starts those. This script
# downloads nothing and builds no server. Cargo runs `--offline`: the crates must be
# fetched already (any earlier `cargo build` did it).
#
# TEST...: test files, each a module of a test binary (tests/BINARY/NAME.rs,
# redlatch-cli/tests/cli/NAME.rs) or a binary of its own (tests/NAME.rs); default: the
# core list below (the harness, which checks that the server it starts is the one on
# the PATH; standalone, Redlock, Cluster, Sentinel, fencing, fair, read-write,
# semaphores, errors, ACL). `all`: every test file of the library and the CLI but
# `redisson_jvm*` (they need java and mvn, and Maven may fetch Redisson: name them).
# A module runs alone: its binary with `--exact` and the names of its tests.
# `tls` and `cli_tls` need a server built with TLS (BUILD_TLS=yes): on a build without
# it they are reported skipped, not run.
# Arguments after `--` go to each test binary (e.g. `-- --test-threads=1`).
# VERSIONS_TIMEOUT (seconds, default 900) bounds each binary's run; at the end, the
# binary and the servers it started (same process group) are killed.
#
# Output: the server's version line, then one line per test file, as its test harness
# counted (libtest's "test result" line), e.g.
#   exclusion: ok. 21 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out (2 skipped with a note)
# "skipped with a note": tests that passed by returning early after printing "skipped: ..."
# because their premise needs another server version (redlatch-testkit/src/lib.rs `older_than`);
# libtest counts them as passed. Each binary's full output (--show-output, so the notes
# of passed tests too) is kept in target/versions/<server>-<version>/NAME.log.
# Exit status: 0 if every binary that ran passed. docs/versions.md records the results.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
    echo "usage: scripts/versions.sh BIN_DIR [TEST...] [-- TEST-HARNESS-ARGS...]" >&2
    exit 2
}
[ "$#" -ge 1 ] || usage
bin_dir=$(cd "$1" 2>/dev/null && pwd) || usage
shift
for tool in redis-server redis-cli; do
    if [ ! -x "$bin_dir/$tool" ]; then
        echo "versions.sh: $bin_dir/$tool is missing (BIN_DIR must hold already-built binaries)" >&2
        exit 2
    fi
done

tests=()
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
    tests+=("$1")
    shift
done
[ "$#" -gt 0 ] && shift # the "--"
if [ "${#tests[@]}" -eq 0 ]; then
    tests=(harness exclusion handover wake_one scripts errors acl watchdog reentrancy fencing fair
        rwlock semaphores replicas redlock redlock_faults cluster cluster_batch
        batch_node_script batch_script_migrating cluster_faults sentinel tls)
fi
# The test binaries holding modules: the directories with a main.rs.
module_dirs=()
for main in tests/*/main.rs redlatch-cli/tests/*/main.rs; do
    module_dirs+=("$(dirname "$main")")
done
# binary_of TEST: the binary TEST is a module of, or TEST itself for a binary of its own.
binary_of() {
    local dir
    for dir in "${module_dirs[@]}"; do
        if [ "$1" != main ] && [ -f "$dir/$1.rs" ]; then
            basename "$dir"
            return
        fi
    done
    if [ -f "tests/$1.rs" ]; then
        echo "$1"
        return
    fi
    return 1
}
if [ "${tests[*]}" = all ]; then
    tests=()
    for f in tests/*.rs $(printf '%s/*.rs ' "${module_dirs[@]}"); do
        t=$(basename "$f" .rs)
        case "$t" in main | cli_util | redisson_jvm*) ;; *) tests+=("$t") ;; esac
    done
fi
for t in "${tests[@]}"; do
    if ! binary_of "$t" >/dev/null; then
        echo "versions.sh: no test file tests/*/$t.rs, redlatch-cli/tests/cli/$t.rs or tests/$t.rs" >&2
        exit 2
    fi
done

export PATH="$bin_dir:$PATH"
resolved=$(command -v redis-server)
if [ "$(dirname "$resolved")" != "$bin_dir" ]; then
    echo "versions.sh: redis-server resolves to $resolved, not into $bin_dir" >&2
    exit 2
fi
version_line=$(redis-server --version)
echo "server: $version_line ($bin_dir)"
# "Valkey server v=8.0.1 ..." -> valkey-8.0.1
tag=$(sed -nE 's/^([A-Za-z]+) server v=([0-9.]+).*/\1-\2/p' <<<"$version_line" | tr 'A-Z' 'a-z')
logs="target/versions/${tag:-unknown}"
mkdir -p "$logs"

# Whether this build serves TLS: started with a TLS port and no certificate, a build
# with TLS stops complaining about the missing tls-cert-file; one without stops with
# "Failed finding TLS support" (Redis >= 7, Valkey) or "Bad directive" (6.2).
has_tls() {
    local dir out
    dir=$(mktemp -d)
    out=$(timeout 10 redis-server --port 0 --tls-port 1 --dir "$dir" 2>&1 || true)
    rm -rf "$dir"
    grep -qi "tls-cert-file" <<<"$out"
}

. scripts/features.sh
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
run=()
for t in "${tests[@]}"; do
    if { [ "$t" = tls ] || [ "$t" = cli_tls ]; } && ! has_tls; then
        echo "$t: skipped (this server build has no TLS support)"
        continue
    fi
    run+=("$t")
done
[ "${#run[@]}" -gt 0 ] || exit 0
# Build every chosen binary first, so the time limit below bounds the tests alone.
binaries=$(for t in "${run[@]}"; do binary_of "$t"; done | sort -u)
if ! cargo test --offline --quiet --no-run --features "$features" \
    $(printf -- '--test %s ' $binaries) >"$logs/build.log" 2>&1; then
    echo "build failed (see $logs/build.log)"
    exit 1
fi

limit="${VERSIONS_TIMEOUT:-900}"
status=0
for t in "${run[@]}"; do
    log="$logs/$t.log"
    rc=0
    binary=$(binary_of "$t")
    only=()
    if [ "$binary" != "$t" ]; then
        # This module's tests alone ("redlock::..." but not "fair_redlock::...").
        only=(--exact $(cargo test --offline --quiet --features "$features" --test "$binary" \
            -- --list --format terse 2>/dev/null | sed -nE "s/^($t::.*): test$/\1/p"))
        if [ "${#only[@]}" -eq 1 ]; then
            echo "$t: no tests in this build (its features are off)"
            continue
        fi
    fi
    timeout -k 10 "$limit" cargo test --offline --features "$features" --test "$binary" \
        -- --show-output "${only[@]}" "$@" >"$log" 2>&1 || rc=$?
    skipped=$(grep -cE '^skipped: ' "$log" || true)
    summary=$(grep -E '^test result: ' "$log" | tail -1 | sed -E 's/^test result: //; s/; finished in.*//')
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        echo "$t: TIMED OUT after ${limit}s (see $log)"
        status=1
    elif [ -z "$summary" ]; then
        echo "$t: did not run (exit $rc; see $log)"
        status=1
    else
        echo "$t: $summary ($skipped skipped with a note)"
        [ "$rc" -eq 0 ] || status=1
    fi
    sed -nE 's/^test (.*) \.\.\. FAILED$/    FAILED \1/p' "$log"
done
exit "$status"
