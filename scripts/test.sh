#!/usr/bin/env bash
# The whole test suite, as CI runs it: build every binary the end-to-end tests drive
# (clawpool, the scripted agent, the scripted model server), then run every test, and close
# with one line that sums up every test binary's result. `--no-fail-fast`: a failing binary does
# not hide the results of the ones after it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --workspace --bins --locked
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --locked --no-fail-fast 2>&1 | tee "$log" || status=$?
passed=$(grep -Eo 'test result: [a-zA-Z]+\. [0-9]+ passed' "$log" | awk '{s += $4} END {print s + 0}')
failed=$(grep -Eo '[0-9]+ failed;' "$log" | awk '{s += $1} END {print s + 0}')
echo
echo "tests: $passed passed, $failed failed"
exit "$status"
