#!/usr/bin/env python3
"""clawpool against ccmanager 4.2.3, each watching N real Claude Code 2.1.330 sessions (offline,
against clawpool-model-server), N = 10 and 20 by default. Run through scripts/bench-peers.sh,
which installs ccmanager (and the Bun it needs) pinned into a scratch folder and passes it here.

For each tool and N, in one run:
- detection latency: from the agent's change to the tool's own report of it, p50/p99 over all
  sessions. Both tools start Claude Code through scripts/bench-peers-tap.py, a PTY relay that
  records every chunk with its time; replayed through pyte afterwards, it gives when the
  screen changed: "starts working" (`esc to interrupt` first on screen after the prompt's
  Enter) and "turn ends" (the reply first on screen). A tool that takes facts from the agent
  itself (clawpool, through Claude Code's hooks) may rightly report a turn's end before the
  reply is painted (Claude Code runs its Stop hook once the answer is in), so its turn ends
  are timed from the model's clock instead: the scripted model server's last byte of the
  session's answer (`--timings`). ccmanager reads only the screen and keeps the screen's
  clock. The reports: ccmanager's status hook (`busy`, `idle`; the hook stamps
  `date +%s%3N`), clawpool's lane event (`lane.prompt_accepted`, `lane.finished`; `at_ms`);
- the tool's CPU (its own process, not the agents') while all N sessions are working, and
  while N sessions sit on a screen that does not change;
- its RSS per session;
- missed or wrong state changes: each session must report working, then its turn's end, once;
  a report of the turn's end while the agent is still working, or any further report, is a
  wrong one (the table counts reports, over all sessions).

Usage: scripts/bench-peers.sh [N ...]   (not directly: it needs the scratch folder)
Everything runs under the scratch folder: HOME, the tmux server (its own socket), the
repositories; every process started is stopped by its pid or its tmux server.
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CLAWPOOL = os.path.join(ROOT, "target", "release", "clawpool")
MODEL_SERVER = os.path.join(ROOT, "target", "release", "clawpool-model-server")
CLAUDE = os.path.join(ROOT, ".agents", "node_modules", ".bin", "claude")
API_KEY = "sk-ant-fake"
PROMPT = "say done"
REPLY = "Done."
TAP = os.path.join(ROOT, "scripts", "bench-peers-tap.py")
TICK = os.sysconf("SC_CLK_TCK")
# Seconds of still screens the idle CPU is measured over.
IDLE_WINDOW_S = 20
# clawpool starts its N lanes at once, so with one answer delay for all their N turns end
# within a few seconds of each other, while ccmanager's sessions are opened one after another
# through its menu (about 5 s apart) and their turns end as far apart. With
# CLAWPOOL_BENCH_TURN_SPACING_MS=5000 clawpool's k-th answer is held that much longer per k,
# so that its turns end as spread out as ccmanager's; 0 (the default) keeps them together.
TURN_SPACING_MS = int(os.environ.get("CLAWPOOL_BENCH_TURN_SPACING_MS", "0"))


def now_ms():
    return time.time_ns() // 1_000_000


def git(args, cwd):
    subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b"] + args, cwd=cwd,
                   check=True, capture_output=True)


def agent_path():
    """The folders holding node and git, then /usr/bin:/bin (as the e2e tests do)."""
    dirs = []
    for tool in ["node", "git"]:
        for d in os.environ.get("PATH", "").split(":"):
            if d and os.path.isfile(os.path.join(d, tool)) and d not in dirs:
                dirs.append(d)
                break
    for d in ["/usr/bin", "/bin"]:
        if d not in dirs:
            dirs.append(d)
    return ":".join(dirs)


def write_agent_wrapper(w):
    """`<w>/bin/claude`: the real Claude Code under scripts/bench-peers-tap.py, which writes
    when the session's screen changed to `<w>/taps/<folder name>.log`."""
    bin_dir = os.path.join(w, "bin")
    taps = os.path.join(w, "taps")
    os.makedirs(bin_dir)
    os.makedirs(taps)
    wrapper = os.path.join(bin_dir, "claude")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\n"
                "# Without a terminal (a version probe) there is no screen to watch.\n"
                f'[ -t 0 ] || exec "{CLAUDE}" "$@"\n'
                f'exec "{sys.executable}" "{TAP}" "{taps}/$(basename "$PWD").rec" -- "{CLAUDE}" "$@"\n')
    os.chmod(wrapper, 0o755)
    return bin_dir, taps


