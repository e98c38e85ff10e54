# Sourced by scripts/test.sh, flakes.sh and versions.sh: the cargo features every test
# run builds with, so that the tests of TLS, metrics and the serde Config run too (the
# CLI's `tls` feature for its TLS tests).
# shellcheck disable=SC2034  # used by the scripts that source this file
features="redlatch/tls,redlatch/metrics,redlatch/serde,redlatch/postgres,redlatch/s3,redlatch-cli/tls"
