#!/usr/bin/env bash
# Install the pinned real coding agents into a project-local folder, so the
# end-to-end tests that drive the real agents (offline, against the scripted
# model server) always run the exact versions the screen fixtures were taken
# from. Nothing is installed globally and nothing outside `.agents/` is written.
#
# Usage: scripts/install-agents.sh
# Env:   CLAWPOOL_AGENTS_DIR  override the install folder (default: <repo>/.agents)
#
# Idempotent: when both packages are already present at the pinned versions it
# does nothing but print where the binaries are.
set -euo pipefail

CLAUDE_PKG="@anthropic-ai/claude-code"
CLAUDE_VERSION="2.1.330"
CODEX_PKG="@openai/codex"
CODEX_VERSION="0.169.0"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${CLAWPOOL_AGENTS_DIR:-$repo_root/.agents}"

die() {
    echo "install-agents: error: $*" >&2
    exit 1
}

command -v node >/dev/null 2>&1 \
    || die "node is not installed or not on PATH; install Node.js 20+ (codex's launcher is a Node script)"
command -v npm >/dev/null 2>&1 \
    || die "npm is not installed or not on PATH; install npm (it comes with Node.js) and run this again"

# Prints the version recorded in an installed package's package.json, or
# nothing when the package is absent. Uses node rather than grep so that
# formatting differences in package.json cannot fool the check.
installed_version() {
    local manifest="$prefix/node_modules/$1/package.json"
    [ -f "$manifest" ] || return 0
    node -e 'process.stdout.write(String(require(process.argv[1]).version || ""))' "$manifest"
}

binaries_present() {
    [ -x "$prefix/node_modules/.bin/claude" ] && [ -x "$prefix/node_modules/.bin/codex" ]
}

have_claude="$(installed_version "$CLAUDE_PKG")"
have_codex="$(installed_version "$CODEX_PKG")"

if [ "$have_claude" = "$CLAUDE_VERSION" ] && [ "$have_codex" = "$CODEX_VERSION" ] && binaries_present; then
    echo "install-agents: already installed: $CLAUDE_PKG@$CLAUDE_VERSION, $CODEX_PKG@$CODEX_VERSION"
else
    echo "install-agents: installing $CLAUDE_PKG@$CLAUDE_VERSION and $CODEX_PKG@$CODEX_VERSION into $prefix"
    mkdir -p "$prefix"
    # A package.json of our own keeps npm from walking up and installing into
    # the Cargo workspace root (npm picks the nearest folder with a manifest).
    if [ ! -f "$prefix/package.json" ]; then
        printf '{\n  "name": "clawpool-agents",\n  "private": true\n}\n' >"$prefix/package.json"
    fi
    # --save-exact pins the versions in our package.json, so a later plain
    # `npm install --prefix .agents` reproduces exactly these.
    npm install --no-audit --no-fund --save-exact --prefix "$prefix" \
        "$CLAUDE_PKG@$CLAUDE_VERSION" "$CODEX_PKG@$CODEX_VERSION" \
        || die "npm install failed (is the npm registry reachable? see the npm output above)"

    have_claude="$(installed_version "$CLAUDE_PKG")"
    have_codex="$(installed_version "$CODEX_PKG")"
    [ "$have_claude" = "$CLAUDE_VERSION" ] \
        || die "$CLAUDE_PKG is at '${have_claude:-missing}' after install, expected $CLAUDE_VERSION"
    [ "$have_codex" = "$CODEX_VERSION" ] \
        || die "$CODEX_PKG is at '${have_codex:-missing}' after install, expected $CODEX_VERSION"
    binaries_present \
        || die "npm finished but $prefix/node_modules/.bin/{claude,codex} are missing (did an install script fail or get skipped by --ignore-scripts?)"
fi

# Run each binary once: this catches a postinstall that npm skipped (Claude
# Code's bin/claude.exe is a placeholder until its postinstall copies the native
# binary over it) and a missing platform package. A scratch HOME keeps the
# agents from reading or writing the invoking user's real configuration.
smoke_home="$(mktemp -d)"
trap 'rm -rf "$smoke_home"' EXIT
check_runs() {
    local name="$1" want="$2" out
    out="$(env -i HOME="$smoke_home" PATH="$PATH" "$prefix/node_modules/.bin/$name" --version 2>/dev/null)" \
        || die "$prefix/node_modules/.bin/$name --version failed; delete $prefix and run this again"
    case "$out" in
        *"$want"*) ;;
        *) die "$name --version printed '$out', expected it to mention $want" ;;
    esac
}
check_runs claude "$CLAUDE_VERSION"
check_runs codex "$CODEX_VERSION"

echo "claude: $prefix/node_modules/.bin/claude"
echo "codex:  $prefix/node_modules/.bin/codex"
