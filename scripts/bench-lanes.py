#!/usr/bin/env python3
"""Lanes at scale, with the scripted agent: spawn time against plain `git worktree add`, a batch
of 200 lanes run to completion with every transition checked, and the supervisor's cost with
200 idle (blocked) lanes; then the same at SCALE lanes (1,000 by default): SCALE sequential
`git worktree add` against `clawpool spawn` of SCALE lanes with `--concurrency SCALE`, the
per-lane creation cost by hundreds for both, and SCALE idle lanes for 65 s. Prints a Markdown
report.

Usage: cargo build --release --workspace && scripts/bench-lanes.py [--sandbox] [SCALE]
--sandbox runs every lane in its bubblewrap sandbox (`sandbox = "workspace"`, docs/sandbox.md),
for the same figures with it.
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
# Seconds idle lanes are measured over: longer than a lane's slowest periodic work (the 60 s
# commit and freshness sweeps), so that it is counted.
IDLE_WINDOW = 65
CLAWPOOL = os.path.join(ROOT, "target", "release", "clawpool")
AGENT = os.path.join(ROOT, "target", "release", "clawpool-scripted-agent")
# `--sandbox`: every lane in its bubblewrap sandbox.
SANDBOX = "--sandbox" in sys.argv[1:]
ARGS = [a for a in sys.argv[1:] if a != "--sandbox"]

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
        if SANDBOX:
            f.write('sandbox = "workspace"\n')
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


def creation_costs_by_hundreds(costs):
    """Mean cost per lane (ms) of lanes 1-100, 101-200, ... from per-lane costs in seconds."""
    return [sum(costs[i:i + 100]) / len(costs[i:i + 100]) * 1000 for i in range(0, len(costs), 100)]


def spawn_creation_costs(repo, n):
    """Per-lane worktree creation cost inside `clawpool spawn`, from the files each creation
    writes last: creations are serialised by the repository's worktree lock, so the time
    between one lane's checkout finishing (its index written by `git reset --hard`) and the
    next one's is what the next creation cost, lock hand-over included. The first lane has no
    predecessor and is left out."""
    admin = os.path.join(repo, ".git", "worktrees")
    done = sorted(os.stat(os.path.join(admin, d, "index")).st_mtime_ns for d in os.listdir(admin))
    assert len(done) == n, f"{len(done)} worktrees registered, expected {n}"
    return [(b - a) / 1e9 for a, b in zip(done, done[1:])]


def idle_lanes(base, name, n, settle, window):
    """n untrusted lanes, each blocked on its trust dialog: the supervisor's CPU over `window`
    seconds (after all report blocked and `settle` seconds more) and its RSS."""
    c = os.path.join(base, name)
    os.makedirs(c)
    repo = make_repo(c, "repo")
    config = write_config(c, WORK, trusted=False)
    pkt = packet(c, n)
    proc = subprocess.Popen(
        [CLAWPOOL, "spawn", pkt, "--repo", repo, "--config", config, "--concurrency", str(n),
         "--output-format", "json"], env=env(c), stdout=subprocess.PIPE, text=True)
    blocked = 0
    for line in proc.stdout:
        if '"lane.blocked"' in line:
            blocked += 1
            if blocked == n:
                break
    time.sleep(settle)  # let start-up work settle before measuring idleness
    cpu0, _ = cpu_rss(proc.pid)
    t0 = time.perf_counter()
    time.sleep(window)
    cpu1, rss = cpu_rss(proc.pid)
    took = time.perf_counter() - t0
    cpu = (cpu1 - cpu0) / took * 100
    proc.send_signal(signal.SIGINT)
    # Read on to the end: the supervisor's last events would otherwise fill the pipe and
    # block it on its way out.
    proc.communicate(timeout=600)
    return cpu, rss, took


def kill_leftover_agents(base):
    """Kills, by pid, any scripted agent still running in one of this run's lane folders (a
    supervisor that crashed leaves its agents); nobody else's processes are looked at twice."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if exe == AGENT and cwd.startswith(base + os.sep):
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


class Rows(list):
    """The report's rows, each also shown on stderr as it is measured, so that a run that
    fails later still tells what it measured."""

    def append(self, row):
        print(" | ".join(row), file=sys.stderr, flush=True)
        super().append(row)


