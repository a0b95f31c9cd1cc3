#!/usr/bin/env bash
# Install the pinned real coding agents into a project-local folder, so the
# end-to-end tests that drive the real agents (offline, against the scripted
# model server) always run the exact versions the screen fixtures were taken
# from. Nothing is installed globally and nothing outside `.agents/` is written.
#
# Usage: scripts/install-agents.sh
# Env:   CLAWPOOL_AGENTS_DIR  override the install folder (default: <repo>/.agents)
#
# Idempotent: when every package is already present at its pinned version it
# does nothing but check that each binary runs and print where they are.
set -euo pipefail

# npm packages: package, pinned version, the binary it puts in node_modules/.bin.
NPM_AGENTS=(
    "@anthropic-ai/claude-code 2.1.330 claude"
    "@openai/codex 0.169.0 codex"
    "opencode-ai 1.18.33 opencode"
    "@google/gemini-cli 0.61.0 gemini"
    "@qwen-code/qwen-code 0.24.4 qwen"
    # Qwen Code needs Node.js 22 or later; this pinned Node (the `node` package fetches the
    # platform's binary from the npm registry too) runs it, whatever Node the machine has.
    "node 22.23.3 node"
)
# aider comes from PyPI, into its own virtual environment under the prefix.
AIDER_PKG="aider-chat"
AIDER_VERSION="0.86.2"
# claw is built from claw-code's pinned source archive in ../shared/claw-code/ (its crates
# come from crates.io). The release build took 8 min 51 s on the 2-core dev machine while other
# builds shared it, 5 min 8 s on a second run (about 5 min of CPU either way), so the binary is
# cached: it is rebuilt only when the archive's SHA-256 differs from the one stamped beside it.
CLAW_ARCHIVE_NAME="claw-code-08106b0c.tar.gz"
CLAW_VERSION="0.1.3"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${CLAWPOOL_AGENTS_DIR:-$repo_root/.agents}"
aider_venv="$prefix/aider-venv"
claw_archive="$repo_root/../shared/claw-code/$CLAW_ARCHIVE_NAME"
claw_dir="$prefix/claw-code"
claw_bin="$claw_dir/bin/claw"
claw_stamp="$claw_dir/bin/archive.sha256"

die() {
    echo "install-agents: error: $*" >&2
    exit 1
}

command -v node >/dev/null 2>&1 \
    || die "node is not installed or not on PATH; install Node.js 20+ (codex's and gemini's launchers are Node scripts)"
command -v npm >/dev/null 2>&1 \
    || die "npm is not installed or not on PATH; install npm (it comes with Node.js) and run this again"
command -v python3 >/dev/null 2>&1 \
    || die "python3 is not installed or not on PATH; install Python 3.10-3.12 (aider runs in a virtual environment)"

# Prints the version recorded in an installed package's package.json, or
# nothing when the package is absent. Uses node rather than grep so that
# formatting differences in package.json cannot fool the check.
installed_version() {
    local manifest="$prefix/node_modules/$1/package.json"
    [ -f "$manifest" ] || return 0
    node -e 'process.stdout.write(String(require(process.argv[1]).version || ""))' "$manifest"
}

# The npm packages not yet at their pinned version (or whose binary is gone),
# as `pkg@version` arguments for npm install.
missing_npm=()
for entry in "${NPM_AGENTS[@]}"; do
    read -r pkg version bin <<<"$entry"
    if [ "$(installed_version "$pkg")" != "$version" ] || [ ! -x "$prefix/node_modules/.bin/$bin" ]; then
        missing_npm+=("$pkg@$version")
    fi
done

if [ "${#missing_npm[@]}" -eq 0 ]; then
    echo "install-agents: npm agents already installed"
else
    echo "install-agents: installing ${missing_npm[*]} into $prefix"
    mkdir -p "$prefix"
    # A package.json of our own keeps npm from walking up and installing into
    # the Cargo workspace root (npm picks the nearest folder with a manifest).
    if [ ! -f "$prefix/package.json" ]; then
        printf '{\n  "name": "clawpool-agents",\n  "private": true\n}\n' >"$prefix/package.json"
    fi
    # --save-exact pins the versions in our package.json, so a later plain
    # `npm install --prefix .agents` reproduces exactly these.
    npm install --no-audit --no-fund --save-exact --prefix "$prefix" "${missing_npm[@]}" \
        || die "npm install failed (is the npm registry reachable? see the npm output above)"
    for entry in "${NPM_AGENTS[@]}"; do
        read -r pkg version bin <<<"$entry"
        have="$(installed_version "$pkg")"
        [ "$have" = "$version" ] || die "$pkg is at '${have:-missing}' after install, expected $version"
        [ -x "$prefix/node_modules/.bin/$bin" ] \
            || die "npm finished but $prefix/node_modules/.bin/$bin is missing (did an install script fail or get skipped by --ignore-scripts?)"
    done
