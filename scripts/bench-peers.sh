#!/usr/bin/env bash
# clawpool against a tool people use: ccmanager 4.2.3 and clawpool, each watching N real Claude
# Code 2.1.330 sessions (offline, against clawpool-model-server), N = 10 and 20 unless given.
# Prints a Markdown table with ratios (scripts/bench-peers.py says what each column measures).
#
#   cargo build --release --workspace && scripts/install-agents.sh && scripts/bench-peers.sh [N ...]
#
# ccmanager is installed pinned into a scratch folder (never globally, never into .agents/).
# ccmanager 4.2.3's launcher looks for a prebuilt binary package
# (@kodaikabasawa/ccmanager-linux-x64) that was never published at 4.2.3, so its own compiled
# JavaScript (dist/cli.js, which needs Bun: it uses Bun.Terminal for its PTYs) is run with Bun
# 1.4.4, installed pinned into the same folder. Everything — HOME, the tmux server (its own
# socket), the repositories, the model servers — lives in the scratch folder, which is removed
# at the end; the user's HOME and tmux server are never touched.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
for bin in clawpool clawpool-model-server; do
  [[ -x "$root/target/release/$bin" ]] || { echo "missing target/release/$bin: cargo build --release --workspace" >&2; exit 2; }
done
[[ -x "$root/.agents/node_modules/.bin/claude" ]] || { echo "missing .agents/node_modules/.bin/claude: scripts/install-agents.sh" >&2; exit 2; }
command -v tmux >/dev/null || { echo "tmux is needed" >&2; exit 2; }

scratch="$(mktemp -d "${TMPDIR:-/tmp}/clawpool-bench-peers.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
echo "installing ccmanager 4.2.3 and bun 1.4.4 into $scratch/ccmanager" >&2
npm install --prefix "$scratch/ccmanager" --no-audit --no-fund --save-exact --loglevel=error \
  ccmanager@4.2.3 bun@1.4.4 >&2
# pyte replays what each agent drew (scripts/bench-peers-tap.py) to time its screen changes.
python3 -m pip install --quiet --disable-pip-version-check --target "$scratch/python" pyte==0.8.2 >&2
PYTHONPATH="$scratch/python" python3 "$root/scripts/bench-peers.py" "$scratch" "$scratch/ccmanager" "$@"
