#!/usr/bin/env python3
"""`clawpool mcp` at scale (issue #28, "Measure"), a plain JSON-RPC client on its stdio:

1. SCALE scripted lanes (1,000 by default) are handed to the daemon at once
   (`clawpool spawn PACKET --detach`), each working WORK_MS then finishing; at once one
   `wait_lanes` call waits for all of them `until: ["ended"]`. Measured: the time from the
   last lane's `lane.finished` (its `at_ms` on the repository's stream) to the answer read
   here, and the server's CPU (utime+stime from /proc) over the wait, against its wall time.
2. `lane_state` of one lane among the SCALE, ROUNDS times in a row: each call's round trip
   (request written to answer read), p50/p99/max.

Usage: cargo build -p clawpool -p clawpool-tests --bins && scripts/bench-mcp.py [SCALE] [ROUNDS]
       (CLAWPOOL_PROFILE=release for target/release). Runs in a throwaway folder with its own
       HOME and TMUX_TMPDIR; stops the daemon and removes the folder at the end.
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
CLAWPOOL = os.path.join(ROOT, "target", PROFILE, "clawpool")
AGENT = os.path.join(ROOT, "target", PROFILE, "clawpool-scripted-agent")
WORK_MS = 2000
TICK = os.sysconf("SC_CLK_TCK")


def git(args, cwd):
    subprocess.run(["git"] + args, cwd=cwd, check=True, capture_output=True)


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


class Client:
    def __init__(self, cmd, env):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env, text=True, bufsize=1)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench-mcp", "version": "1"}})
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
        result = self.request("tools/call", {"name": name, "arguments": args})
        if result.get("isError"):
            raise SystemExit(f"{name}: {result}")
        return result["structuredContent"]


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def main():
    scale = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    base = tempfile.mkdtemp(prefix="bench-mcp-")
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
    packet = os.path.join(base, "packet.json")
    names = [f"lane-{i:04d}" for i in range(scale)]
    with open(packet, "w") as f:
        json.dump({"defaults": {"agent": "scripted"},
                   "lanes": [{"name": n, "prompt": "go"} for n in names]}, f)
    env["CLAWPOOL_CONFIG"] = config
    client = Client([CLAWPOOL, "mcp", "--tier", "read", "--repo", repo], env)
    try:
        started = time.perf_counter()
        subprocess.run([CLAWPOOL, "spawn", packet, "--repo", repo, "--detach",
                        "--concurrency", str(min(scale, 100)), "--output-format", "json"],
                       env=env, capture_output=True, check=True)
        before = cpu_ticks(client.proc.pid)
        t0 = time.perf_counter()
        waited = client.tool("wait_lanes", {"lanes": names, "until": ["ended"], "timeout_s": 3600})
        answered_ms = time.time() * 1000
        wall = time.perf_counter() - t0
        ticks = cpu_ticks(client.proc.pid) - before
        print(f"{scale} lanes spawned and ended in {time.perf_counter() - started:.1f} s; "
              f"wait_lanes: {waited['outcome']}")
        last_finish = 0
        with open(os.path.join(repo, ".git", "clawpool", "stream.jsonl")) as f:
            for line in f:
                doc = json.loads(line)
                event = doc.get("event", doc)
                if event.get("kind") == "lane.finished":
                    last_finish = max(last_finish, event.get("at_ms", 0))
        print(f"wait_lanes on {scale} lanes: last lane.finished -> answer {answered_ms - last_finish:.0f} ms; "
              f"server CPU {ticks / TICK:.2f} s over {wall:.1f} s waiting ({100 * ticks / TICK / wall:.1f} %)")
        one = names[len(names) // 2]
        times = []
        for _ in range(rounds):
            t = time.perf_counter()
            client.tool("lane_state", {"lane": one})
            times.append((time.perf_counter() - t) * 1000)
        print(f"lane_state of 1 lane among {scale}, {rounds} calls: p50 {pct(times, 50):.2f} ms, "
              f"p99 {pct(times, 99):.2f} ms, max {max(times):.2f} ms")
    finally:
        client.proc.stdin.close()
        client.proc.wait(timeout=30)
        subprocess.run([CLAWPOOL, "daemon", "--stop", "--repo", repo], env=env, capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
