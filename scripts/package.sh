#!/usr/bin/env bash
# Builds the published packages (redlatch, redlatch-cli) from their own tarballs, as
# crates.io would: `cargo package` verifies redlatch-cli against the packaged redlatch
# through a local overlay registry.
#
# Cargo unpacks an overlay crate once per name, version and registry path
# ($CARGO_HOME/registry/src/-<hash>/redlatch-0.1.0) and reuses that copy while its
# marker file exists. A clone at a path packaged before (CI's clean clones all live at
# one path) would then verify the CLI against an older redlatch with the same version
# number and fail on anything added since. So the unpacked copies of our own packages
# (only local registries' directories start with "-") are removed first. Cargo also
# takes a compiled registry crate of the same version as up to date whatever its
# source, so the verification builds in a target directory of its own, emptied first.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
for stale in "$cargo_home"/registry/src/-*/redlatch-[0-9]* "$cargo_home"/registry/src/-*/redlatch-cli-[0-9]*; do
    [[ -d "$stale" ]] && rm -rf -- "$stale"
done
target_dir="target/package-verify"
rm -rf -- "$target_dir"
# The bench and the test harness (redlatch-testkit) are not published.
cargo package --workspace --exclude redlatch-bench --exclude redlatch-testkit --quiet --allow-dirty --target-dir "$target_dir" "$@"
