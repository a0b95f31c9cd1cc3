#!/usr/bin/env python3
"""What `clawpool hook` costs an agent: the wall time of one `clawpool hook Stop` run, from the
agent starting the process to its exit, against a lane's control socket that answers at once
(`{"ok": true}`, as the lane does for a hook report it queued), and `/bin/true` started the
same way for comparison (the cost of starting any process). Prints a Markdown table.

Usage: cargo build --release --workspace --bins && scripts/bench-hook-command.py [RUNS]
Everything lives in a temporary folder, removed at the end.
"""
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CLAWPOOL = os.path.join(ROOT, "target", "release", "clawpool")
PAYLOAD = b'{"session_id":"s","transcript_path":"/nonexistent","hook_event_name":"Stop"}'


def serve(listener, stop):
    """Answers every hook report with `{"ok": true}`, as a lane does once it queued it."""
    listener.settimeout(0.2)
    while not stop.is_set():
        try:
            conn, _ = listener.accept()
        except socket.timeout:
            continue
        with conn:
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            conn.sendall(b'{"ok": true}\n')


def timed(argv, env, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        out = subprocess.run(argv, input=PAYLOAD, env=env, capture_output=True)
        times.append((time.perf_counter() - start) * 1000)
        assert out.returncode == 0, out.stderr
        assert b"not delivered" not in out.stderr, out.stderr
    return sorted(times)


def pct(values, p):
    return values[max(0, min(len(values) - 1, -(-len(values) * p // 100) - 1))]


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with tempfile.TemporaryDirectory(prefix="clawpool-bench-hook-") as tmp:
        path = os.path.join(tmp, "control.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(64)
        stop = threading.Event()
        server = threading.Thread(target=serve, args=(listener, stop), daemon=True)
        server.start()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "CLAWPOOL_LANE_SOCKET": path, "CLAWPOOL_LANE_TOKEN": "token",
               "CLAWPOOL_HOOK_FAILURES": os.path.join(tmp, "failures.jsonl")}
        hook = timed([CLAWPOOL, "hook", "Stop"], env, runs)
        true = timed(["/bin/true"], env, runs)
        stop.set()
        server.join()
        assert not os.path.exists(env["CLAWPOOL_HOOK_FAILURES"]), "a report was not delivered"
    print(f"| {runs} runs each | p50 | p99 | max |")
    print("|---|---:|---:|---:|")
    for name, values in (("`clawpool hook Stop`, delivered", hook), ("`/bin/true`", true)):
        print(f"| {name} | {pct(values, 50):.1f} ms | {pct(values, 99):.1f} ms | {values[-1]:.1f} ms |")


if __name__ == "__main__":
    sys.exit(main())
