#!/usr/bin/env bash
# Sourced by scripts/test.sh: installs what the fencing tests run (docs/fencing.md) when
# missing, from Debian's packages: `postgresql` (initdb and postgres, which
# redlatch-testkit's postgres module starts on a free port). Without it the tests say
# SKIPPED; REDLATCH_REQUIRE_POSTGRES=1 (set by .ci/run) makes that an error. (The
# clock-jump case moves one redis-server's clock with a preload shim the test kit
# compiles with `cc`, not libfaketime, which cannot start inside a jemalloc process.)
redlatch_ensure_postgres() {
    local missing=() sudo=""
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 \
        || missing+=(postgresql)
    if [ "${#missing[@]}" -gt 0 ]; then
        echo "redlatch: installing ${missing[*]} with apt-get" >&2
        if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
        $sudo apt-get update -qq || true
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null || {
            echo "redlatch: could not install ${missing[*]}; the fencing tests will say SKIPPED" >&2
            [ "${REDLATCH_REQUIRE_POSTGRES:-}" != 1 ]
            return
        }
    fi
}
redlatch_ensure_postgres || exit 1
unset -f redlatch_ensure_postgres
