#!/usr/bin/env python3
"""What Claude Code's spinner animation costs (the Claude Code profile's `reduced_motion`,
docs/profiles.md): N real Claude Code 2.1.330 sessions, each given one prompt whose answer the
scripted model server holds back, once animating and once with `prefersReducedMotion`. For
each run: the CPU of all the sessions while they wait for their answers (per session, in % of
one core), and Claude Code's own turn end — the model server's last byte of a session's answer
to that session's `Stop` command hook (a `date` appended to a file, no clawpool in the way) —
p50 and max. Prints a Markdown table.

Usage: cargo build --release --workspace && scripts/install-agents.sh
       scripts/bench-claude-motion.py [N ...]        (default: 10 20)
Everything (HOME, the tmux server on its own socket, the repository, the model server) lives in
a temporary folder, removed at the end.
"""
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("bench_peers", os.path.join(HERE, "bench-peers.py"))
bp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bp)
TICK = os.sysconf("SC_CLK_TCK")
# Seconds over which the waiting sessions' CPU is measured.
CPU_WINDOW_S = 5


def claude_cpu_ticks():
    """utime + stime of every Claude Code process now."""
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"claude" not in f.read().split(b"\0")[0]:
                    continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            continue
    return total


def run(n, reduced):
    w = tempfile.mkdtemp(prefix="clawpool-bench-motion-")
    tmux = None
    server = None
    try:
        repo = os.path.join(w, "repo")
        bp.make_repo(repo)
        folders = []
        for i in range(n):
            path = os.path.join(w, "wt", f"s{i:02d}")
            bp.git(["worktree", "add", "-q", "-b", f"s{i:02d}", path], repo)
            folders.append(os.path.realpath(path))
        home = os.path.join(w, "home")
        bp.seed_claude_home(home, folders)
        stops = os.path.join(w, "stops.log")
        settings = os.path.join(w, "settings.json")
        with open(settings, "w") as f:
            hook = {"type": "command", "command": f'echo "$(date +%s%3N) $PWD" >> {stops}'}
            json.dump({**({"prefersReducedMotion": True} if reduced else {}),
                       "hooks": {"Stop": [{"hooks": [hook]}]}}, f)
        # Every session is prompted (one after another) and measured before the first answer.
        delay_ms = (2 * n + CPU_WINDOW_S + 15) * 1000
        server = bp.ModelServer(os.path.join(w, "model"), delay_ms, n)
        env = {"HOME": home, "PATH": bp.agent_path(), "TERM": "xterm-256color",
               "ANTHROPIC_API_KEY": bp.API_KEY, "ANTHROPIC_BASE_URL": server.url,
               "DISABLE_AUTOUPDATER": "1", "TMUX_TMPDIR": os.path.join(w, "tmux")}
        os.makedirs(env["TMUX_TMPDIR"])
        tmux = bp.Tmux(os.path.join(w, "tmux", "bench.sock"), env)
        tmux.run("new-session", "-d", "-s", "m", "-x", "120", "-y", "40", "sleep 2147483647")
        for i, folder in enumerate(folders):
            tmux.run("new-window", "-t", "m", "-n", f"w{i}", "-c", folder,
                     f"exec {bp.CLAUDE} --settings {settings}")
        for i in range(n):
            target = f"m:w{i}"
            deadline = time.time() + 90
            while time.time() < deadline:
                screen = tmux.run("capture-pane", "-p", "-t", target).stdout
                if any(k in screen for k in ("? for shortcuts", "auto mode", "\u276f\u00a0")):
                    break
                time.sleep(0.2)
            time.sleep(0.5)  # the input takes keys once it has painted
            tmux.run("send-keys", "-t", target, "-l", bp.PROMPT)
            time.sleep(0.2)
            tmux.run("send-keys", "-t", target, "Enter")
        time.sleep(3)
        before, started = claude_cpu_ticks(), time.time()
        time.sleep(CPU_WINDOW_S)
        cpu = (claude_cpu_ticks() - before) / TICK / (time.time() - started) * 100 / n
        deadline = time.time() + delay_ms / 1000 + 120
        while time.time() < deadline:
            if os.path.exists(stops) and len(open(stops).read().splitlines()) >= n:
                break
            time.sleep(0.5)
        time.sleep(2)
        last = server.last_bytes(folders)
        stop = {}
        for line in open(stops):
            at, folder = line.split(None, 1)
            stop.setdefault(os.path.realpath(folder.strip()), int(at))
        ends = sorted(stop[f] - last[f] for f in folders if f in stop and f in last)
        return {"n": n, "reduced": reduced, "cpu": cpu, "sessions": len(ends),
                "p50": bp.percentile(ends, 50), "max": max(ends) if ends else None}
    finally:
        if tmux:
            tmux.kill()
        if server:
            server.stop()
        shutil.rmtree(w, ignore_errors=True)


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [10, 20]
    results = []
    for n in sizes:
        for reduced in (False, True):
            load = bp.settle()
            r = run(n, reduced)
            r["load"] = round(load, 2)
            print(json.dumps(r), file=sys.stderr, flush=True)
            results.append(r)
    print("| N | spinner | CPU per waiting session | last byte → Stop hook: p50 / max | sessions | load at start |")
    print("|---:|---|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['n']} | {'still (prefersReducedMotion)' if r['reduced'] else 'animated'} | "
              f"{r['cpu']:.1f} % | {r['p50']} / {r['max']} ms | {r['sessions']} | {r['load']} |")


if __name__ == "__main__":
    main()
