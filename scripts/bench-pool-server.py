#!/usr/bin/env python3
"""The pool server's idle cost (issue #27): SCALE idle lanes (each blocked on its trust
dialog, so nothing is drawn and nothing is decided) under each owner a repository's lanes can
have, the supervisor's CPU over 65 s and its RSS per lane:

- `pty`: a foreground `clawpool spawn` with PTY lanes (the supervisor of the lanes benchmark);
- `tmux`: a foreground `clawpool spawn --transport tmux` (plus the private tmux server's CPU);
- `daemon`: `clawpool spawn --transport tmux --detach`, the repository's pool server;
- `adopted`: that daemon stopped (its tmux lanes live on) and a new `clawpool daemon` started,
  which adopts every lane: the pool server after a restart.

Usage: cargo build --release -p clawpool -p clawpool-tests --bins && scripts/bench-pool-server.py [SCALE]
(SCALE 200 by default; BENCH_IDLE_WINDOW=SECONDS shortens the window for a trial run,
CLAWPOOL_PROFILE=debug takes target/debug). Runs in a throwaway folder with its own HOME and TMUX_TMPDIR; removes
it at the end. Prints a Markdown table.
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
PROFILE = os.environ.get("CLAWPOOL_PROFILE", "release")
CLAWPOOL = os.path.join(ROOT, "target", PROFILE, "clawpool")
AGENT = os.path.join(ROOT, "target", PROFILE, "clawpool-scripted-agent")
# Longer than a lane's slowest periodic work (the 60 s commit and freshness sweeps).
IDLE_WINDOW = int(os.environ.get("BENCH_IDLE_WINDOW", "65"))
SETTLE = 5
TICK = os.sysconf("SC_CLK_TCK")

SCENARIO = '''
trust_dialog = true
[[prompt]]
steps = [{ do = "write_file", path = "out.txt", content = "done\\n" }]
'''


def git(args, cwd):
    subprocess.run(["git"] + args, cwd=cwd, check=True, capture_output=True)


def setup(base, scale):
    """A repository, a configuration that trusts nothing (every lane blocks on its dialog),
    a packet of `scale` lanes, and the environment every command runs in."""
    os.makedirs(base)
    repo = os.path.join(base, "repo")
    os.makedirs(repo)
    git(["init", "-q", "-b", "main"], repo)
    git(["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "--allow-empty", "-m", "init"], repo)
    scenario = os.path.join(base, "scenario.toml")
    with open(scenario, "w") as f:
        f.write(SCENARIO)
    config = os.path.join(base, "config.toml")
    with open(config, "w") as f:
        f.write(f'[profiles.scripted.launch]\ncommand = "{AGENT}"\n')
        f.write(f'env = {{ CLAWPOOL_AGENT_SCENARIO = "{scenario}" }}\n')
    packet = os.path.join(base, "packet.json")
    names = [f"lane-{i:04d}" for i in range(scale)]
    with open(packet, "w") as f:
        json.dump({"defaults": {"agent": "scripted"},
                   "lanes": [{"name": n, "prompt": f"task {n}"} for n in names]}, f)
    env = dict(os.environ)
    env["HOME"] = os.path.join(base, "home")
    env["TMUX_TMPDIR"] = os.path.join(base, "tmux")
    env["CLAWPOOL_CONFIG"] = config
    os.makedirs(env["HOME"])
    os.makedirs(env["TMUX_TMPDIR"])
    return repo, packet, names, env


def ticks_rss(pid):
    """A process's CPU so far (seconds) and its RSS (KiB)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    return (int(fields[11]) + int(fields[12])) / TICK, rss


def processes(base, match):
    """Pids of this run's processes (by their TMUX_TMPDIR) whose command line satisfies `match`."""
    tmux_dir = f"TMUX_TMPDIR={base}/tmux".encode()
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if tmux_dir not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if argv and match(argv):
            pids.append(int(pid))
    return pids


def is_daemon(argv):
    return os.path.basename(argv[0]) == "clawpool" and "daemon" in argv and "--stop" not in argv


def is_tmux(argv):
    return os.path.basename(argv[0]) == "tmux"


def wait_blocked(names, repo, env):
    """Blocks (on the repository's stream, `clawpool wait`) until every lane is blocked."""
    out = subprocess.run([CLAWPOOL, "wait", *names, "--until", "blocked", "--repo", repo,
                          "--timeout", "900", "--output-format", "json"],
                         env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"lanes did not all block: {out.stdout[-2000:]} {out.stderr[-2000:]}")


