#!/usr/bin/env bash
# Reproducible benchmark: starts its own throwaway masters (1, then 3) pinned to CPU 0,
# runs the client pinned to CPU 1, runs the ceiling, the floor and every workload in
# each of [rounds] rounds, and
# rewrites BENCHMARKS.md from the medians (raw JSON lines in target/bench/results.jsonl).
# Usage: scripts/bench.sh [rounds]   (default 3: a median of three ignores one outlier)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ensure-redis.sh
rounds="${1:-3}"
cargo build --release --quiet -p redlatch-cli
bin="${CARGO_TARGET_DIR:-target}/release/redlatch"
out=target/bench
mkdir -p "$out"
: > "$out/results.jsonl"
dir=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start_master: starts a master pinned to CPU 0 and sets $url to it. (Not called in a
# command substitution: that subshell would keep the PID from the cleanup list.)
start_master() {
    local port
    port=$(free_port)
    taskset -c 0 redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
        --dir "$dir" --logfile "$dir/$port.log" --daemonize no >/dev/null 2>&1 &
    pids+=($!)
    for _ in $(seq 1 100); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && break
        sleep 0.05
    done
    url="redis://127.0.0.1:$port"
}

run() { # run ARGS...: one bench invocation, pinned to CPU 1, bounded in time
    timeout 600 taskset -c 1 "$bin" bench --json "$@" | tee -a "$out/results.jsonl"
}

start_master
one=$url
three=()
for _ in 1 2 3; do
    start_master
    three+=("$url")
done
redis3=()
for u in "${three[@]}"; do redis3+=(--redis "$u"); done

for round in $(seq 1 "$rounds"); do
    echo "== round $round of $rounds" >&2
    run --workload ceiling --redis "$one"
    run --workload floor --redis "$one"
    run --workload floor "${redis3[@]}"
    for w in W1 W2 W3 W4 W5 W6; do
        run --workload "$w" --redis "$one"
        run --workload "$w" "${redis3[@]}"
    done
done

python3 scripts/bench_report.py "$out/results.jsonl" > BENCHMARKS.md
echo "BENCHMARKS.md rewritten from $out/results.jsonl" >&2
