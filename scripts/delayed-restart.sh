#!/usr/bin/env bash
# delayed-restart.sh: restart a Redlock master only after the longest lease has passed.
#
# A master that restarts without its data (no AOF with appendfsync always) forgets the
# locks it granted. If it comes back while those leases are still valid, a second client
# can form a majority with it and hold a lock that is still held (SPEC §3.9). Keeping the
# restarted master out for longer than the longest lease makes that impossible: by the
# time it answers again, every lock it forgot has expired on the other masters too.
#
# Usage:
#   scripts/delayed-restart.sh --port P [--host 127.0.0.1] [--max-lease 30s]
#                              [--margin D] [--stop] -- <command that starts redis-server>
#
#   --port P        the master's port (required)
#   --host H        the master's address (default 127.0.0.1)
#   --max-lease D   the longest lease any client uses: the largest explicit lease and the
#                   watchdog timeout (default 30s, Redisson's and redlatch's default)
#   --margin D      extra wait for clock drift and slow starts (default: 10% of max-lease,
#                   at least 100ms)
#   --stop          stop the running master first (redis-cli shutdown nosave); without it
#                   the script refuses to go on while something still listens on the port
#
# Durations: 250ms, 30s, 5m, 1h, or a plain number of seconds.
# The wait starts once the old process is gone; then the start command is exec'd (it
# replaces this script, so the caller's process id becomes the new master's).
#
# Example:
#   scripts/delayed-restart.sh --port 7001 --max-lease 30s --stop -- \
#       redis-server /etc/redis/7001.conf
set -euo pipefail

prog=delayed-restart
say() { printf '%s: %s\n' "$prog" "$*"; }
die() {
    printf '%s: error: %s\n' "$prog" "$*" >&2
    exit 2
}
usage() {
    sed -n '/^# Usage:/,/^# Example:/p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# Duration -> milliseconds.
to_ms() {
    local d=$1
    case $d in
    *ms) d=${d%ms} && [[ $d =~ ^[0-9]+$ ]] && echo "$d" && return ;;
    *s) d=${d%s} && [[ $d =~ ^[0-9]+$ ]] && echo $((d * 1000)) && return ;;
    *m) d=${d%m} && [[ $d =~ ^[0-9]+$ ]] && echo $((d * 60000)) && return ;;
    *h) d=${d%h} && [[ $d =~ ^[0-9]+$ ]] && echo $((d * 3600000)) && return ;;
    *) [[ $d =~ ^[0-9]+$ ]] && echo $((d * 1000)) && return ;;
    esac
    die "bad duration: $1 (use 250ms, 30s, 5m, 1h)"
}

fmt_ms() { printf '%d.%03ds' $(($1 / 1000)) $(($1 % 1000)); }

# True while something accepts connections on host:port (a paused server counts).
listening() {
    timeout 2 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null
}

host=127.0.0.1
port=
max_lease=30s
margin=
stop=0
while [[ $# -gt 0 ]]; do
    case $1 in
    --port) port=${2:-} && shift 2 ;;
    --host) host=${2:-} && shift 2 ;;
    --max-lease) max_lease=${2:-} && shift 2 ;;
    --margin) margin=${2:-} && shift 2 ;;
    --stop) stop=1 && shift ;;
    -h | --help) usage ;;
    --) shift && break ;;
    *) die "unknown argument: $1 (the start command goes after --)" ;;
    esac
done
[[ $port =~ ^[0-9]+$ ]] || die "--port is required (a number)"
[[ $# -gt 0 ]] || die "no start command given after --"
lease_ms=$(to_ms "$max_lease")
if [[ -n $margin ]]; then
    margin_ms=$(to_ms "$margin")
else
    margin_ms=$((lease_ms / 10))
    ((margin_ms >= 100)) || margin_ms=100
fi

if listening; then
    ((stop)) || die "something still listens on $host:$port; stop it first or pass --stop"
    command -v redis-cli >/dev/null || die "--stop needs redis-cli on PATH"
    say "stopping the master on $host:$port (shutdown nosave)"
    timeout 5 redis-cli -h "$host" -p "$port" shutdown nosave >/dev/null 2>&1 || true
    for _ in $(seq 100); do
        listening || break
        sleep 0.1
    done
    listening && die "the master on $host:$port is still up after shutdown; kill it first"
fi
say "$host:$port is down; its locks are forgotten"

wait_ms=$((lease_ms + margin_ms))
say "waiting $(fmt_ms "$wait_ms") (max lease $(fmt_ms "$lease_ms") + margin $(fmt_ms "$margin_ms")) before restarting"
sleep "$(fmt_ms "$wait_ms" | tr -d s)"

listening && die "something started listening on $host:$port meanwhile; not starting another"
say "starting:$(printf ' %q' "$@")"
exec "$@"
