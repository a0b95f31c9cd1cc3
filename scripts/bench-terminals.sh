#!/usr/bin/env bash
# Runs the terminals benchmarks (pty/benches/terminals.rs) in release mode and prints the
# Markdown report; see docs/performance.md for what it measures and how to read it.
#
#   scripts/bench-terminals.sh            # full run, about 2.5 minutes on 2 cores
#   CLAWPOOL_BENCH_QUICK=1 scripts/bench-terminals.sh   # short windows, for trying changes
#
# The report is also written to target/bench-terminals.md. Needs tmux on PATH. Every tmux
# server it starts is private (its own socket name in a throwaway TMUX_TMPDIR) and is killed
# before it exits; the default tmux server is never touched.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v tmux >/dev/null || { echo "tmux is not installed" >&2; exit 1; }

report=target/bench-terminals.md
mkdir -p target
cargo bench -p clawpool-pty --bench terminals | tee "$report.tmp"
mv "$report.tmp" "$report"
echo >&2
echo "report written to $report" >&2
