#!/usr/bin/env bash
# A/B of two redlatch-bench binaries (say, release builds of two commits): one
# throwaway master pinned to CPU 0, the client pinned to CPU 1, A and B alternating per
# workload and round (the order flips each round), so a machine's load weighs on both.
# Prints one JSON line per run, tagged "side" and "round"; compare the medians.
# Usage: scripts/bench_ab.sh BIN_A BIN_B [rounds] [workloads...]   (default 3; W1 W2 W3 W7)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ensure-redis.sh
a=$1 b=$2
rounds=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(W1 W2 W3 W7)
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
taskset -c 0 redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$dir" --daemonize no >/dev/null 2>&1 &
pid=$!
trap 'kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
for round in $(seq 1 "$rounds"); do
    for w in "${workloads[@]}"; do
        order="A B"; [ $((round % 2)) = 0 ] && order="B A"
        for side in $order; do
            bin=$a; [ "$side" = B ] && bin=$b
            timeout 600 taskset -c 1 "$bin" --json --workload "$w" --redis "redis://127.0.0.1:$port" \
                | sed "s/^{/{\"side\":\"$side\",\"round\":$round,/"
        done
    done
done
