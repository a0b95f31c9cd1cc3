#!/usr/bin/env python3
"""An agent's own channel against the screen alone: how soon a lane knows its prompt was taken
and its turn is over, with the real Claude Code 2.1.330 (its hooks) or Codex 0.169.0 (its app
server) against clawpool-model-server (offline).

For each mode (`hooks`: the built-in profile's channel, `screen`: `[profiles.AGENT.launch]
hooks = "none"`), N lanes one after the other, each a fresh `clawpool run` of one turn in its
own scratch HOME and folder. The turn is the same every time: the prompt is typed
(`prompt_args = []`, so there is an Enter to time from), the model makes the agent write
`hello.txt` (a tool call: a pause inside the turn where an early finish would show) and then
says it is done.
Measured per lane:
- accept: `lane.prompt_sent` (recorded just before Enter) to `lane.prompt_accepted` (`at_ms`);
- finish: the model server's last byte of the turn's last answer (`--timings`) to
  `lane.finished`;
- premature: a lane finished before that last byte, or without `hello.txt`, or that did not
  finish at all.

Usage: scripts/bench-hooks.py [--agent claude|codex] [N]   (default claude, 20; needs
`cargo build --workspace --bins` and the agents from scripts/install-agents.sh)
Every process started is stopped by its pid; the scratch folders are removed.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "debug")
AGENTS = os.path.join(
    os.environ.get("CLAWPOOL_AGENTS_DIR") or os.path.join(ROOT, ".agents"), "node_modules", ".bin")
PROMPT = "create a file named hello.txt containing hi"
RUN_TIMEOUT = 120


def agent_path():
    dirs = []
    for tool in ("node", "git"):
        for d in os.environ.get("PATH", "").split(":"):
            if d and os.path.isfile(os.path.join(d, tool)) and d not in dirs:
                dirs.append(d)
                break
    return ":".join(dirs + [d for d in ("/usr/bin", "/bin") if d not in dirs])


def start_model_server(folder, script):
    os.makedirs(folder)
    script_file = os.path.join(folder, "script.json")
    with open(script_file, "w") as f:
        json.dump(script, f)
    server = subprocess.Popen(
        [os.path.join(BIN, "clawpool-model-server"), "--script", script_file,
         "--record", os.path.join(folder, "requests.jsonl"),
         "--timings", os.path.join(folder, "timings.jsonl")],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=open(os.path.join(folder, "server.log"), "w"), text=True)
    line = server.stdout.readline()
    port = line.strip().rsplit(":", 1)[-1]
    return server, f"http://127.0.0.1:{port}"


def claude_setup(home, lane, start_server):
    """Claude Code's HOME, turn, launch lines and environment (docs/real-agents.md)."""
    with open(os.path.join(home, ".claude.json"), "w") as f:
        json.dump({"hasCompletedOnboarding": True, "theme": "dark", "numStartups": 3,
                   "customApiKeyResponses": {"approved": ["sk-ant-fake"], "rejected": []}}, f)
    server, url = start_server([
        {"tool_use": {"name": "Write", "input": {
            "file_path": os.path.join(lane, "hello.txt"), "content": "hi"}}},
        {"text": "Done. Created hello.txt."},
    ])
    launch = 'args = ["--permission-mode", "acceptEdits"]\n'
    env = [f"ANTHROPIC_API_KEY=sk-ant-fake", f"ANTHROPIC_BASE_URL={url}",
           "DISABLE_AUTOUPDATER=1", f"HOME={home}", f"PATH={agent_path()}",
           "TERM=xterm-256color"]
    return server, launch, env


def codex_setup(home, lane, start_server):
    """Codex's HOME (a `mock` provider, `codex login --with-api-key`), turn and environment
    (docs/real-agents.md)."""
    server, url = start_server([
        {"tool_use": {"name": "exec_command", "input": {"cmd": "printf hi > hello.txt"}}},
        {"text": "Done. Created hello.txt."},
    ])
    codex_home = os.path.join(home, ".codex")
    os.makedirs(codex_home)
    with open(os.path.join(codex_home, "config.toml"), "w") as f:
        f.write(f'model = "gpt-5"\nmodel_provider = "mock"\n\n[model_providers.mock]\n'
                f'name = "mock"\nbase_url = "{url}/v1"\nenv_key = "OPENAI_API_KEY"\n'
                f'wire_api = "responses"\n')
    subprocess.run([os.path.join(AGENTS, "codex"), "login", "--with-api-key"], input="sk-fake\n",
                   env={"HOME": home, "PATH": agent_path()}, capture_output=True, text=True,
                   check=True)
    env = ["OPENAI_API_KEY=sk-fake", f"HOME={home}", f"PATH={agent_path()}",
           "TERM=xterm-256color"]
    return server, "", env


