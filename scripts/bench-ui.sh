#!/usr/bin/env bash
# What `clawpool ui` costs and how fast it follows: its CPU while 50 running lanes sit idle, and
# the time from a lane event (a `clawpool stop` ending the lane) to the dashboard showing it
# (median and 99th percentile). Prints a Markdown report; see docs/performance.md ("The
# dashboard") for how to read it.
#
#   cargo build --release --workspace && scripts/bench-ui.sh
#
# About three minutes. Works in a throwaway folder with its own HOME, XDG_CONFIG_HOME,
# XDG_STATE_HOME and TMUX_TMPDIR (private tmux servers only; the user's index of repositories
# is not touched) and removes it; stops every lane and server it started.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v tmux >/dev/null || { echo "tmux is not installed" >&2; exit 1; }
for bin in clawpool clawpool-scripted-agent; do
    [ -x "target/release/$bin" ] || { echo "target/release/$bin is not built: cargo build --release --workspace" >&2; exit 1; }
done

exec python3 - "$PWD" <<'PY'
import json, os, shutil, signal, subprocess, sys, tempfile, time

ROOT = sys.argv[1]
CLAWPOOL = os.path.join(ROOT, "target", "release", "clawpool")
AGENT = os.path.join(ROOT, "target", "release", "clawpool-scripted-agent")
LANES = 50
IDLE_WINDOW = 30.0
EVENTS = 40
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

# Each lane says one line, then works forever: its spinner redraws, and nothing else changes
# (lanes publish liveness through a held lock, not by rewriting their state files).
SCENARIO = '''
trust_dialog = true
[[prompt]]
steps = [{ do = "say", text = "on it" }, { do = "hang" }]
'''

base = tempfile.mkdtemp(prefix="clawpool-bench-ui-")
home = os.path.join(base, "home")
env = dict(os.environ, HOME=home, XDG_CONFIG_HOME=os.path.join(home, ".config"),
           XDG_STATE_HOME=os.path.join(home, ".local", "state"), TMUX_TMPDIR=os.path.join(base, "tmux"))
env.pop("TMUX", None)
os.makedirs(env["HOME"]); os.makedirs(env["TMUX_TMPDIR"])


def run(args, cwd=None, check=True):
    return subprocess.run(args, cwd=cwd, env=env, check=check, capture_output=True, text=True)


