#!/usr/bin/env bash
# The fault campaign of issue 11, bounded (< 3 minutes): is mutual exclusion kept while
# masters crash, restart empty, stall, and holders are killed?
#
# Phase 1 (exclusion): MASTERS masters, WORKERS loops of `redlatch run` on one lock; the
# critical section appends "+ pid" and "- pid" to one file (O_APPEND: the file's order
# is the order of the writes). A nemesis, never faulting more than a minority at once:
#   kill -9 a master and restart it EMPTY after more than a lease (docs/deployments.md's rule),
#   SIGSTOP / SIGCONT a master for up to 3 s, kill -9 a holder (its CMD dies with it).
# The checker counts overlaps: an entry while another holder is inside.
#
# Phase 2 (fencing): `redlatch run --fenced`; the critical section writes its token to a
# store (one more redis-server, not faulted) that accepts a write only if its token is
# not older than the newest accepted. The nemesis stops a holder (redlatch and CMD) past
# its lease, someone else takes the lock and writes, then the stopped holder resumes and
# writes with its stale token: the store must reject it. Violations: one token handed to
# two holders (tokens that went backwards repeat values).
#
# Prints one line per phase and exits 1 on any violation.
# Usage: scripts/chaos.sh [phase-1 seconds (default 60)] [phase-2 seconds (default 30)]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ensure-redis.sh

SECONDS1="${1:-60}"
SECONDS2="${2:-30}"
MASTERS=5
WORKERS=8
LEASE=2s          # watchdog lease of every worker
RESTART_AFTER=3   # seconds a crashed master stays down (> lease): amnesia is safe then

# REDLATCH_BIN: a redlatch binary built already (.ci/run passes the test suite's, so
# CI builds the CLI once); else it is built here.
if [[ -n "${REDLATCH_BIN:-}" ]]; then
    bin=$REDLATCH_BIN
else
    cargo build --quiet -p redlatch-cli
    bin="${CARGO_TARGET_DIR:-target}/debug/redlatch"
