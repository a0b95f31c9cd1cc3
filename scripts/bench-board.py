#!/usr/bin/env python3
"""`clawpool board --output-format json` at scale (issue #27, "Measure"): SCALE finished
scripted lanes are spawned once into DIR (kept, so the same lanes can be timed with several
builds), then the board is timed RUNS times with each CLAWPOOL binary given; prints the
median, min and max per binary, and checks every binary prints the same board (ages and
heartbeats aside, which move between runs).

Usage: scripts/bench-board.py DIR [SCALE] [RUNS] [CLAWPOOL...]
       DIR is made on the first run (its own HOME and TMUX_TMPDIR; remove it when done);
       CLAWPOOL defaults to target/release/clawpool (CLAWPOOL_PROFILE=debug for target/debug).
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PROFILE = os.environ.get("CLAWPOOL_PROFILE", "release")
AGENT = os.path.join(ROOT, "target", PROFILE, "clawpool-scripted-agent")

# Each lane writes a file and ends: finished lanes with one new file (dirty), as after a batch.
WORK = r'''
[[prompt]]
steps = [{ do = "write_file", path = "out.txt", content = "done\n" }]
'''


def git(args, cwd):
    subprocess.run(["git"] + args, cwd=cwd, check=True, capture_output=True)


def env(base):
    e = dict(os.environ)
    e["HOME"] = os.path.join(base, "home")
    e["TMUX_TMPDIR"] = os.path.join(base, "tmux")
    return e


def make_lanes(base, scale, clawpool):
    repo = os.path.join(base, "repo")
    os.makedirs(repo)
    os.makedirs(os.path.join(base, "home"))
    os.makedirs(os.path.join(base, "tmux"))
    git(["init", "-q", "-b", "main"], repo)
    git(["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "--allow-empty", "-m",
         "init"], repo)
    scenario = os.path.join(base, "scenario.toml")
    with open(scenario, "w") as f:
        f.write(WORK)
    config = os.path.join(base, "config.toml")
    with open(config, "w") as f:
        f.write(f'trusted_roots = ["{base}"]\n[handshake]\nfinish_idle_ms = 300\n')
        f.write(f'[profiles.scripted.launch]\ncommand = "{AGENT}"\n')
        f.write(f'env = {{ CLAWPOOL_AGENT_SCENARIO = "{scenario}" }}\n')
    packet = os.path.join(base, "packet.json")
    with open(packet, "w") as f:
        json.dump({"defaults": {"agent": "scripted"},
                   "lanes": [{"name": f"lane-{i:04d}", "prompt": "go"}
                             for i in range(scale)]}, f)
    started = time.perf_counter()
    subprocess.run([clawpool, "spawn", packet, "--repo", repo, "--config", config,
                    "--concurrency", str(min(scale, 200)), "--output-format", "json"],
                   env=env(base), capture_output=True, check=False)
    print(f"spawned {scale} lanes in {time.perf_counter() - started:.1f} s", file=sys.stderr)


def stable(board):
    """The board without what moves between two runs (ages, heartbeats)."""
    lanes = json.loads(board)["lanes"]
    for lane in lanes:
        lane.pop("seconds_since_update", None)
        lane.get("supervisor", {}).pop("seconds_since_heartbeat", None)
    return lanes


def main():
    base = os.path.abspath(sys.argv[1])
    scale = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    binaries = sys.argv[4:] or [os.path.join(ROOT, "target", PROFILE, "clawpool")]
    repo = os.path.join(base, "repo")
    if not os.path.isdir(repo):
        make_lanes(base, scale, binaries[0])
    boards = []
    for clawpool in binaries:
        # The output goes to a file, not a pipe this script would read while the board runs
        # (on two cores that reading competes with the board for the CPU).
        with tempfile.TemporaryFile() as out:

            def board():
                out.seek(0)
                out.truncate()
                started = time.perf_counter()
                subprocess.run([clawpool, "board", "--output-format", "json", "--repo", repo],
                               env=env(base), stdout=out, check=True)
                return (time.perf_counter() - started) * 1000

            # The first board of a binary may write the summary again (another binary's
            # format, or rows that moved): timed apart from the steady ones.
            first = board()
            times = [board() for _ in range(runs)]
            out.seek(0)
            rows = stable(out.read().decode())
        boards.append(rows)
        print(f"| {clawpool} | {len(rows)} lanes | median {statistics.median(times):.1f} ms "
              f"| min {min(times):.1f} | max {max(times):.1f} | {runs} runs | first {first:.0f} ms |")
    if any(b != boards[0] for b in boards[1:]):
        print("the binaries' boards differ", file=sys.stderr)
        sys.exit(1)


main()