def tmux(*args):
    return run(["tmux", "-L", "bench-ui"] + list(args)).stdout


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def percentile(sorted_values, p):
    """The nearest-rank percentile: with fewer than 100 samples the 99th is the worst."""
    rank = max(1, -(-len(sorted_values) * p // 100))
    return sorted_values[int(rank) - 1]


def wait_for(what, ready, patience=120.0, every=0.05):
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(every)
    sys.exit(f"never saw {what}")


spawn = None
try:
    repo = os.path.join(base, "repo")
    os.makedirs(repo)
    run(["git", "init", "-q", "-b", "main"], repo)
    run(["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "--allow-empty", "-m", "init"], repo)
    scenario = os.path.join(base, "scenario.toml")
    open(scenario, "w").write(SCENARIO)
    config = os.path.join(base, "config.toml")
    open(config, "w").write(
        f'trusted_roots = ["{base}"]\n[profiles.scripted.launch]\ncommand = "{AGENT}"\n'
        f'env = {{ CLAWPOOL_AGENT_SCENARIO = "{scenario}" }}\n')
    packet = os.path.join(base, "packet.json")
    json.dump({"defaults": {"agent": "scripted"},
               "lanes": [{"name": f"lane-{i:02d}", "prompt": f"task {i}"} for i in range(LANES)]},
              open(packet, "w"))
    spawn = subprocess.Popen([CLAWPOOL, "spawn", packet, "--repo", repo, "--config", config,
                              "--concurrency", str(LANES), "--output-format", "json"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    running = set()
    for line in spawn.stdout:
        event = json.loads(line)
        if event.get("kind") == "lane.running":
            running.add(event["lane"])
            if len(running) == LANES:
                break

    # The dashboard alone in its pane: the pane's process is the dashboard.
    # Tall enough for every row: the list takes at most half the screen.
    tmux("new-session", "-d", "-s", "ui", "-x", "160", "-y", "120", "-c", repo,
         f"exec {CLAWPOOL} ui --config {config}")
    ui_pid = int(tmux("list-panes", "-t", "ui", "-F", "#{pane_pid}").strip())
    screen = lambda: tmux("capture-pane", "-p", "-t", "ui")
    wait_for("50 lanes on the dashboard", lambda: f"· {LANES} lanes" in screen())
    watching = "not watching" not in screen()
    time.sleep(5)  # settle: the first screen fetch and the lanes' first state-file writes

    before = cpu_seconds(ui_pid)
    start = time.monotonic()
    time.sleep(IDLE_WINDOW)
    idle_cpu = (cpu_seconds(ui_pid) - before) / (time.monotonic() - start) * 100
    rss = next(int(l.split()[1]) for l in open(f"/proc/{ui_pid}/status") if l.startswith("VmRSS"))

    # The same with no lane's screen shown: a filter that matches no lane leaves only the
    # one-second tick (which redraws the ages) to wake the dashboard.
    tmux("send-keys", "-t", "ui", "/", "no-such-lane", "Enter")
    wait_for("the filter applied", lambda: "no lane matches the filter" in screen())
    time.sleep(2)
    before = cpu_seconds(ui_pid)
    start = time.monotonic()
    time.sleep(IDLE_WINDOW)
    idle_cpu_unshown = (cpu_seconds(ui_pid) - before) / (time.monotonic() - start) * 100
    tmux("send-keys", "-t", "ui", "Escape")
    wait_for("every lane again", lambda: f"· {LANES} lanes" in screen())

    # Event to redraw: stop a lane shown on the dashboard; from the event's own time (`at_ms`
    # of `lane.failed` in its log) to the first capture of the dashboard that shows it.
    latencies = []
    for i in range(EVENTS):
        lane = f"lane-{i:02d}"
        stop = subprocess.Popen([CLAWPOOL, "stop", lane], cwd=repo, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        row = lambda: next((l for l in screen().splitlines() if f" {lane} " in l), "")
        wait_for(f"{lane} stopped on the dashboard", lambda: "failed" in row(), patience=30, every=0.005)
        seen_ms = time.time() * 1000
        stop.wait()
        log = os.path.join(repo, ".git", "clawpool", "lanes", lane, "events.jsonl")
        failed = [json.loads(l) for l in open(log) if '"lane.failed"' in l]
        latencies.append(seen_ms - failed[-1]["at_ms"])
    latencies.sort()

    print("| measurement | figure | notes |")
    print("|---|---:|---|")
    print(f"| dashboard CPU, {LANES} running lanes idle | {idle_cpu:.2f} % of a core | over {IDLE_WINDOW:.0f} s; "
          f"{'inotify' if watching else 'NOT watching (inotify unavailable): reading every second'} |")
    print(f"| dashboard CPU, {LANES} running lanes idle, no screen shown | {idle_cpu_unshown:.2f} % of a core | "
          f"a filter matching no lane: only the one-second tick wakes it |")
    print(f"| dashboard RSS | {rss / 1024:.1f} MiB | |")
    print(f"| lane event to the dashboard showing it: p50 | {percentile(latencies, 50):.0f} ms | "
          f"{EVENTS} lanes stopped one by one; includes reading the screen back (a `tmux capture-pane` every ~10 ms) |")
    print(f"| lane event to the dashboard showing it: p99 | {percentile(latencies, 99):.0f} ms | "
          f"nearest rank: the worst of {EVENTS} |")
finally:
    subprocess.run(["tmux", "-L", "bench-ui", "kill-server"], env=env, capture_output=True)
    if spawn is not None and spawn.poll() is None:
        spawn.send_signal(signal.SIGINT)
        try:
            spawn.wait(timeout=30)
        except subprocess.TimeoutExpired:
            spawn.kill()
    shutil.rmtree(base, ignore_errors=True)
PY
