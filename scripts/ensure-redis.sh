#!/usr/bin/env bash
# Sourced by the other scripts: installs redis-server, redis-sentinel and redis-tools
# (redis-cli, redis-benchmark) from Debian's packages when any of them is missing.
# (The test harness runs sentinels as `redis-server <conf> --sentinel`, the same binary
# and mode; `redis-sentinel` is the command the README and operators use.)
redlatch_ensure_redis() {
    local pair missing=() packages sudo=""
    for pair in redis-server:redis-server redis-sentinel:redis-sentinel \
        redis-cli:redis-tools redis-benchmark:redis-tools; do
        command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        # Each package once, in order.
        packages=$(printf '%s\n' "${missing[@]}" | awk '!seen[$0]++' | paste -sd' ')
        echo "redlatch: installing $packages with apt-get" >&2
        if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
        $sudo apt-get update -qq
        # shellcheck disable=SC2086 # a list of package names
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $packages >/dev/null
    fi
    for pair in redis-server redis-sentinel; do
        command -v "$pair" >/dev/null 2>&1 || { echo "redlatch: $pair is still missing" >&2; return 1; }
    done
}
redlatch_ensure_redis || exit 1
unset -f redlatch_ensure_redis