def one_lane(scratch, agent, mode, index):
    home = os.path.join(scratch, "home")
    os.makedirs(home)
    lanes = os.path.realpath(os.path.join(scratch, "lanes"))
    lane = os.path.join(lanes, f"lane-{index}")
    os.makedirs(lane)
    setup = claude_setup if agent == "claude" else codex_setup
    server, launch, agent_env = setup(
        home, lane, lambda script: start_model_server(os.path.join(scratch, "model"), script))
    config = os.path.join(scratch, "config.toml")
    with open(config, "w") as f:
        f.write(f"trusted_roots = [{json.dumps(lanes)}]\n\n[profiles.{agent}.launch]\n"
                f"command = {json.dumps(os.path.join(AGENTS, agent))}\n"
                f"{launch}prompt_args = []\n"
                + ('hooks = "none"\n' if mode == "screen" else ""))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home,
           "XDG_CONFIG_HOME": os.path.join(home, ".config"),
           "XDG_STATE_HOME": os.path.join(scratch, "state"),
           "TMUX_TMPDIR": scratch}
    cmd = [os.path.join(BIN, "clawpool"), "run", "--output-format", "json", "--agent", agent,
           "--config", config, "--cwd", lane, "--prompt", PROMPT]
    for var in agent_env:
        cmd += ["--env", var]
    try:
        run = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                             text=True, timeout=RUN_TIMEOUT)
        out = run.stdout
    except subprocess.TimeoutExpired as err:
        out = err.stdout.decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
    finally:
        server.terminate()
        server.wait()
    events = []
    for line in out.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
    at = lambda kind: next((e for e in events if e.get("kind") == kind), None)
    sent, accepted, finished = at("lane.prompt_sent"), at("lane.prompt_accepted"), at(
        "lane.finished")
    timings = []
    with open(os.path.join(scratch, "model", "timings.jsonl")) as f:
        timings = [json.loads(line) for line in f if line.strip()]
    last_byte = max((t["last_byte_ms"] for t in timings if t["turn"] == 1), default=None)
    result = {"mode": mode, "accept_ms": None, "finish_ms": None, "premature": False,
              "accept_source": accepted and accepted.get("source"),
              "finish_source": finished and finished.get("source")}
    if sent and accepted:
        result["accept_ms"] = accepted["at_ms"] - sent["at_ms"]
    if finished and last_byte is not None:
        result["finish_ms"] = finished["at_ms"] - last_byte
    hello = os.path.join(lane, "hello.txt")
    if (finished is None or last_byte is None or finished["at_ms"] < last_byte
            or not os.path.isfile(hello)):
        result["premature"] = True
    return result


def summary(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return "-", "-", "-"
    p90 = values[min(len(values) - 1, int(round(0.9 * (len(values) - 1))))]
    return f"{statistics.median(values):.0f}", f"{p90:.0f}", f"{values[-1]:.0f}"


def main():
    args = sys.argv[1:]
    agent = "claude"
    if args[:1] == ["--agent"]:
        agent, args = args[1], args[2:]
    if agent not in ("claude", "codex"):
        sys.exit(f"--agent: claude or codex, not {agent!r}")
    n = int(args[0]) if args else 20
    version = {"claude": "Claude Code 2.1.330", "codex": "Codex 0.169.0"}[agent]
    results = []
    for index in range(n):
        for mode in ("hooks", "screen"):
            scratch = tempfile.mkdtemp(prefix=f"bench-hooks-{mode}-")
            try:
                result = one_lane(scratch, agent, mode, index)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            results.append(result)
            print(json.dumps(result), file=sys.stderr, flush=True)
    print(f"clawpool run × {n} per mode, real {version}, scripted model "
          f"({time.strftime('%Y-%m-%d')})\n")
    print("| mode | Enter → prompt_accepted p50 / p90 / max (ms) | last byte → lane.finished "
          "p50 / p90 / max (ms) | decided by (accepted, finished) | premature finishes |")
    print("|---|---|---|---|---|")
    for mode in ("hooks", "screen"):
        rows = [r for r in results if r["mode"] == mode]
        accept = " / ".join(summary(r["accept_ms"] for r in rows))
        finish = " / ".join(summary(r["finish_ms"] for r in rows))
        sources = {}
        for r in rows:
            key = f"{r['accept_source']}, {r['finish_source']}"
            sources[key] = sources.get(key, 0) + 1
        decided = "; ".join(f"{k}: {v}" for k, v in sorted(sources.items()))
        premature = sum(r["premature"] for r in rows)
        print(f"| {mode} | {accept} | {finish} | {decided} | {premature} of {len(rows)} |")


if __name__ == "__main__":
    main()
