#!/usr/bin/env python3
"""Landing 20 lanes through `clawpool land`: one at a time against batched (`--batch N`).

Each run makes a fresh repository, spawns 20 scripted lanes (each commits `<lane>.txt`; two of
them, red05 and red14, turn verification red once their file is on the base), then lands all
20 with merge commits at level `package`. Every lane's verification is one command taking a
fixed time (`sleep VERIFY_S`, then red if any `red*.txt` is present). Reported per mode: the
land run's wall time, the sum of the 20 lanes' verification times (20 x VERIFY_S, what a
queue verifying each lane once costs at least), the ratio, the candidates verified, and the
red commits on the base (first-parent commits since the start whose tree holds `red*.txt`:
must be 0).

Usage: cargo build --workspace --bins && scripts/bench-land.py [--batch 4 8 20] [--verify 0.7]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "debug")
LANES = [f"red{n:02}" if n in (5, 14) else f"l{n:02}" for n in range(1, 21)]

SCENARIO = """
trust_dialog = true
[[prompt]]
steps = [
  { do = "run", command = 'n=$(basename "$PWD"); echo "$n" > "$n.txt"' },
  { do = "git_commit", message = "lane work" },
]
"""


def git(repo, *args):
    return subprocess.run(
        ["git", "-C", repo, *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def setup(tmp, verify_s):
    home = os.path.join(tmp, "home")
    os.makedirs(home)
    env = dict(os.environ, HOME=home, XDG_CONFIG_HOME=os.path.join(home, ".config"),
               XDG_STATE_HOME=os.path.join(home, ".local", "state"),
               TMUX_TMPDIR=tmp)
    env.pop("TMUX", None)
    repo = os.path.join(tmp, "repo")
    os.makedirs(repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "bench")
    git(repo, "config", "user.email", "bench@localhost")
    git(repo, "commit", "-q", "--allow-empty", "-m", "Initial commit")
    scenario = os.path.join(tmp, "scenario.toml")
    with open(scenario, "w") as f:
        f.write(SCENARIO)
    config = os.path.join(tmp, "config.toml")
    with open(config, "w") as f:
        f.write(f"trusted_roots = [{json.dumps(tmp)}]\n[handshake]\nfinish_idle_ms = 400\n"
                f"[profiles.scripted.launch]\ncommand = {json.dumps(os.path.join(BIN, 'clawpool-scripted-agent'))}\n"
                f"env = {{ CLAWPOOL_AGENT_SCENARIO = {json.dumps(scenario)} }}\n")
    # Armed only for the land run: the lanes' own verification when they finish costs nothing.
    armed = os.path.join(tmp, "armed")
    check = f"! test -e {armed} || {{ sleep {verify_s}; ! ls red*.txt >/dev/null 2>&1; }}"
    packet = os.path.join(tmp, "packet.json")
    with open(packet, "w") as f:
        json.dump({"defaults": {"agent": "scripted"},
                   "lanes": [{"name": n, "prompt": "work", "acceptance_tests": [check]}
                             for n in LANES]}, f)
    subprocess.run([os.path.join(BIN, "clawpool"), "spawn", packet, "--config", config,
                    "--repo", repo, "--concurrency", "4", "--output-format", "json"],
                   env=env, capture_output=True, check=False)
    open(armed, "w").close()
    return repo, env


def red_commits(repo, start):
    shas = git(repo, "rev-list", "--first-parent", f"{start}..main").split()
    return sum(
        any(f.startswith("red") for f in git(repo, "ls-tree", "--name-only", sha).split())
        for sha in shas
    )


def run(batch, verify_s):
    with tempfile.TemporaryDirectory() as tmp:
        repo, env = setup(tmp, verify_s)
        start = git(repo, "rev-parse", "main")
        args = [os.path.join(BIN, "clawpool"), "land", *LANES, "--level", "package",
                "--output-format", "json"]
        args += ["--batch", str(batch)] if batch else ["--method", "merge-commit"]
        began = time.monotonic()
        out = subprocess.run(args, cwd=repo, env=env, capture_output=True, text=True)
        wall = time.monotonic() - began
        report = json.loads(out.stdout)
        verdicts = [v["verdict"] for v in report["lanes"]]
        candidates = report.get("candidates", [])
        return {
            "mode": f"batch {batch}" if batch else "one at a time",
            "wall_s": wall,
            "landed": verdicts.count("landed"),
            "left_out": verdicts.count("left_out"),
            "verifications": len(candidates) if batch else len(LANES),
            "red_commits": red_commits(repo, start),
        }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, nargs="*", default=[4, 8, 20])
    parser.add_argument("--verify", type=float, default=0.7)
    a = parser.parse_args()
    total = len(LANES) * a.verify
    print(f"20 lanes, verification {a.verify} s each: sum of their verification times {total:.1f} s")
    print("| mode | wall time | wall / sum of verifications | verifications run | landed | left out | red commits on base |")
    print("|---|---|---|---|---|---|---|")
    for batch in [None, *a.batch]:
        r = run(batch, a.verify)
        print(f"| {r['mode']} | {r['wall_s']:.1f} s | {r['wall_s'] / total:.2f} | "
              f"{r['verifications']} | {r['landed']} | {r['left_out']} | {r['red_commits']} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
