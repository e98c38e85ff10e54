#!/usr/bin/env bash
# Reproducible benchmark: starts its own throwaway servers pinned to CPU 0, runs the
# client pinned to CPU 1, and rewrites BENCHMARKS.md from the medians of [rounds] rounds
# (raw JSON lines in target/bench/*.jsonl).
# - standalone part: masters (1, then 3 for Redlock); the ceiling, the floor and every
#   workload in each round.
# - cluster part: a Redis Cluster of 3 primaries + 3 replicas (`redis-cli --cluster
#   create`) beside one standalone master and one standalone master with a replica; W1,
#   W2 and W5 on the standalone master and on the cluster with the default
#   --sync-replicas auto and with --sync-replicas off, W1 also on the master with a
#   replica (auto and off: replication's own cost apart from the cluster's), interleaved
#   in each round, then `grouping` (per-node vs per-slot calls) on the cluster.
# Usage: scripts/bench.sh [rounds]            both parts (default 3 rounds: a median of
#                                             three ignores one outlier)
#        scripts/bench.sh --cluster [rounds]  the cluster part only; rewrites only the
#                                             cluster section of BENCHMARKS.md
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ensure-redis.sh
only_cluster=0
if [ "${1:-}" = "--cluster" ]; then
    only_cluster=1
    shift
fi
rounds="${1:-3}"
cargo build --release --quiet -p redlatch-bench
bin="${CARGO_TARGET_DIR:-target}/release/redlatch-bench"
out=target/bench
mkdir -p "$out"
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

# start_replica_of URL: starts a replica of that master pinned to CPU 0 and waits until
# its link is up.
start_replica_of() {
    local port master_port=${1##*:}
    port=$(free_port)
    taskset -c 0 redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
        --replicaof 127.0.0.1 "$master_port" --repl-diskless-sync-delay 0 \
        --dir "$dir" --logfile "$dir/$port.log" --daemonize no >/dev/null 2>&1 &
    pids+=($!)
    for _ in $(seq 1 300); do
        redis-cli -p "$port" info replication 2>/dev/null | grep -q '^master_link_status:up' && return
        sleep 0.1
    done
    echo "bench.sh: the replica of $1 did not sync within 30 s" >&2
    exit 1
}

# start_cluster: starts 6 cluster-mode nodes pinned to CPU 0 (each with its own free bus
# port, not port + 10000), joins them as 3 primaries + 3 replicas, waits until every node
# says cluster_state:ok and knows all six and every replica's link is up, and sets
# $cluster_seed to the first node's URL. Every wait is bounded.
start_cluster() {
    local ports=() port bus i info repl
    for i in 1 2 3 4 5 6; do
        port=$(free_port)
        bus=$(free_port)
        while [ "$bus" = "$port" ]; do bus=$(free_port); done
        taskset -c 0 redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
            --cluster-enabled yes --cluster-config-file "$dir/nodes-$port.conf" \
            --cluster-port "$bus" --cluster-node-timeout 5000 \
            --repl-diskless-sync-delay 0 \
            --dir "$dir" --logfile "$dir/$port.log" --daemonize no >/dev/null 2>&1 &
        pids+=($!)
        ports+=("$port")
    done
    for port in "${ports[@]}"; do
        for _ in $(seq 1 100); do
            redis-cli -p "$port" ping >/dev/null 2>&1 && break
            sleep 0.05
        done
    done
    local addrs=()
    for port in "${ports[@]}"; do addrs+=("127.0.0.1:$port"); done
    timeout 60 redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
        > "$dir/cluster-create.out" 2>&1 || { cat "$dir/cluster-create.out" >&2; exit 1; }
    local ok=0
    for _ in $(seq 1 600); do
        ok=1
        for port in "${ports[@]}"; do
            info=$(redis-cli -p "$port" cluster info 2>/dev/null || true)
            repl=$(redis-cli -p "$port" info replication 2>/dev/null || true)
            if ! grep -q '^cluster_state:ok' <<<"$info" \
                || ! grep -q '^cluster_known_nodes:6' <<<"$info" \
                || { grep -q '^role:slave' <<<"$repl" && ! grep -q '^master_link_status:up' <<<"$repl"; }; then
                ok=0
                break
            fi
        done
        [ "$ok" = 1 ] && break
        sleep 0.1
    done
    [ "$ok" = 1 ] || { echo "bench.sh: the cluster did not settle within 60 s" >&2; exit 1; }
    cluster_seed="redis://127.0.0.1:${ports[0]}"
}

run() { # run ARGS...: one bench invocation, pinned to CPU 1, bounded in time
    timeout 600 taskset -c 1 "$bin" --json "$@" | tee -a "$results"
}

if [ "$only_cluster" = 0 ]; then
    results="$out/results.jsonl"
    : > "$results"
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
        # W7: P separate processes (8, then 32) on one master; they all run on CPU 1.
        run --workload W7 --redis "$one"
    done
fi

# The cluster part: the standalone master and the cluster are measured in the same
# round, one after the other, so the machine's load changes the ratios little.
results="$out/cluster.jsonl"
: > "$results"
start_master
alone=$url
start_master
paired=$url
start_replica_of "$paired"
start_cluster
echo "cluster of 3 primaries + 3 replicas via $cluster_seed" >&2
for round in $(seq 1 "$rounds"); do
    echo "== cluster round $round of $rounds" >&2
    run --workload W1 --redis "$paired"
    run --workload W1 --redis "$paired" --sync-replicas off
    for w in W1 W2 W5; do
        run --workload "$w" --redis "$alone"
        run --workload "$w" --cluster --redis "$cluster_seed"
        run --workload "$w" --cluster --redis "$cluster_seed" --sync-replicas off
    done
    run --workload grouping --cluster --redis "$cluster_seed" --sync-replicas off
done

if [ "$only_cluster" = 0 ]; then
    python3 scripts/bench_report.py "$out/results.jsonl" "$out/cluster.jsonl" > BENCHMARKS.md
    echo "BENCHMARKS.md rewritten from $out/results.jsonl and $out/cluster.jsonl" >&2
else
    python3 scripts/bench_report.py --splice BENCHMARKS.md "$out/cluster.jsonl"
    echo "BENCHMARKS.md: cluster section rewritten from $out/cluster.jsonl" >&2
fi