# Claude Code's spinner line under a prompt's echo, animated ("✻ Churning…") or still ("●
# Churning…", with prefersReducedMotion), as clawpool's profile has it.
SPINNER = re.compile(r"^\s*[·✢✳✶✻✽*●] [A-Z][^\W\d_'-]*(?:['-][^\W\d_]*)*'?…", re.M)


def screen_times(path):
    """Replays a tap record through pyte: {'enter': ms} when the prompt's Enter reached the
    agent, {'working': ms} when `esc to interrupt` first shows after it, {'taken': ms} when
    the screen first shows the prompt taken (its echo above the input and a working
    indicator: the spinner line or `esc to interrupt`), {'ended': ms} when the reply first
    shows after that."""
    import pyte
    import struct
    seen = {}
    if not os.path.exists(path):
        return seen
    with open(path, "rb") as f:
        data = f.read()
    screen, stream = None, None
    typed, armed, at = b"", False, 0
    while at + 13 <= len(data):
        kind = data[at:at + 1]
        ms, length = struct.unpack("<QI", data[at + 1:at + 13])
        chunk = data[at + 13:at + 13 + length]
        at += 13 + length
        if kind == b"W":
            rows, cols = struct.unpack("<HH", chunk)
            if screen is None:
                screen = pyte.Screen(cols, rows)
                stream = pyte.ByteStream(screen)
            else:
                screen.resize(rows, cols)
        elif kind == b"I" and not armed:
            typed = (typed + chunk)[-256:]
            armed = b"\r" in chunk and PROMPT.encode() in typed
            if armed:
                seen["enter"] = ms
        elif kind == b"O" and stream is not None:
            stream.feed(chunk)
            if not armed or "ended" in seen:
                continue
            text = "\n".join(screen.display)
            if "taken" not in seen:
                # The echo is a row above the input box's rule; the input row itself (which
                # held the draft) is the one between the last two rules.
                rules = [i for i, row in enumerate(screen.display) if row.startswith("───")]
                above = screen.display[:rules[-2]] if len(rules) >= 2 else []
                echo = any(row.startswith("❯") and PROMPT in row for row in above)
                if echo and ("esc to interrupt" in text or SPINNER.search("\n".join(above))):
                    seen["taken"] = ms
            if "working" not in seen:
                if "esc to interrupt" in text:
                    seen["working"] = ms
            elif REPLY in text:
                # The whole reply arrives at once after the script's delay, and it is the
                # turn's last output: its first paint is the turn's end on screen.
                seen["ended"] = ms
    return seen


def read_taps(taps, folders):
    """Per folder: {'working': ms, 'ended': ms} as its screen showed them."""
    return {f: screen_times(os.path.join(taps, os.path.basename(f) + ".rec")) for f in folders}


def turns_ended(taps, folders):
    """Whether every session's screen shows its reply (a cheap look: the reply's bytes)."""
    for f in folders:
        path = os.path.join(taps, os.path.basename(f) + ".rec")
        if not os.path.exists(path):
            return False
        with open(path, "rb") as fh:
            if REPLY.encode() not in fh.read():
                return False
    return True


def wait_for_turn_ends(taps, folders, timeout_s):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if turns_ended(taps, folders):
            return
        time.sleep(2)


def make_repo(path):
    os.makedirs(path)
    git(["init", "-q", "-b", "main"], path)
    with open(os.path.join(path, "README.md"), "w") as f:
        f.write("# bench\n")
    git(["add", "."], path)
    git(["commit", "-q", "-m", "init"], path)


def seed_claude_home(home, trusted):
    os.makedirs(home, exist_ok=True)
    config = {"hasCompletedOnboarding": True, "theme": "dark", "numStartups": 3,
              "customApiKeyResponses": {"approved": [API_KEY], "rejected": []},
              "projects": {p: {"hasTrustDialogAccepted": True} for p in trusted}}
    with open(os.path.join(home, ".claude.json"), "w") as f:
        json.dump(config, f)


