#!/usr/bin/env bash
# The whole test suite, as CI runs it: build every binary the end-to-end tests drive
# (clawpool, the scripted agent, the scripted model server), then run every test with
# cargo-nextest (settings in .config/nextest.toml: four tests at a time, no retries, no fail-fast:
# a failing test does not hide the results of the others), then the doc tests, which nextest does
# not run. Closes with one line that sums up the results.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v cargo-nextest >/dev/null 2>&1 \
    || { echo "test.sh: cargo-nextest is not installed (cargo install cargo-nextest --locked)" >&2; exit 1; }
cargo build --workspace --bins --tests --locked
status=0
cargo nextest run --workspace --locked || status=$?
cargo test --workspace --locked --doc || status=$?
if [ "$status" -eq 0 ]; then echo "tests: all passed"; else echo "tests: FAILED (see above)"; fi
exit "$status"
