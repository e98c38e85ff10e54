#!/usr/bin/env bash
# Sourced by scripts/test.sh: installs what the S3 fence's tests run (docs/fencing.md,
# "Object stores") when missing: moto's server mode (`moto_server`, PyPI's `moto[server]`),
# which redlatch-testkit's moto module starts on a free port. Found on the PATH, at
# $REDLATCH_MOTO_SERVER, or installed here into a virtualenv in target/moto/ (no root, no
# system Python touched). Without it the tests say SKIPPED; REDLATCH_REQUIRE_MOTO=1 (set
# by .ci/run) makes that an error.
redlatch_ensure_moto() {
    local venv="${CARGO_TARGET_DIR:-target}/moto"
    if [ -n "${REDLATCH_MOTO_SERVER:-}" ] || [ -x "$venv/bin/moto_server" ] \
        || command -v moto_server >/dev/null 2>&1; then
        return 0
    fi
    echo "redlatch: installing moto[server] with pip into $venv" >&2
    # Debian's python3 makes virtualenvs only with its python3-venv package.
    if ! python3 -c 'import ensurepip' >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
        local sudo=""
        if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
        echo "redlatch: installing python3-venv with apt-get" >&2
        $sudo apt-get update -qq || true
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv >/dev/null || true
    fi
    if python3 -m venv "$venv" >/dev/null \
        && "$venv/bin/pip" install -q --disable-pip-version-check 'moto[server]>=5,<6' >&2; then
        return 0
    fi
    rm -rf "$venv"
    echo "redlatch: could not install moto[server]; the S3 fence's tests will say SKIPPED" >&2
    [ "${REDLATCH_REQUIRE_MOTO:-}" != 1 ]
}
redlatch_ensure_moto || exit 1
unset -f redlatch_ensure_moto
