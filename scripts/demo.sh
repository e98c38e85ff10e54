#!/usr/bin/env bash
# demo.sh: redlatch in one minute.
#
# Starts three throwaway redis-server masters on free loopback ports (never 6379), runs
# six workers that each take the same lock three times with `redlatch run` (Redlock over
# the three masters) and append "enter"/"exit" lines around a short sleep to one file,
# SIGKILLs the redlatch process of one holder midway, and prints a report: no two
# critical sections overlapped, and how long the lock took to move on after the crash
# (the dead holder's lease had to run out). Stops its masters on exit.
#
# Usage: scripts/demo.sh            (installs redis-server with apt-get if missing)
# Environment: WATCHDOG (default 3s), KEEP=1 keeps the temp dir.
set -euo pipefail
cd "$(dirname "$0")/.."

WATCHDOG=${WATCHDOG:-3s}
WORKERS=6
ROUNDS=3
LOCK=demo:nightly-report

. scripts/ensure-redis.sh

echo "== building redlatch (release)"
cargo build --release --quiet -p redlatch-cli
BIN="${CARGO_TARGET_DIR:-target}/release/redlatch"
DEADLINE=$((SECONDS + 90)) # hard bound on the rest of the run

WORK=$(mktemp -d "${TMPDIR:-/tmp}/redlatch-demo.XXXXXX")
LOG="$WORK/critical.log"
: >"$LOG"
MASTER_PIDS=()
WORKER_PIDS=()

cleanup() {
    local pid
    for pid in "${WORKER_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${MASTER_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${MASTER_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [ "${KEEP:-0}" = 1 ]; then echo "(kept $WORK)"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# True if something accepts connections on 127.0.0.1:$1.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# True if 127.0.0.1:$1 answers PING with PONG.
pong() {
    local reply=""
    exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
    printf 'PING\r\n' >&3
    read -r -t 1 reply <&3 || true
    exec 3<&- 3>&-
    [ "${reply%$'\r'}" = "+PONG" ]
}

# Starts one master on a free port, as a child of this shell (so the EXIT trap can
# stop and reap it); sets MASTER_PID and MASTER_PORT.
start_master() {
    local attempt port pid i
    for attempt in 1 2 3 4 5 6 7 8 9 10; do
        port=$((20000 + RANDOM % 40000))
        if [ "$port" = 6379 ] || port_busy "$port"; then continue; fi
        mkdir -p "$WORK/m$port"
        redis-server --port "$port" --bind 127.0.0.1 --dir "$WORK/m$port" --save "" \
            --appendonly no --daemonize no --protected-mode no \
            --logfile "$WORK/m$port/redis.log" </dev/null >/dev/null 2>&1 &
        pid=$!
        MASTER_PIDS+=("$pid")
        for i in $(seq 50); do
            if pong "$port" 2>/dev/null; then
                MASTER_PID=$pid MASTER_PORT=$port
                return 0
            fi
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill "$pid" 2>/dev/null || true
    done
    echo "demo: could not start a redis-server" >&2
    return 1
}

echo "== starting three throwaway masters"
REDIS_ARGS=()
for n in 1 2 3; do
    start_master
    REDIS_ARGS+=(--redis "redis://127.0.0.1:$MASTER_PORT")
    echo "   master $n: 127.0.0.1:$MASTER_PORT (pid $MASTER_PID)"
done

# The critical section: $PPID is the redlatch process holding the lock for it.
SECTION='echo "enter $ID $(date +%s%3N) $PPID" >>"$LOG"; sleep 0.4; echo "exit $ID $(date +%s%3N)" >>"$LOG"'

# Runs with its stderr on /dev/null (bash's "Killed" notice) and the real one on fd 4.
worker() {
    local id=$1 round
    for round in $(seq "$ROUNDS"); do
        ID=$id LOG=$LOG "$BIN" run "$LOCK" --wait 40s --watchdog "$WATCHDOG" \
            "${REDIS_ARGS[@]}" -- sh -c "$SECTION" 2>&4 ||
            echo "   worker $id: redlatch exited with status $?" >&4
    done
}

echo "== $WORKERS workers x $ROUNDS rounds on lock \"$LOCK\" (Redlock, watchdog $WATCHDOG)"
for id in $(seq "$WORKERS"); do
    worker "w$id" 4>&2 2>/dev/null &
    WORKER_PIDS+=($!)
done

# Midway, SIGKILL the redlatch process of whoever is inside the critical section.
VICTIM=""
while [ -z "$VICTIM" ] && [ "$SECONDS" -lt "$DEADLINE" ]; do
    sleep 0.05
    [ "$(grep -c '^exit' "$LOG")" -ge $((WORKERS * ROUNDS / 3)) ] || continue
    last=$(tail -n 1 "$LOG")
    case "$last" in enter*) ;; *) continue ;; esac
    read -r _ id at pid <<<"$last"
    # Only a holder that entered just now: it is still inside its 0.4 s section, so
    # no "exit" line can come before the "crash" record, which goes in first.
    [ $(($(date +%s%3N) - at)) -lt 150 ] || continue
    echo "crash $id $(date +%s%3N) $pid" >>"$LOG"
    kill -KILL "$pid"
    VICTIM=$id
    echo "== SIGKILLed the holder $id (redlatch pid $pid) inside its critical section"
    sleep 0.3
    "$BIN" status "$LOCK" "${REDIS_ARGS[@]}" | sed 's/^/   /' || [ "$?" -eq 1 ]  # 1: free
done

for pid in "${WORKER_PIDS[@]}"; do
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$DEADLINE" ]; do sleep 0.1; done
done
if [ "$SECONDS" -ge "$DEADLINE" ]; then echo "demo: timed out" >&2; exit 1; fi
WORKER_PIDS=()

echo "== the critical sections, in file order"
sed 's/^/   /' "$LOG"
echo "== report"
awk -v watchdog="$WATCHDOG" '
    function fail(msg) { bad++; print "   OVERLAP/ORDER ERROR: " msg }
    $1 == "enter" {
        if (inside != "") fail($2 " entered while " inside " was inside")
        if (last_end != "" && $3 < last_end) fail($2 " entered before the previous section ended")
        if (last_end != "") {
            gap = $3 - last_end
            if (after_crash) { crash_gap = gap; next_holder = $2 " (redlatch pid " $4 ")"; after_crash = 0 }
            else { handoffs++; sum += gap; if (gap > max) max = gap }
        }
        inside = $2; sections++
    }
    $1 == "exit" || $1 == "crash" {
        if (inside != $2) fail($1 " of " $2 " while " (inside == "" ? "nobody" : inside) " was inside")
        inside = ""; last_end = $3
        if ($1 == "crash") { crashed = $2 " (redlatch pid " $4 ")"; after_crash = 1 }
    }
    END {
        printf "   %d critical sections, %d overlaps or out-of-order lines\n", sections, bad
        if (handoffs) printf "   normal hand-over (exit -> next enter): mean %.0f ms, max %d ms\n", sum / handoffs, max
        if (crashed != "" && next_holder != "")
            printf "   after %s crashed, the lock moved on to %s %d ms later (lease = watchdog %s; the dead holder last renewed it at most a third of that earlier)\n", crashed, next_holder, crash_gap, watchdog
        else if (crashed != "") print "   the crashed holder was the last one: nobody needed the lock after it"
        else fail("no holder was killed")
        if (bad == 0) print "   OK: no two critical sections overlapped"
        exit bad > 0
    }' "$LOG"
echo "== final state"
"$BIN" status "$LOCK" "${REDIS_ARGS[@]}" | sed 's/^/   /' || [ "$?" -eq 1 ]  # 1: free