class ModelServer:
    """clawpool-model-server answering every task request with REPLY after `delay_ms`."""

    def __init__(self, folder, delay_ms, turns, spacing_ms=0):
        """The k-th task request (from 0) is answered after `delay_ms + k * spacing_ms`."""
        os.makedirs(folder, exist_ok=True)
        script = os.path.join(folder, "script.json")
        with open(script, "w") as f:
            if spacing_ms:
                json.dump([{"text": REPLY, "delay_ms": delay_ms + k * spacing_ms}
                           for k in range(turns)], f)
            else:
                json.dump([{"text": REPLY, "delay_ms": delay_ms, "repeat": turns}], f)
        self.record = os.path.join(folder, "requests.jsonl")
        self.timings = os.path.join(folder, "timings.jsonl")
        self.proc = subprocess.Popen(
            [MODEL_SERVER, "--script", script, "--record", self.record,
             "--timings", self.timings, "--port-file", os.path.join(folder, "port")],
            stdout=subprocess.PIPE, stderr=open(os.path.join(folder, "server.log"), "w"), text=True)
        line = self.proc.stdout.readline().strip()
        self.url = "http://" + line.removeprefix("listening on ")
        self.delay_ms = delay_ms

    def stop(self):
        self.proc.kill()
        self.proc.wait()

    def last_bytes(self, folders):
        """Per folder: when the server wrote the last byte of that session's last task answer
        (epoch ms). A request is the session's whose body names its folder (Claude Code's
        system prompt gives its working directory)."""
        with open(self.timings) as f:
            written = {t["seq"]: t["last_byte_ms"] for t in map(json.loads, f) if t}
        out = {}
        with open(self.record) as f:
            for request in map(json.loads, f):
                if request.get("seq") not in written:
                    continue
                body = json.dumps(request.get("body"))
                # The longest folder named wins: no folder is then taken for one it prefixes.
                named = [d for d in folders if d in body]
                if named:
                    folder = max(named, key=len)
                    out[folder] = max(out.get(folder, 0), written[request["seq"]])
        return out


class CpuSampler:
    """Samples one process's CPU time (utime + stime) every 0.25 s, so that the CPU of any
    window can be read afterwards; the sampling is the bench's, not the tool's."""

    def __init__(self, pid):
        self.pid = pid
        self.samples = []
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def read(self):
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK

    def run(self):
        while not self.stop_flag.is_set():
            try:
                self.samples.append((now_ms(), self.read()))
            except OSError:
                return
            time.sleep(0.25)

    def cpu(self, start_ms, end_ms):
        """% of a core between the samples nearest inside [start_ms, end_ms]."""
        inside = [s for s in self.samples if start_ms <= s[0] <= end_ms]
        if len(inside) < 2:
            return float("nan")
        (t0, c0), (t1, c1) = inside[0], inside[-1]
        return (c1 - c0) / ((t1 - t0) / 1000) * 100

    def stop(self):
        self.stop_flag.set()
        self.thread.join()


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))