def main():
    scale = int(ARGS[0]) if ARGS else 1000
    # A sandbox's /tmp is its own: the agent's scenario must be outside it.
    base = tempfile.mkdtemp(prefix="clawpool-bench-lanes-", dir=os.path.join(ROOT, "target") if SANDBOX else None)
    rows = Rows()
    hundreds = []
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
                     f"{events} events over {span:.1f} s of lane activity; no heartbeat: nothing rewrites an idle lane's state file"))

        # 3. 200 idle lanes: untrusted, so each blocks on its trust dialog and draws nothing.
        # The window is longer than the lanes' slowest sweeps (commits and freshness, every
        # 60 s): every lane's periodic work is in it at least once.
        cpu, rss, window = idle_lanes(base, "c", 200, 5, IDLE_WINDOW)
        rows.append(("200 idle lanes (blocked on trust): supervisor CPU", f"{cpu:.2f} % of a core",
                     f"{cpu / 200:.4f} % per lane, over {window:.0f} s"))
        rows.append(("200 idle lanes: supervisor RSS", f"{rss / 1024:.1f} MiB", f"{rss / 200:.0f} KiB per lane"))

        # 4. SCALE lanes: sequential `git worktree add` (each call timed), then `clawpool spawn`
        #    of SCALE lanes at once, to all finished, every lane's transitions checked.
        d = os.path.join(base, "d")
        os.makedirs(d)
        repo = make_repo(d, "repo")
        plain_costs = []
        for i in range(scale):
            t0 = time.perf_counter()
            git(["worktree", "add", "-q", "--no-track", "-b", f"plain/{i}", os.path.join(d, "plain", str(i)), "main"], repo)
            plain_costs.append(time.perf_counter() - t0)
        plain = sum(plain_costs)
        # The plain worktrees stay until the end (the whole folder is removed then): on ext4
        # without a journal the inode allocator skips inodes freed in the last minutes, so
        # deleting them here made every file the spawn creates next scan past ~10,000 of them
        # (a 300-lane spawn: 5.95 s of supervisor CPU instead of 4.22 s).
        e = os.path.join(base, "e")
        os.makedirs(e)
        repo = make_repo(e, "repo")
        took, out = spawn_and_wait(e, repo, scale)
        ok, events, span = check_lanes(repo, scale)
        ours_costs = spawn_creation_costs(repo, scale)
        rows.append((f"{scale} lanes: `git worktree add` x{scale} in sequence", f"{plain:.1f} s", "baseline"))
        rows.append((f"{scale} lanes: `clawpool spawn --concurrency {scale}` to all finished", f"{took:.1f} s",
                     f"{took / plain:.2f}x the plain worktree adds; exit {out.returncode}; "
                     f"{ok}/{scale} lanes with every transition in order"))
        rows.append((f"{scale} lanes: worktree creation inside the spawn (first to last checkout)",
                     f"{sum(ours_costs):.1f} s", f"{sum(ours_costs) / plain:.2f}x the plain worktree adds"))
        git_hundreds = creation_costs_by_hundreds(plain_costs)
        # ours_costs starts at lane 2: pad so that hundreds line up with lane numbers.
        ours_hundreds = creation_costs_by_hundreds([ours_costs[0]] + ours_costs)
        hundreds = list(zip(git_hundreds, ours_hundreds))

        # 5. SCALE idle lanes.
        cpu, rss, window = idle_lanes(base, "f", scale, 5, IDLE_WINDOW)
        rows.append((f"{scale} idle lanes (blocked on trust): supervisor CPU", f"{cpu:.2f} % of a core",
                     f"{cpu / scale:.4f} % per lane, over {window:.0f} s"))
        rows.append((f"{scale} idle lanes: supervisor RSS", f"{rss / 1024:.1f} MiB", f"{rss / scale:.0f} KiB per lane"))
    finally:
        kill_leftover_agents(base)
        shutil.rmtree(base, ignore_errors=True)
    print("| measurement | figure | notes |")
    print("|---|---:|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")
    if hundreds:
        print()
        print("Worktree creation cost per lane, mean by hundreds (`git worktree add` timed per call; "
              "clawpool from the interval between consecutive checkouts inside the spawn):")
        print()
        print("| lanes | `git worktree add` | clawpool spawn | clawpool / git |")
        print("|---|---:|---:|---:|")
        for k, (g, o) in enumerate(hundreds):
            print(f"| {k * 100 + 1}-{min((k + 1) * 100, scale)} | {g:.1f} ms | {o:.1f} ms | {o / g:.2f} |")
        g0, o0 = hundreds[0]
        g1, o1 = hundreds[-1]
        print(f"| last hundred / first hundred | {g1 / g0:.2f}x | {o1 / o0:.2f}x | |")


if __name__ == "__main__":
    sys.exit(main())
