#!/usr/bin/env python3
"""The repository's event stream at scale, with the scripted agent (issue #27, "Measure"):

1. SCALE lanes (1,000 by default) spawned at once while `clawpool events --all --follow
   --output-format json` subscribes: each event's delay from its write (`at_ms`, taken just
   before the append) to the moment the subscriber's line is read here, p50/p99/max; every
   event checked to arrive once, cursors strictly increasing. `clawpool wait` on all SCALE
   lanes `--until ended` is timed too.
2. `clawpool board --output-format json` of the SCALE finished lanes: median of 5 runs.
3. 100 `clawpool wait --until finished` clients on 100 idle lanes (running, the agent asleep):
   their CPU over 10 s, summed (no polling: it should be 0 ticks).

Usage: cargo build --release -p clawpool -p clawpool-tests --bins && scripts/bench-stream.py [SCALE]
       (CLAWPOOL_PROFILE=debug to use target/debug)
Runs in a throwaway folder with its own HOME and TMUX_TMPDIR; removes it at the end.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PROFILE = os.environ.get("CLAWPOOL_PROFILE", "release")
CLAWPOOL = os.path.join(ROOT, "target", PROFILE, "clawpool")
AGENT = os.path.join(ROOT, "target", PROFILE, "clawpool-scripted-agent")

WORK = r'''
[[prompt]]
steps = [{ do = "sleep", ms = 300 }, { do = "write_file", path = "out.txt", content = "done\n" }]
'''
IDLE = r'''
[[prompt]]
steps = [{ do = "sleep", ms = 600000 }]
'''


def git(args, cwd):
    subprocess.run(["git"] + args, cwd=cwd, check=True, capture_output=True)


def make_repo(base):
    repo = os.path.join(base, "repo")
    os.makedirs(repo)
    git(["init", "-q", "-b", "main"], repo)
    git(["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "--allow-empty", "-m", "init"], repo)
    return repo


def write_config(base, scenario):
    path = os.path.join(base, "scenario.toml")
    with open(path, "w") as f:
        f.write(scenario)
    config = os.path.join(base, "config.toml")
    with open(config, "w") as f:
        f.write(f'trusted_roots = ["{base}"]\n[handshake]\nfinish_idle_ms = 500\n')
        f.write(f'[profiles.scripted.launch]\ncommand = "{AGENT}"\n')
        f.write(f'env = {{ CLAWPOOL_AGENT_SCENARIO = "{path}" }}\n')
    return config


def packet(base, names):
    path = os.path.join(base, "packet.json")
    with open(path, "w") as f:
        json.dump({"defaults": {"agent": "scripted"},
                   "lanes": [{"name": n, "prompt": "go"} for n in names]}, f)
    return path


def env(base):
    e = dict(os.environ)
    e["HOME"] = os.path.join(base, "home")
    e["TMUX_TMPDIR"] = os.path.join(base, "tmux")
    os.makedirs(e["HOME"], exist_ok=True)
    os.makedirs(e["TMUX_TMPDIR"], exist_ok=True)
    return e


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def stream_delays(base, repo, scale):
    """Part 1: the subscriber's delays while SCALE lanes run."""
    e = env(base)
    config = write_config(base, WORK)
    names = [f"lane-{i:04d}" for i in range(scale)]
    pkt = packet(base, names)
    sub = subprocess.Popen([CLAWPOOL, "events", "--all", "--follow", "--output-format", "json",
                            "--repo", repo], stdout=subprocess.PIPE, env=e)
    received = []

    def read():
        for line in sub.stdout:
            received.append((time.time() * 1000, line))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    waiter = subprocess.Popen([CLAWPOOL, "wait", *names, "--until", "ended", "--output-format",
                               "json", "--repo", repo], stdout=subprocess.PIPE, env=e)
    started = time.perf_counter()
    spawn = subprocess.run([CLAWPOOL, "spawn", pkt, "--repo", repo, "--config", config,
                            "--concurrency", str(scale), "--output-format", "json"],
                           env=e, capture_output=True, text=True)
    spawned = time.perf_counter() - started
    out, _ = waiter.communicate(timeout=600)
    waited = time.perf_counter() - started
    wait_doc = json.loads(out)
    # Whatever the lanes write after they end (their last commit looks) has landed by now.
    time.sleep(1)
    sub.terminate()
    sub.wait()
    reader.join(timeout=5)
    events = [(t, json.loads(l)) for t, l in received]
    delays = [t - ev["at_ms"] for t, ev in events]
    cursors = [ev["cursor"] for _, ev in events]
    keys = [(ev["lane"], ev["seq"]) for _, ev in events]
    logged = 0
    for n in names:
        with open(os.path.join(repo, ".git", "clawpool", "lanes", n, "events.jsonl")) as f:
            logged += sum(1 for _ in f)
    return {
        "spawn_exit": spawn.returncode,
        "spawn_s": spawned,
        "wait_kind": wait_doc["kind"],
        "wait_lanes": len(wait_doc["lanes"]),
        "wait_s": waited,
        "events": len(events),
        "logged": logged,
        "unique": len(set(keys)) == len(keys),
        "ordered": all(a < b for a, b in zip(cursors, cursors[1:])),
        "p50": pct(delays, 50),
        "p99": pct(delays, 99),
        "max": max(delays),
    }