fi
[[ "$bin" = /* ]] || bin="$PWD/$bin"
dir=$(mktemp -d)
pids=()
cleanup() {
    trap - EXIT INT TERM
    kill -CONT "${pids[@]}" 2>/dev/null || true
    kill -9 "${pids[@]}" 2>/dev/null || true
    pkill -9 -f "$dir/" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# alive PID: the process exists and is not a zombie (an orphan may not be reaped at
# once in a container, and kill -0 succeeds on a zombie).
alive() { [[ -r /proc/$1/stat ]] && [[ $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) != Z ]]; }

declare -A master_pid
start_master() { # start_master PORT: (re)starts an empty master on PORT
    local port=$1
    # Started outside this shell's job table (no "Killed" notices); stopped by PID.
    master_pid[$port]=$(sh -c 'redis-server "$@" >/dev/null 2>&1 & echo $!' sh \
        --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
        --dir "$dir" --logfile "$dir/redis-$port.log")
    pids+=("${master_pid[$port]}")
    for _ in $(seq 1 100); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    echo "chaos: master $port did not start" >&2
    exit 1
}

ports=()
for _ in $(seq 1 "$MASTERS"); do
    port=$(free_port)
    ports+=("$port")
    start_master "$port"
done
redis_args=()
for p in "${ports[@]}"; do redis_args+=(--redis "redis://127.0.0.1:$p"); done

faults=0
down=()   # masters currently crashed or stopped
pick_master() { # a master not already faulty, or nothing if a minority is faulty
    (( ${#down[@]} >= (MASTERS - 1) / 2 )) && return 1
    local p
    for _ in 1 2 3 4 5 6 7 8; do
        p=${ports[RANDOM % MASTERS]}
        [[ " ${down[*]-} " == *" $p "* ]] || { echo "$p"; return 0; }
    done
    return 1
}

# kill_holder LOG: kill -9 the redlatch of a running critical section; its CMD dies by
# the parent-death signal; an "x pid" line closes the section in the log.
kill_holder() {
    local log=$1 child parent
    child=$(pgrep -f "^sh $dir/critical" | head -1) || return 0
    [[ -n "$child" ]] || return 0
    parent=$(ps -o ppid= -p "$child" | tr -d ' ') || return 0
    [[ -n "$parent" ]] || return 0
    kill -9 "$parent" 2>/dev/null || return 0
    for _ in $(seq 1 100); do
        kill -0 "$child" 2>/dev/null || break
        sleep 0.01
    done
    kill -9 "$child" 2>/dev/null || true
    echo "x $child" >> "$log"
    faults=$((faults + 1))
}

nemesis() { # nemesis UNTIL LOG
    local until=$1 log=$2 action p
    local -A back_at=()
    while (( $(date +%s) < until )); do
        sleep "0.$((RANDOM % 8 + 2))"
        local now
        now=$(date +%s)
        for p in "${!back_at[@]}"; do # restart or resume what is due
            (( now >= back_at[$p] )) || continue
            if alive "${master_pid[$p]}"; then
                kill -CONT "${master_pid[$p]}"
            else
                start_master "$p"
            fi
            unset "back_at[$p]"
            down=("${!back_at[@]}")
        done
        action=$((RANDOM % 3))
        case $action in
            0) p=$(pick_master) || continue
               kill -9 "${master_pid[$p]}"
               for _ in $(seq 1 100); do alive "${master_pid[$p]}" || break; sleep 0.01; done
               back_at[$p]=$((now + RESTART_AFTER)); faults=$((faults + 1)) ;;
            1) p=$(pick_master) || continue
               kill -STOP "${master_pid[$p]}"
               back_at[$p]=$((now + 1 + RANDOM % 3)); faults=$((faults + 1)) ;;
            2) kill_holder "$log" ;;
        esac
        down=("${!back_at[@]}")
    done
    for p in "${!back_at[@]}"; do # leave every master up
        if alive "${master_pid[$p]}"; then kill -CONT "${master_pid[$p]}"; else start_master "$p"; fi
    done
}

# ---- phase 1: exclusion ---------------------------------------------------------------
log1="$dir/critical-1.log"
: > "$log1"
cat > "$dir/critical" <<'EOF'
echo "+ $$" >> "$1"; sleep 0.01; echo "- $$" >> "$1"
EOF
until1=$(( $(date +%s) + SECONDS1 ))
worker() { # worker UNTIL LOG NAME [extra run flags...]
    local until=$1 log=$2 name=$3
    shift 3
    while (( $(date +%s) < until )); do
        timeout 20 "$bin" run "$name" --watchdog "$LEASE" --wait 5s "${redis_args[@]}" "$@" \
            -- sh "$dir/critical" "$log" >/dev/null 2>>"$dir/workers.err" || true
    done
}
for _ in $(seq 1 "$WORKERS"); do
    worker "$until1" "$log1" chaos-lock &
    pids+=($!)
done
nemesis "$until1" "$log1"
wait_workers() { for p in $(jobs -p); do wait "$p" 2>/dev/null || true; done; }
wait_workers
faults1=$faults

# Checker: replay the log; "+" while someone else is inside is an overlap.
read -r acquisitions overlaps < <(awk '
    $1 == "+" { if (inside != "" && inside != $2) overlaps++; inside = $2; n++ }
    $1 == "-" || $1 == "x" { if (inside == $2) inside = "" }
    END { print n + 0, overlaps + 0 }' "$log1")
echo "chaos exclusion: masters=$MASTERS workers=$WORKERS seconds=$SECONDS1 acquisitions=$acquisitions faults=$faults1 overlaps=$overlaps"

# ---- phase 2: fencing -----------------------------------------------------------------
# Every master must be up: a fenced name's first acquisition needs all of them (docs/deployments.md,
# "Fencing under Redlock").
for p in "${ports[@]}"; do
    kill -CONT "${master_pid[$p]}" 2>/dev/null || true
    redis-cli -p "$p" ping >/dev/null 2>&1 || start_master "$p"
done
store=$(free_port)
start_master "$store"
log2="$dir/critical-2.log"
: > "$log2"
# The store's compare-and-set (lua/token_store.lua): accept TOKEN only if it is newer
# than every accepted one.
cat > "$dir/critical" <<EOF
sleep 0.05
r=\$(redis-cli -p $store --eval "$PWD/lua/token_store.lua" newest , "\$REDLATCH_FENCING_TOKEN")
echo "w \$REDLATCH_FENCING_TOKEN \$\$ \$r" >> "\$1"
EOF
until2=$(( $(date +%s) + SECONDS2 ))
for _ in $(seq 1 4); do
    worker "$until2" "$log2" chaos-fenced --fenced &
    pids+=($!)
done
stalls=0
while (( $(date +%s) < until2 - 4 )); do
    sleep 1
    child=$(pgrep -f "^sh $dir/critical" | head -1) || continue
    parent=$(ps -o ppid= -p "$child" | tr -d ' ') || continue
    [[ -n "$parent" ]] || continue
    kill -STOP "$parent" "$child" 2>/dev/null || continue
    sleep 3   # past the lease: another worker takes the lock and writes
    kill -CONT "$child" "$parent" 2>/dev/null || true
    stalls=$((stalls + 1))
done
wait_workers
# Violations: one token handed to two holders (a counter that went back repeats values).
read -r writes accepted rejected violations < <(awk '
    $1 == "w" { n++; if ($4 == 1) ok++; else rejected++
                if (($2 in by) && by[$2] != $3) bad++; by[$2] = $3 }
    END { print n + 0, ok + 0, rejected + 0, bad + 0 }' "$log2")
echo "chaos fencing: seconds=$SECONDS2 stalled_holders=$stalls writes=$writes accepted=$accepted stale_rejected=$rejected violations=$violations"

status=0
(( acquisitions > 0 )) || { echo "chaos: no acquisition in phase 1" >&2; status=1; }
(( overlaps == 0 )) || { echo "chaos: $overlaps overlaps" >&2; status=1; }
(( accepted > 0 )) || { echo "chaos: no accepted fenced write" >&2; status=1; }
(( violations == 0 )) || { echo "chaos: $violations stale writes accepted" >&2; status=1; }
exit $status
