#!/usr/bin/env python3
"""Lanes at scale, with the scripted agent: spawn time against plain `git worktree add`, a batch
of 200 lanes run to completion with every transition checked, and the supervisor's cost with
200 idle (blocked) lanes. Prints a Markdown report.

Usage: cargo build --release --workspace && scripts/bench-lanes.py
Runs in a throwaway folder with its own HOME and TMUX_TMPDIR; removes it at the end.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CLAWPOOL = os.path.join(ROOT, "target", "release", "clawpool")
AGENT = os.path.join(ROOT, "target", "release", "clawpool-scripted-agent")

WORK = r'''
trust_dialog = true
[[prompt]]
steps = [{ do = "sleep", ms = 300 }, { do = "write_file", path = "out.txt", content = "done\n" }]
'''


def git(args, cwd):
    subprocess.run(["git"] + args, cwd=cwd, check=True, capture_output=True)


def make_repo(base, name):
    repo = os.path.join(base, name)
    os.makedirs(repo)
    git(["init", "-q", "-b", "main"], repo)
    git(["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "--allow-empty", "-m", "init"], repo)
    return repo


def write_config(base, scenario, trusted):
    path = os.path.join(base, "scenario.toml")
    with open(path, "w") as f:
        f.write(scenario)
    config = os.path.join(base, "config.toml")
    with open(config, "w") as f:
        if trusted:
            f.write(f'trusted_roots = ["{base}"]\n')
        f.write("[handshake]\nfinish_idle_ms = 500\n")
        f.write(f'[profiles.scripted.launch]\ncommand = "{AGENT}"\n')
        f.write(f'env = {{ CLAWPOOL_AGENT_SCENARIO = "{path}" }}\n')
    return config


def packet(base, n):
    path = os.path.join(base, "packet.json")
    lanes = [{"name": f"lane-{i:03d}", "prompt": f"task {i}"} for i in range(n)]
    with open(path, "w") as f:
        json.dump({"defaults": {"agent": "scripted"}, "lanes": lanes}, f)
    return path


def env(base):
    e = dict(os.environ)
    e["HOME"] = os.path.join(base, "home")
    e["TMUX_TMPDIR"] = os.path.join(base, "tmux")
    os.makedirs(e["HOME"], exist_ok=True)
    os.makedirs(e["TMUX_TMPDIR"], exist_ok=True)
    return e


def spawn_and_wait(base, repo, n, trusted=True):
    config = write_config(base, WORK, trusted)
    pkt = packet(base, n)
    started = time.perf_counter()
    out = subprocess.run(
        [CLAWPOOL, "spawn", pkt, "--repo", repo, "--config", config, "--concurrency", str(n),
         "--output-format", "json"],
        env=env(base), capture_output=True, text=True)
    return time.perf_counter() - started, out


def check_lanes(repo, n):
    """Every lane's own event log: the full boot sequence, in order, strictly increasing seq."""
    want = ["lane.started", "lane.trust_required", "lane.trust_resolved", "lane.ready",
            "lane.prompt_sent", "lane.prompt_accepted", "lane.finished"]
    complete = 0
    events = 0
    first, last = None, None
    for i in range(n):
        path = os.path.join(repo, ".git", "clawpool", "lanes", f"lane-{i:03d}", "events.jsonl")
        with open(path) as f:
            lane = [json.loads(l) for l in f]
        events += len(lane)
        seqs = [e["seq"] for e in lane]
        kinds = [e["kind"] for e in lane]
        at = [e["at_ms"] for e in lane]
        first = min(first or at[0], at[0])
        last = max(last or at[-1], at[-1])
        pos = 0
        ok = seqs == sorted(set(seqs))
        for k in want:
            if k in kinds[pos:]:
                pos = kinds.index(k, pos) + 1
            else:
                ok = False
        complete += ok
    return complete, events, (last - first) / 1000


def cpu_rss(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    return ticks / os.sysconf("SC_CLK_TCK"), rss


def main():
    base = tempfile.mkdtemp(prefix="clawpool-bench-lanes-")
    rows = []
    try:
        # 1. 50 lanes: spawn (worktrees + agents to finished) vs 50 `git worktree add`.
        a = os.path.join(base, "a")
        os.makedirs(a)
        repo = make_repo(a, "repo")
        t0 = time.perf_counter()
        for i in range(50):
            git(["worktree", "add", "-q", "--no-track", "-b", f"plain/{i}", os.path.join(a, "plain", str(i)), "main"], repo)
        plain = time.perf_counter() - t0
        shutil.rmtree(a)
        a = os.path.join(base, "a2")
        os.makedirs(a)
        repo = make_repo(a, "repo")
        took, out = spawn_and_wait(a, repo, 50)
        ok50, _, _ = check_lanes(repo, 50)
        rows.append(("50 lanes: `git worktree add` x50 in sequence", f"{plain:.2f} s", ""))
        rows.append(("50 lanes: `clawpool spawn` to all finished (worktrees + agents + handshakes)",
                     f"{took:.2f} s", f"{took / plain:.1f}x the plain worktree adds; exit {out.returncode}; {ok50}/50 complete"))

        # 2. 200 lanes to completion, every transition checked.
        b = os.path.join(base, "b")
        os.makedirs(b)
        repo = make_repo(b, "repo")
        took, out = spawn_and_wait(b, repo, 200)
        ok, events, span = check_lanes(repo, 200)
        rows.append(("200 lanes to finished, concurrency 200", f"{took:.1f} s",
                     f"exit {out.returncode}; {ok}/200 lanes with every transition in order"))
        rows.append(("state-file writes on events (each an atomic, fsync'd rewrite)", f"{events / span:.0f} /s",
                     f"{events} events over {span:.1f} s of lane activity; heartbeats add one write per lane every 5 s (200 lanes: 40 /s)"))

        # 3. 200 idle lanes: untrusted, so each blocks on its trust dialog and draws nothing.
        c = os.path.join(base, "c")
        os.makedirs(c)
        repo = make_repo(c, "repo")
        config = write_config(c, WORK, trusted=False)
        pkt = packet(c, 200)
        proc = subprocess.Popen(
            [CLAWPOOL, "spawn", pkt, "--repo", repo, "--config", config, "--concurrency", "200",
             "--output-format", "json"], env=env(c), stdout=subprocess.PIPE, text=True)
        blocked = 0
        for line in proc.stdout:
            if '"lane.blocked"' in line:
                blocked += 1
                if blocked == 200:
                    break
        time.sleep(5)  # let start-up work settle before measuring idleness
        cpu0, _ = cpu_rss(proc.pid)
        t0 = time.perf_counter()
        time.sleep(20)
        cpu1, rss = cpu_rss(proc.pid)
        window = time.perf_counter() - t0
        cpu = (cpu1 - cpu0) / window * 100
        rows.append(("200 idle lanes (blocked on trust): supervisor CPU", f"{cpu:.2f} % of a core",
                     f"{cpu / 200:.4f} % per lane, over {window:.0f} s"))
        rows.append(("200 idle lanes: supervisor RSS", f"{rss / 1024:.1f} MiB", f"{rss / 200:.0f} KiB per lane"))
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        subprocess.run(["pkill", "-f", AGENT], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
    print("| measurement | figure | notes |")
    print("|---|---:|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")


if __name__ == "__main__":
    sys.exit(main())