def board_time(base, repo):
    times = []
    for _ in range(5):
        started = time.perf_counter()
        out = subprocess.run([CLAWPOOL, "board", "--output-format", "json", "--repo", repo],
                             env=env(base), capture_output=True)
        times.append((time.perf_counter() - started) * 1000)
        assert out.returncode == 0, out.stderr
    return statistics.median(times), len(json.loads(out.stdout)["lanes"])


def idle_waiters(base):
    """Part 3: 100 wait clients on 100 running, idle lanes."""
    c = os.path.join(base, "idle")
    os.makedirs(c)
    repo = make_repo(c)
    e = env(c)
    config = write_config(c, IDLE)
    names = [f"idle-{i:03d}" for i in range(100)]
    pkt = packet(c, names)
    spawn = subprocess.Popen([CLAWPOOL, "spawn", pkt, "--repo", repo, "--config", config,
                              "--concurrency", "100", "--output-format", "json"],
                             env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    running = subprocess.run([CLAWPOOL, "wait", *names, "--until", "running", "--timeout", "300",
                              "--repo", repo], env=e, capture_output=True)
    assert running.returncode == 0, running.stdout
    waiters = [subprocess.Popen([CLAWPOOL, "wait", n, "--until", "finished", "--repo", repo],
                                env=e, stdout=subprocess.DEVNULL) for n in names]
    time.sleep(3)  # each has opened the stream and read its lane's log
    before = sum(cpu_ticks(w.pid) for w in waiters)
    time.sleep(10)
    after = sum(cpu_ticks(w.pid) for w in waiters)
    alive = sum(w.poll() is None for w in waiters)
    for w in waiters:
        w.terminate()
    spawn.terminate()
    spawn.wait(timeout=60)
    for w in waiters:
        w.wait()
    return after - before, alive, os.sysconf("SC_CLK_TCK")


def main():
    scale = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    base = tempfile.mkdtemp(prefix="clawpool-bench-stream-")
    try:
        repo = make_repo(base)
        s = stream_delays(base, repo, scale)
        board_ms, board_lanes = board_time(base, repo)
        ticks, alive, hz = idle_waiters(base)
        print(f"| measurement | figure | notes |")
        print(f"|---|---:|---|")
        print(f"| {scale} lanes: write → `events --all --follow` subscriber, p50 | {s['p50']:.1f} ms | "
              f"{s['events']} events received of {s['logged']} in the lanes' logs; each once: {s['unique']}; "
              f"cursors increasing: {s['ordered']} |")
        print(f"| same, p99 | {s['p99']:.1f} ms | max {s['max']:.1f} ms; spawn exit {s['spawn_exit']} in {s['spawn_s']:.1f} s |")
        print(f"| `wait` on {scale} lanes `--until ended` | {s['wait_s']:.1f} s from spawn start | "
              f"{s['wait_kind']}, {s['wait_lanes']} lanes |")
        print(f"| `board --output-format json`, {board_lanes} lanes, median of 5 | {board_ms:.0f} ms | |")
        print(f"| 100 `wait` clients on 100 idle lanes, CPU over 10 s | {ticks} ticks ({ticks / hz * 1000:.0f} ms) | "
              f"{alive}/100 still waiting |")
    finally:
        subprocess.run(["tmux", "-L", "default", "kill-server"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
