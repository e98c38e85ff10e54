#!/usr/bin/env bash
# Sourced by the other scripts: installs redis-server and redis-tools (redis-cli,
# redis-benchmark) from Debian's packages when they are missing.
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-benchmark >/dev/null 2>&1; then
    echo "redlatch: installing redis-server and redis-tools with apt-get" >&2
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server redis-tools >/dev/null
fi
command -v redis-server >/dev/null 2>&1 || { echo "redlatch: redis-server is still missing" >&2; exit 1; }
