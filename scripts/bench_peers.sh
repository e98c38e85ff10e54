#!/usr/bin/env bash
# redlatch beside its peers (the rslock protocol, Redisson 4.7.0 in JVMs, W2's wire floor)
# in interleaved rounds on one throwaway master pinned to CPU 0, the bench and its JVMs
# pinned to CPU 1: `redlatch-bench --workload peers`, which prints a line per run and a
# summary per figure (medians, min-max over the rounds, ratios per round). JSON lines go
# to target/bench/peers-SERVER.jsonl (SERVER: the server binary's name and version).
# Redisson needs java and mvn on the PATH (the bench builds interop/redisson-bench).
# Usage: scripts/bench_peers.sh [rounds] [server-binary] [duration]
#        (defaults: 3, redis-server, 5s: how long each timed run lasts)
#        e.g. scripts/bench_peers.sh 3 /path/to/valkey-server
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ensure-redis.sh
rounds=${1:-3}
server=${2:-redis-server}
duration=${3:-5s}
cargo build --release --quiet -p redlatch-bench
bin="${CARGO_TARGET_DIR:-target}/release/redlatch-bench"
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
taskset -c 0 "$server" --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$dir" --daemonize no >/dev/null 2>&1 &
pid=$!
trap 'kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
version=$(redis-cli -p "$port" info server | tr -d '\r' | awk -F: '
    /^server_name:/ {name=$2} /^valkey_version:/ {v=$2} /^redis_version:/ {if (!v) v=$2}
    END {print (name ? name : "redis") "-" v}')
mkdir -p target/bench
out="target/bench/peers-$version.jsonl"
echo "peers on $version, $rounds rounds, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
timeout 3600 taskset -c 1 "$bin" --json --workload peers --rounds "$rounds" --duration "$duration" \
    --redis "redis://127.0.0.1:$port" | sed "s/^{/{\"server\":\"$version\",/" | tee -a "$out"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
