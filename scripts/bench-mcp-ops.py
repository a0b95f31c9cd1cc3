#!/usr/bin/env python3
"""The MCP operation tools' own cost (issue #27: the MCP server on the pool library), a plain
JSON-RPC client on `clawpool mcp --tier operate`'s stdio:

1. `spawn_lane` ROUNDS times, each a new scripted lane handed to the repository's daemon (the
   first call also starts the daemon: reported apart); each call's round trip (request
   written to answer read).
2. `send_to_lane` ROUNDS times to one lane whose agent is at work on a long first prompt, so
   each text is queued at once (`queued` receipt): the round trip is the tool's own cost, not
   the agent's.

Usage: cargo build -p clawpool -p clawpool-tests --bins && scripts/bench-mcp-ops.py [ROUNDS]
       CLAWPOOL_BIN=/path/to/clawpool measures another build of the binary (e.g. main's).
       Runs in a throwaway folder with its own HOME and TMUX_TMPDIR; stops the daemon and
       removes the folder at the end.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PROFILE = os.environ.get("CLAWPOOL_PROFILE", "debug")
CLAWPOOL = os.environ.get("CLAWPOOL_BIN", os.path.join(ROOT, "target", PROFILE, "clawpool"))
AGENT = os.path.join(ROOT, "target", PROFILE, "clawpool-scripted-agent")
WORK_MS = 120000


def git(args, cwd):
    subprocess.run(["git"] + args, cwd=cwd, check=True, capture_output=True)


class Client:
    def __init__(self, cmd, env):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env, text=True, bufsize=1)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench-mcp-ops", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, doc):
        self.proc.stdin.write(json.dumps(doc) + "\n")
        self.proc.stdin.flush()

    def request(self, method, params):
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit("clawpool mcp closed its stdout")
            doc = json.loads(line)
            if doc.get("id") == self.next_id:
                if "error" in doc:
                    raise SystemExit(f"{method}: {doc['error']}")
                return doc["result"]

    def tool(self, name, args):
        t = time.perf_counter()
        result = self.request("tools/call", {"name": name, "arguments": args})
        ms = (time.perf_counter() - t) * 1000
        if result.get("isError"):
            raise SystemExit(f"{name}: {result}")
        return result["structuredContent"], ms


def summary(name, times):
    times = sorted(times)
    return (f"{name}: {len(times)} calls, median {statistics.median(times):.0f} ms, "
            f"min {times[0]:.0f} ms, max {times[-1]:.0f} ms")


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    base = tempfile.mkdtemp(prefix="bench-mcp-ops-")
    repo = os.path.join(base, "repo")
    env = dict(os.environ, HOME=os.path.join(base, "home"), TMUX_TMPDIR=os.path.join(base, "tmux"))
    for d in (repo, env["HOME"], env["TMUX_TMPDIR"]):
        os.makedirs(d)
    git(["init", "-q", "-b", "main"], repo)
    git(["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "--allow-empty", "-m", "init"], repo)
    scenario = os.path.join(base, "scenario.toml")
    with open(scenario, "w") as f:
        f.write(f'[[prompt]]\nsteps = [{{ do = "sleep", ms = {WORK_MS} }}]\n')
    config = os.path.join(base, "config.toml")
    with open(config, "w") as f:
        f.write(f'trusted_roots = ["{base}"]\n[handshake]\nfinish_idle_ms = 300\n')
        f.write(f'[profiles.scripted.launch]\ncommand = "{AGENT}"\n')
        f.write(f'env = {{ CLAWPOOL_AGENT_SCENARIO = "{scenario}" }}\n')
    env["CLAWPOOL_CONFIG"] = config
    client = Client([CLAWPOOL, "mcp", "--tier", "operate", "--repo", repo], env)
    try:
        spawns = []
        for i in range(rounds + 1):
            _, ms = client.tool("spawn_lane", {"name": f"lane-{i:03d}", "prompt": "go",
                                               "agent": "scripted"})
            spawns.append(ms)
        print(f"spawn_lane, first call (starts the daemon): {spawns[0]:.0f} ms")
        print(summary("spawn_lane", spawns[1:]))
        client.tool("wait_lanes", {"lanes": ["lane-000"], "until": ["running"], "timeout_s": 60})
        sends = []
        for i in range(rounds):
            doc, ms = client.tool("send_to_lane", {"lane": "lane-000", "text": f"more {i}"})
            if doc["receipt"] != "queued":
                raise SystemExit(f"send_to_lane: not queued: {doc}")
            sends.append(ms)
        print(summary("send_to_lane (queued)", sends))
    finally:
        client.proc.stdin.close()
        client.proc.wait(timeout=30)
        subprocess.run([CLAWPOOL, "daemon", "--stop", "--repo", repo], env=env, capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