def percentile(values, p):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, -(-len(ordered) * p // 100) - 1))]


class Tmux:
    """A private tmux server: its own socket file in the scratch folder."""

    def __init__(self, socket, env):
        self.socket = socket
        self.env = env

    def run(self, *args, check=True):
        return subprocess.run(["tmux", "-S", self.socket] + list(args), env=self.env,
                              capture_output=True, text=True, check=check)

    def capture(self):
        return self.run("capture-pane", "-p", "-t", "ccm").stdout

    def keys(self, *keys):
        self.run("send-keys", "-t", "ccm", *keys)

    def literal(self, text):
        self.run("send-keys", "-t", "ccm", "-l", text)

    def pane_pid(self):
        return int(self.run("display-message", "-p", "-t", "ccm", "#{pane_pid}").stdout.strip())

    def kill(self):
        self.run("kill-server", check=False)


def wait_screen(tmux, pred, what, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        screen = tmux.capture()
        if pred(screen):
            return screen
        time.sleep(0.1)
    raise RuntimeError(f"ccmanager: no {what} within {timeout} s; screen:\n{tmux.capture()}")


def run_ccmanager(scratch, ccm_dir, n):
    """N sessions opened through ccmanager's menu, one prompt each; hooks log every change."""
    w = os.path.join(scratch, f"ccmanager-{n}")
    repo = os.path.join(w, "repo")
    make_repo(repo)
    names = [f"s{i:02d}" for i in range(1, n + 1)]
    folders = []
    for name in names:
        path = os.path.join(w, "wt", name)
        git(["worktree", "add", "-q", "-b", name, path], repo)
        folders.append(os.path.realpath(path))
    home = os.path.join(w, "home")
    seed_claude_home(home, folders)
    hooks_log = os.path.join(w, "hooks.log")
    hook = {"command": f'echo "$(date +%s%3N) $CCMANAGER_OLD_STATE $CCMANAGER_NEW_STATE '
                       f'$CCMANAGER_WORKTREE_PATH" >> {hooks_log}', "enabled": True}
    os.makedirs(os.path.join(home, ".config", "ccmanager"))
    with open(os.path.join(home, ".config", "ccmanager", "config.json"), "w") as f:
        json.dump({"statusHooks": {"idle": hook, "busy": hook, "waiting_input": hook}}, f)
    # Every session must overlap: the delay outlasts opening all of them through the menu.
    delay_ms = (5 * n + 20) * 1000
    server = ModelServer(os.path.join(w, "model"), delay_ms, n)
    bin_dir, taps = write_agent_wrapper(w)
    env = {"HOME": home, "PATH": f"{bin_dir}:{ccm_dir}/node_modules/.bin:{agent_path()}",
           "TERM": "xterm-256color", "ANTHROPIC_API_KEY": API_KEY,
           "ANTHROPIC_BASE_URL": server.url, "DISABLE_AUTOUPDATER": "1",
           "TMUX_TMPDIR": os.path.join(w, "tmux")}
    os.makedirs(env["TMUX_TMPDIR"])
    tmux = Tmux(os.path.join(w, "tmux", "bench.sock"), env)
    cli = os.path.join(ccm_dir, "node_modules", "ccmanager", "dist", "cli.js")
    sampler = None
    try:
        tmux.run("new-session", "-d", "-s", "ccm", "-x", "200", "-y", "60", "-c", repo,
                 f"exec bun {cli}")
        pid = tmux.pane_pid()
        sampler = CpuSampler(pid)
        wait_screen(tmux, lambda s: names[-1] in s, "worktree menu")
        for name in names:
            # The menu: move the highlight (❯) onto the worktree's line, then Enter.
            for _ in range(3 * n + 10):
                lines = tmux.capture().splitlines()
                # Each row reads `  3 ❯ s03 ...`; the highlighted one starts with `❯`.
                target = next((i for i, l in enumerate(lines) if re.search(rf"❯ {name}\b", l)), None)
                current = next((i for i, l in enumerate(lines) if l.startswith("❯")), None)
                if target is not None and target == current:
                    break
                if target is None or current is None:
                    # The menu is still painting (run 12 pressed Enter on the main worktree's
                    # row here, before the highlight showed): look again.
                    time.sleep(0.05)
                    continue
                tmux.keys("Down" if target > current else "Up")
                time.sleep(0.05)
            tmux.keys("Enter")
            wait_screen(tmux, lambda s: "\u276f\u00a0" in s or "? for shortcuts" in s or "auto mode" in s,
                        f"Claude Code input in {name}")
            time.sleep(0.5)  # the input takes keys once it has painted
            tmux.literal(PROMPT)
            time.sleep(0.2)
            tmux.keys("Enter")
            wait_screen(tmux, lambda s: "esc to interrupt" in s, f"working {name}", timeout=30)
            tmux.keys("C-e")
            wait_screen(tmux, lambda s: names[-1] in s and "esc to interrupt" not in s, "menu again")
        # Every turn ends delay_ms after its request; ccmanager then waits 1.5 s for the screen
        # to settle before it says idle.
        wait_for_turn_ends(taps, folders, delay_ms / 1000 + 60)
        time.sleep(5)
        idle_start = now_ms()
        time.sleep(IDLE_WINDOW_S)
        idle_end = now_ms()
        rss = rss_kib(pid)
        sampler.stop()
        changes = read_hooks(hooks_log)
        screens = read_taps(taps, folders)
        return summarise("ccmanager 4.2.3", n, folders, screens, screen_ends(screens),
                         per_folder_ccmanager(changes, folders), sampler, (idle_start, idle_end), rss)
    finally:
        if sampler:
            sampler.stop()
        tmux.kill()
        server.stop()


def read_hooks(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 4:
                out.append((int(parts[0]), parts[1], parts[2], " ".join(parts[3:])))
    return out


def per_folder_ccmanager(changes, folders):
    """Each session's reported changes after its prompt: [(kind, at_ms)], kind 'working' or
    'ended' (anything else kept by its own name, which makes it wrong)."""
    names = {"busy": "working", "idle": "ended"}
    out = {f: [] for f in folders}
    for at, old, new, folder in changes:
        folder = os.path.realpath(folder)
        if folder in out:
            out[folder].append((names.get(new, new), at))
    # The session's first `idle` (after it booted, before the prompt) is not a turn's end.
    for f, seq in out.items():
        first_busy = next((i for i, (k, _) in enumerate(seq) if k == "working"), len(seq))
        out[f] = seq[first_busy:]
    return out


def run_clawpool(scratch, n):
    """N lanes from a packet, `clawpool spawn`, then N untrusted lanes blocked on Claude's trust
    dialog for the idle figures (the spawn ends once every lane has finished)."""
    w = os.path.join(scratch, f"clawpool-{n}")
    repo = os.path.join(w, "repo")
    make_repo(repo)
    home = os.path.join(w, "home")
    seed_claude_home(home, [])
    delay_ms = 30_000
    server = ModelServer(os.path.join(w, "model"), delay_ms, n, TURN_SPACING_MS)
    bin_dir, taps = write_agent_wrapper(w)
    env = {"HOME": home, "PATH": agent_path(), "TERM": "xterm-256color",
           "TMUX_TMPDIR": os.path.join(w, "tmux"), "XDG_CONFIG_HOME": os.path.join(home, ".config")}
    os.makedirs(env["TMUX_TMPDIR"])

    def config(trusted):
        path = os.path.join(w, f"config-{trusted}.toml")
        with open(path, "w") as f:
            if trusted:
                f.write(f'trusted_roots = ["{w}"]\n')
            f.write(f'[profiles.claude.launch]\ncommand = "{bin_dir}/claude"\n')
            f.write(f'env = {{ ANTHROPIC_API_KEY = "{API_KEY}", ANTHROPIC_BASE_URL = "{server.url}", '
                    f'DISABLE_AUTOUPDATER = "1" }}\n')
        return path

    def packet(prefix):
        path = os.path.join(w, f"{prefix}.json")
        with open(path, "w") as f:
            json.dump({"defaults": {"agent": "claude"},
                       "lanes": [{"name": f"{prefix}{i:02d}", "prompt": PROMPT} for i in range(1, n + 1)]}, f)
        return path

    folders = [os.path.join(os.path.realpath(w), "repo.lanes", f"s{i:02d}") for i in range(1, n + 1)]
    try:
        proc = subprocess.Popen([CLAWPOOL, "spawn", packet("s"), "--repo", repo, "--config", config(True),
                                 "--concurrency", str(n), "--output-format", "json"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        sampler = CpuSampler(proc.pid)
        rss = 0
        for line in proc.stdout:
            if '"lane.finished"' in line and rss == 0:
                rss = rss_kib(proc.pid)  # all N sessions still up: the first turn just ended
        proc.wait()
        sampler.stop()
        per_folder = {f: [] for f in folders}
        # When clawpool recorded Claude Code's Stop hook, and the lane's finish after it: the
        # split of the turn end's latency between the agent (running its hook) and clawpool.
        stop_hook, finished, submit_hook, accepted = {}, {}, {}, {}
        for f in folders:
            log = os.path.join(repo, ".git", "clawpool", "lanes", os.path.basename(f), "events.jsonl")
            with open(log) as fh:
                events = [json.loads(l) for l in fh]
            for e in events:
                hook = (e.get("detail") or {}).get("event") if e["kind"] == "lane.hook" else None
                if hook == "Stop":
                    stop_hook.setdefault(f, e["at_ms"])
                if hook == "UserPromptSubmit":
                    submit_hook.setdefault(f, e["at_ms"])
                if e["kind"] == "lane.prompt_accepted":
                    accepted.setdefault(f, (e["at_ms"], e.get("source")))
                if e["kind"] == "lane.finished":
                    finished.setdefault(f, e["at_ms"])
            for e in events:
                kind = {"lane.prompt_accepted": "working", "lane.running": "working",
                        "lane.finished": "ended", "lane.failed": "failed",
                        "lane.blocked": "blocked"}.get(e["kind"])
                if kind:
                    per_folder[f].append((kind, e["at_ms"]))
            # `running` after `prompt_accepted` is the same turn seen working: keep the first.
            seq, seen = [], False
            for k, at in per_folder[f]:
                if k == "working":
                    if seen:
                        continue
                    seen = True
                seq.append((k, at))
            per_folder[f] = seq
        screens = read_taps(taps, folders)

        # Idle: N lanes nobody trusted, each blocked on Claude Code's trust dialog.
        idle = subprocess.Popen([CLAWPOOL, "spawn", packet("i"), "--repo", repo, "--config", config(False),
                                 "--concurrency", str(n), "--output-format", "json"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        idle_sampler = CpuSampler(idle.pid)
        blocked = 0
        for line in idle.stdout:
            if '"lane.blocked"' in line:
                blocked += 1
                if blocked == n:
                    break
        time.sleep(3)
        idle_start = now_ms()
        time.sleep(IDLE_WINDOW_S)
        idle_end = now_ms()
        idle_rss = rss_kib(idle.pid)
        idle_sampler.stop()
        idle.send_signal(signal.SIGINT)
        idle.wait(timeout=120)
        # Claude Code's Stop hook (clawpool's default for it) says the turn ended once the
        # answer is in, possibly before the reply is painted: the model's clock.
        summary = summarise("clawpool", n, folders, screens, server.last_bytes(folders),
                            per_folder, sampler, None, rss, clock="model's last byte")
        summary["cpu_idle"] = idle_sampler.cpu(idle_start, idle_end)
        summary["idle_rss_kib"] = idle_rss
        last = server.last_bytes(folders)
        to_hook = [stop_hook[f] - last[f] for f in folders if f in stop_hook and f in last]
        to_finish = [finished[f] - stop_hook[f] for f in folders if f in stop_hook and f in finished]
        summary["end_split"] = {
            "last_byte_to_stop_hook_p50": percentile(to_hook, 50),
            "last_byte_to_stop_hook_p99": percentile(to_hook, 99),
            "stop_hook_to_finished_p50": percentile(to_finish, 50),
            "stop_hook_to_finished_p99": percentile(to_finish, 99),
            "sessions": len(to_finish),
        }
        # The start: the first of the screen showing the prompt taken (its echo and a working
        # indicator, the tap's clock) and UserPromptSubmit as the lane recorded it, to
        # `lane.prompt_accepted`. A wrong acceptance: one before the prompt's Enter reached
        # the agent, or of a session whose agent never reported taking the prompt.
        to_accept, by = [], {}
        wrong_accepts, premature, before_paint = 0, 0, 0
        for f in folders:
            screen = screens.get(f, {})
            firsts = [t for t in (screen.get("taken"), submit_hook.get(f)) if t is not None]
            if f in accepted:
                at, source = accepted[f]
                by[source] = by.get(source, 0) + 1
                if firsts:
                    to_accept.append(at - min(firsts))
                if f not in submit_hook or at < screen.get("enter", at):
                    wrong_accepts += 1
            # A premature finish: before the model's last byte of the session's answer.
            if f in finished and f in last and finished[f] < last[f]:
                premature += 1
            # Before the reply was painted: the lane finished (and its agent was stopped)
            # before the screen showed it, or so early that it never did.
            if f in finished and finished[f] < screen.get("ended", finished[f] + 1):
                before_paint += 1
        summary["start_split"] = {
            "first_evidence_to_accepted_p50": percentile(to_accept, 50),
            "first_evidence_to_accepted_p99": percentile(to_accept, 99),
            "sessions": len(to_accept), "accepted_by": by, "wrong_acceptances": wrong_accepts,
            "premature_finishes": premature, "finished_before_reply_painted": before_paint,
        }
        return summary
    finally:
        server.stop()


def screen_ends(screens):
    """Per folder: when its screen first showed the reply (the screen's clock)."""
    return {f: s["ended"] for f, s in screens.items() if "ended" in s}


def summarise(tool, n, folders, screens, ends, per_folder, sampler, idle_window, rss,
              clock="screen"):
    """Latencies: working against the screens (the tap's times), the turn's end against
    `ends` (per folder, on the named `clock`); missed and wrong reports, CPU."""
    start_lat, end_lat, missed, wrong = [], [], 0, 0
    for f in folders:
        seq = per_folder.get(f, [])
        screen = screens.get(f, {})
        # The right reports: the first `working` (whenever it came: a tool may see the prompt
        # taken before the spinner shows, which gives a negative latency), and the first
        # `ended` once the turn has really ended by the clock. Every other report — an `ended`
        # while the agent is still working, a second `working`, anything else — is wrong; a
        # session whose turn never ended by the clock (its agent was stopped first) misses
        # what it did not do.
        working = next((at for k, at in seq if k == "working"), None)
        done = next((at for k, at in seq if k == "ended" and f in ends and at >= ends[f]), None)
        if working is None or "working" not in screen:
            missed += 1
        else:
            start_lat.append(working - screen["working"])
        if done is None:
            missed += 1
        else:
            end_lat.append(done - ends[f])
        wrong += len(seq) - (working is not None) - (done is not None)
    both = [s for s in screens.values() if "working" in s and "ended" in s]
    # Every session working: from the last one seen working to the first turn's end. A tool
    # that stops its agent at the turn's end (clawpool) may do so before the reply is painted,
    # so a session's end is its painted reply or, without one, its end on the tool's clock.
    working_at = [s["working"] for s in screens.values() if "working" in s]
    ended_at = [screens.get(f, {}).get("ended", ends.get(f)) for f in folders]
    ended_at = [at for at in ended_at if at is not None]
    active = (max(working_at) + 1000, min(ended_at) - 500) if working_at and ended_at else (0, 0)
    return {"tool": tool, "n": n, "sessions_seen_working_and_ended": len(both), "clock": clock,
            "start_p50": percentile(start_lat, 50), "start_p99": percentile(start_lat, 99),
            "end_p50": percentile(end_lat, 50), "end_p99": percentile(end_lat, 99),
            "cpu_active": sampler.cpu(*active), "active_s": (active[1] - active[0]) / 1000,
            "cpu_idle": sampler.cpu(*idle_window) if idle_window else float("nan"),
            "rss_kib": rss, "missed": missed, "wrong": wrong,
            "sequences": {os.path.basename(f): [k for k, _ in per_folder.get(f, [])] for f in folders},
            "screens": {os.path.basename(f): screens.get(f, {}) for f in folders}}


# Before each tool's run the machine settles: the previous run's processes (Bun, node, tmux)
# end well after its figures are taken, and a run started under their tail measures them.
SETTLE_LOAD = 1.5
SETTLE_LIMIT_S = 240


def settle():
    """Waits until the 1-minute load average is under SETTLE_LOAD (at most SETTLE_LIMIT_S);
    returns the load average the run starts at, which the results record."""
    deadline = time.time() + SETTLE_LIMIT_S
    while os.getloadavg()[0] >= SETTLE_LOAD and time.time() < deadline:
        time.sleep(5)
    return os.getloadavg()[0]


def main():
    scratch, ccm_dir = sys.argv[1], sys.argv[2]
    sizes = [int(a) for a in sys.argv[3:]] or [10, 20]
    results = []
    for n in sizes:
        for run in (lambda: run_clawpool(scratch, n), lambda: run_ccmanager(scratch, ccm_dir, n)):
            load = settle()
            r = run()
            r["load_at_start"] = round(load, 2)
            results.append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
    print("| N | tool | working: p50 / p99 | turn ended: p50 / p99 | turn ended timed from | CPU, N working | CPU, N idle | RSS per session | missed / wrong |")
    print("|---:|---|---:|---:|---|---:|---:|---:|---:|")
    for r in results:
        idle_rss = f" (idle run: {r['idle_rss_kib'] / r['n'] / 1024:.1f} MiB)" if "idle_rss_kib" in r else ""
        print(f"| {r['n']} | {r['tool']} | {r['start_p50']:.0f} / {r['start_p99']:.0f} ms | "
              f"{r['end_p50']:.0f} / {r['end_p99']:.0f} ms | {r['clock']} | "
              f"{r['cpu_active']:.1f} % | {r['cpu_idle']:.2f} % | "
              f"{r['rss_kib'] / r['n'] / 1024:.1f} MiB{idle_rss} | {r['missed']} / {r['wrong']} |")
    print()
    print("Load average (1 min) at each run's start, after waiting for it to fall under "
          f"{SETTLE_LOAD} (at most {SETTLE_LIMIT_S} s): "
          + ", ".join(f"{r['tool']} N = {r['n']}: {r['load_at_start']}" for r in results))
    print()
    print("Ratios (ccmanager / clawpool, same N). A tool on the screen's clock waits 1.5 s of "
          "unchanged screen before it calls a turn ended (ccmanager's IDLE_DEBOUNCE_MS, "
          "clawpool's default finish_idle_ms without hooks), so the turn-end latency is also "
          "given past that wait (a tool on the model's clock does not wait):")
    print()
    print("| N | working p99 | turn ended p99 | turn ended p99 past the 1.5 s wait | CPU per session, working | CPU per session, idle | RSS per session |")
    print("|---:|---:|---:|---:|---:|---:|---:|")

    def screen_wait(r):
        return 1500 if r["clock"] == "screen" else 0

    def ratio(a, b):
        if a != a or b != b:
            return "n/a"
        if b <= 0:
            return f"clawpool first ({b:.0f} ms)"
        return f"{a / b:.1f}x"
    def cpu_ratio(a, b, window_s):
        # /proc counts CPU in clock ticks: below one tick over the window a process reads 0.
        floor = 100 / TICK / window_s
        if a == a and b == 0:
            return f"> {a / floor:.0f}x (clawpool under the {floor:.2f} % one tick makes)"
        return ratio(a, b)
    for n in sizes:
        c = next(r for r in results if r["n"] == n and r["tool"] == "clawpool")
        m = next(r for r in results if r["n"] == n and r["tool"] != "clawpool")
        print(f"| {n} | {ratio(m['start_p99'], c['start_p99'])} | {ratio(m['end_p99'], c['end_p99'])} | "
              f"{ratio(m['end_p99'] - screen_wait(m), c['end_p99'] - screen_wait(c))} | "
              f"{ratio(m['cpu_active'], c['cpu_active'])} | {cpu_ratio(m['cpu_idle'], c['cpu_idle'], IDLE_WINDOW_S)} | "
              f"{ratio(m['rss_kib'], c['rss_kib'])} |")


    print()
    print("Where clawpool's turn-end latency goes (model's last byte → the Stop hook recorded by "
          "the lane: Claude Code finishing the turn and running its hook; the Stop hook → "
          "`lane.finished`: clawpool's own decision):")
    print()
    print("| N | last byte → Stop hook: p50 / p99 | Stop hook → finished: p50 / p99 | sessions |")
    print("|---:|---:|---:|---:|")
    for r in results:
        split = r.get("end_split")
        if split:
            print(f"| {r['n']} | {split['last_byte_to_stop_hook_p50']:.0f} / "
                  f"{split['last_byte_to_stop_hook_p99']:.0f} ms | "
                  f"{split['stop_hook_to_finished_p50']:.0f} / "
                  f"{split['stop_hook_to_finished_p99']:.0f} ms | {split['sessions']} |")
    print_share(results, sizes)


def print_share(results, sizes):
    """clawpool's own share at each edge of the turn, its goals and the turn end's ratio."""
    print()
    print("clawpool's own share (the turn end: the Stop hook as the lane recorded it → "
          "`lane.finished`; the start: the first of the screen showing the prompt taken — its "
          "echo and a working indicator, the tap's clock — and UserPromptSubmit as the lane "
          "recorded it → `lane.prompt_accepted`), and the turn end against ccmanager:")
    print()
    print("| N | Stop hook → finished: p50 / p99 | premature finishes | first evidence → "
          "prompt_accepted: p50 / p99 | accepted by | wrong acceptances | turn ended p99: "
          "clawpool / ccmanager | ratio |")
    print("|---:|---:|---:|---:|---|---:|---:|---:|")
    for n in sizes:
        c = next(r for r in results if r["n"] == n and r["tool"] == "clawpool")
        m = next((r for r in results if r["n"] == n and r["tool"] != "clawpool"), None)
        end, start = c["end_split"], c["start_split"]
        ratio = f"{m['end_p99'] / c['end_p99']:.1f}x" if m and c["end_p99"] > 0 else "n/a"
        ccm = f"{m['end_p99']:.0f}" if m else "n/a"
        by = ", ".join(f"{k} {v}" for k, v in sorted(start["accepted_by"].items()))
        print(f"| {n} | {end['stop_hook_to_finished_p50']:.1f} / "
              f"{end['stop_hook_to_finished_p99']:.1f} ms | {start['premature_finishes']} "
              f"({start['finished_before_reply_painted']} before the reply was painted) | "
              f"{start['first_evidence_to_accepted_p50']:.1f} / "
              f"{start['first_evidence_to_accepted_p99']:.1f} ms | {by} | "
              f"{start['wrong_acceptances']} | {c['end_p99']:.0f} / {ccm} ms | {ratio} |")


if __name__ == "__main__":
    sys.exit(main())
