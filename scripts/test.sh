#!/usr/bin/env bash
# The whole test suite, as CI runs it: build every binary the end-to-end tests drive
# (clawpool, the scripted agent, the scripted model server), then run every test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --workspace --bins --locked
cargo test --workspace --locked