def measure(pids):
    """CPU (% of a core) of `pids` together over the idle window, and their RSS (KiB) at its end."""
    time.sleep(SETTLE)
    before = sum(ticks_rss(p)[0] for p in pids)
    t0 = time.perf_counter()
    time.sleep(IDLE_WINDOW)
    after = [ticks_rss(p) for p in pids]
    took = time.perf_counter() - t0
    return (sum(t for t, _ in after) - before) / took * 100, sum(r for _, r in after)


def kill_run(base, repo, env):
    """Ends whatever the run left: the daemon, the tmux server and its lanes, any agent."""
    subprocess.run([CLAWPOOL, "daemon", "--stop", "--repo", repo], env=env, capture_output=True)
    for pid in processes(base, lambda argv: True):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def foreground(base, scale, transport):
    repo, packet, names, env = setup(base, scale)
    args = [CLAWPOOL, "spawn", packet, "--repo", repo, "--concurrency", str(scale),
            "--output-format", "json"]
    if transport == "tmux":
        args += ["--transport", "tmux"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_blocked(names, repo, env)
        servers = processes(base, is_tmux) if transport == "tmux" else []
        cpu, rss = measure([proc.pid])
        tmux_cpu, tmux_rss = measure_once(servers)
        return cpu, rss, tmux_cpu, tmux_rss
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=600)
        kill_run(base, repo, env)


def measure_once(pids):
    """The tmux server's CPU over its own idle window (none when there is no server)."""
    if not pids:
        return None, None
    return measure(pids)


def daemon(base, scale):
    """`daemon` and `adopted` together: the same lanes, before and after the server's restart."""
    repo, packet, names, env = setup(base, scale)
    try:
        out = subprocess.run([CLAWPOOL, "spawn", packet, "--repo", repo, "--transport", "tmux",
                              "--detach", "--concurrency", str(scale), "--output-format", "json"],
                             env=env, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"spawn --detach failed: {out.stderr[-2000:]}")
        wait_blocked(names, repo, env)
        [server] = processes(base, is_daemon)
        first = measure([server])
        subprocess.run([CLAWPOOL, "daemon", "--stop", "--repo", repo], env=env, check=True,
                       capture_output=True)
        while os.path.exists(f"/proc/{server}"):
            time.sleep(0.05)  # the stopped daemon's exit gives no event to await
        log = open(os.path.join(base, "daemon2.log"), "w")
        restarted = subprocess.Popen([CLAWPOOL, "daemon", "--repo", repo], env=env,
                                     stdout=log, stderr=log, start_new_session=True)
        wait_blocked(names, repo, env)
        second = measure([restarted.pid])
        tmux = measure(processes(base, is_tmux))
        return first, second, tmux
    finally:
        kill_run(base, repo, env)


def main():
    scale = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    work = tempfile.mkdtemp(prefix="bench-pool-server-")
    rows = []

    def row(owner, cpu, rss, note=""):
        line = (f"| {owner} | {cpu:.3f} % | {cpu / scale * 1000:.2f} m% | {rss / 1024:.1f} MiB "
                f"| {rss / scale:.0f} KiB | {note} |")
        print(line, file=sys.stderr)
        rows.append(line)

    try:
        cpu, rss, _, _ = foreground(os.path.join(work, "pty"), scale, "pty")
        row("foreground `spawn`, PTY lanes", cpu, rss, "the lanes benchmark's supervisor")
        cpu, rss, tcpu, trss = foreground(os.path.join(work, "tmux"), scale, "tmux")
        row("foreground `spawn --transport tmux`", cpu, rss,
            f"its tmux server: {tcpu:.3f} % CPU, {trss / 1024:.1f} MiB")
        (dcpu, drss), (acpu, arss), (tcpu, trss) = daemon(os.path.join(work, "daemon"), scale)
        row("pool server (`spawn --transport tmux --detach`)", dcpu, drss, "")
        row("pool server restarted (`daemon` adopting every lane)", acpu, arss,
            f"the tmux server: {tcpu:.3f} % CPU, {trss / 1024:.1f} MiB")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{scale} idle lanes (each blocked on its trust dialog), {IDLE_WINDOW} s window, "
          f"{PROFILE} build:\n")
    print("| owner of the lanes | CPU (% of a core) | per lane | RSS | per lane | notes |")
    print("|---|---:|---:|---:|---:|---|")
    for line in rows:
        print(line)


if __name__ == "__main__":
    main()
