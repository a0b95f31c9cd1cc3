#!/usr/bin/env python3
"""A lane's start with and without its bubblewrap sandbox (issue #26): N scripted lanes (200 by
default) spawned into a fresh repository, once unsandboxed and once with `sandbox =
"workspace"`, at the spawn's default concurrency (4: each lane's start on its own, as far as
2 cores allow) and with every lane started at once (concurrency N). Per lane, from its own
event log: `lane.started` → `lane.ready` (worktree made, agent started — in its sandbox, after
the sandbox's probe — trust dialog answered, input box up) and `lane.started` →
`lane.prompt_accepted`. Prints a Markdown table of p50/p99 and the sandboxed/unsandboxed ratio.

Usage: cargo build --release --workspace --bins && scripts/bench-lane-start.py [N]
The same lanes, scenario and configuration as scripts/bench-lanes.py (whose helpers it uses);
runs under target/ (a sandbox's /tmp is its own) and removes its folder at the end.
"""
import importlib.util
import os
import shutil
import sys
import tempfile
import json

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
spec = importlib.util.spec_from_file_location("bench_lanes", os.path.join(ROOT, "scripts", "bench-lanes.py"))
lanes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lanes)


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def starts(repo, n):
    """Per lane: ms from lane.started to lane.ready and to lane.prompt_accepted."""
    ready, accepted = [], []
    for i in range(n):
        path = os.path.join(repo, ".git", "clawpool", "lanes", f"lane-{i:03d}", "events.jsonl")
        with open(path) as f:
            at = {}
            for line in f:
                e = json.loads(line)
                at.setdefault(e["kind"], e["at_ms"])
        ready.append(at["lane.ready"] - at["lane.started"])
        accepted.append(at["lane.prompt_accepted"] - at["lane.started"])
    return ready, accepted


def run(base, name, n, concurrency, sandboxed):
    lanes.SANDBOX = sandboxed
    folder = os.path.join(base, name)
    os.makedirs(folder)
    repo = lanes.make_repo(folder, "repo")
    config = lanes.write_config(folder, lanes.WORK, True)
    pkt = lanes.packet(folder, n)
    out = lanes.subprocess.run(
        [lanes.CLAWPOOL, "spawn", pkt, "--repo", repo, "--config", config, "--concurrency", str(concurrency),
         "--output-format", "json"], env=lanes.env(folder), capture_output=True, text=True)
    complete, _, _ = lanes.check_lanes(repo, n)
    ready, accepted = starts(repo, n)
    lanes.kill_leftover_agents(folder)
    shutil.rmtree(folder, ignore_errors=True)
    return out.returncode, complete, ready, accepted


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    base = tempfile.mkdtemp(prefix="clawpool-bench-start-", dir=os.path.join(ROOT, "target"))
    rows = []
    try:
        for concurrency in (4, n):
            got = {}
            for sandboxed in (False, True):
                name = f"c{concurrency}-{'sandbox' if sandboxed else 'plain'}"
                code, complete, ready, accepted = run(base, name, n, concurrency, sandboxed)
                got[sandboxed] = (ready, accepted)
                print(f"{name}: exit {code}, {complete}/{n} complete", file=sys.stderr, flush=True)
            for label, k in (("started → ready", 0), ("started → prompt_accepted", 1)):
                plain, boxed = got[False][k], got[True][k]
                p50 = (percentile(plain, 50), percentile(boxed, 50))
                p99 = (percentile(plain, 99), percentile(boxed, 99))
                rows.append((f"{n} lanes, concurrency {concurrency}: {label}",
                             f"{p50[0]:.0f} / {p99[0]:.0f} ms", f"{p50[1]:.0f} / {p99[1]:.0f} ms",
                             f"{p50[1] / p50[0]:.1f}x / {p99[1] / p99[0]:.1f}x"))
                print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print("| per lane | unsandboxed p50 / p99 | sandboxed p50 / p99 | ratio p50 / p99 |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(f"| {' | '.join(r)} |")


if __name__ == "__main__":
    sys.exit(main())