fi

aider_installed_version() {
    [ -x "$aider_venv/bin/python" ] || return 0
    "$aider_venv/bin/python" -c 'import importlib.metadata as m; print(m.version("aider-chat"), end="")' 2>/dev/null || true
}

if [ "$(aider_installed_version)" = "$AIDER_VERSION" ] && [ -x "$aider_venv/bin/aider" ]; then
    echo "install-agents: $AIDER_PKG already installed"
else
    echo "install-agents: installing $AIDER_PKG==$AIDER_VERSION into $aider_venv"
    mkdir -p "$prefix"
    python3 -m venv "$aider_venv" \
        || die "python3 -m venv failed (on Debian: apt-get install python3-venv)"
    "$aider_venv/bin/python" -m pip install --quiet --disable-pip-version-check "$AIDER_PKG==$AIDER_VERSION" \
        || die "pip install $AIDER_PKG==$AIDER_VERSION failed (is PyPI reachable? see the pip output above)"
    have="$(aider_installed_version)"
    [ "$have" = "$AIDER_VERSION" ] || die "$AIDER_PKG is at '${have:-missing}' after install, expected $AIDER_VERSION"
fi

# claw: cached by the archive's hash; a stale or missing binary is rebuilt from scratch.
[ -f "$claw_archive" ] \
    || die "claw-code's source archive is missing at $claw_archive (it comes with shared/, beside the checkout)"
claw_wanted="$(sha256sum "$claw_archive" | cut -d' ' -f1)"
if [ -x "$claw_bin" ] && [ "$(cat "$claw_stamp" 2>/dev/null)" = "$claw_wanted" ]; then
    echo "install-agents: claw already built from $CLAW_ARCHIVE_NAME"
else
    command -v cargo >/dev/null 2>&1 || die "cargo is not on PATH; claw is built from source with cargo"
    echo "install-agents: building claw from $CLAW_ARCHIVE_NAME (a release build: several minutes)"
    rm -rf "$claw_dir"
    mkdir -p "$claw_dir/src" "$claw_dir/bin"
    tar -xzf "$claw_archive" -C "$claw_dir/src" || die "could not unpack $claw_archive"
    build_started=$SECONDS
    # The ceiling keeps claw's build script from reading the git repository around .agents/
    # (it stamps `claw --version` with the commit it finds); the target folder is named so that
    # a CARGO_TARGET_DIR in the environment cannot send the binary elsewhere.
    (cd "$claw_dir/src/claw-code/rust" \
        && GIT_CEILING_DIRECTORIES="$claw_dir/src" CARGO_TARGET_DIR="$claw_dir/src/target" \
            cargo build --release --locked -p rusty-claude-cli) \
        || die "building claw failed (is crates.io reachable? see cargo's output above)"
    cp "$claw_dir/src/target/release/claw" "$claw_bin"
    # The sources and the ~1 GB target folder are not needed once the binary is copied.
    rm -rf "$claw_dir/src"
    echo "$claw_wanted" >"$claw_stamp"
    echo "install-agents: claw built in $((SECONDS - build_started)) s"
fi

# Run each binary once: this catches a postinstall that npm skipped (Claude
# Code's bin/claude.exe is a placeholder until its postinstall copies the native
# binary over it) and a missing platform package. A scratch HOME keeps the
# agents from reading or writing the invoking user's real configuration.
smoke_home="$(mktemp -d)"
trap 'rm -rf "$smoke_home"' EXIT
check_runs() {
    local path="$1" want="$2" out
    out="$(env -i HOME="$smoke_home" PATH="$PATH" "$path" --version 2>/dev/null)" \
        || die "$path --version failed; delete $prefix and run this again"
    case "$out" in
        *"$want"*) ;;
        *) die "$path --version printed '$out', expected it to mention $want" ;;
    esac
}
for entry in "${NPM_AGENTS[@]}"; do
    read -r pkg version bin <<<"$entry"
    check_runs "$prefix/node_modules/.bin/$bin" "$version"
done
check_runs "$aider_venv/bin/aider" "$AIDER_VERSION"
check_runs "$claw_bin" "$CLAW_VERSION"

for entry in "${NPM_AGENTS[@]}"; do
    read -r pkg version bin <<<"$entry"
    printf '%-9s %s\n' "$bin:" "$prefix/node_modules/.bin/$bin"
done
printf '%-9s %s\n' "aider:" "$aider_venv/bin/aider"
printf '%-9s %s\n' "claw:" "$claw_bin"
