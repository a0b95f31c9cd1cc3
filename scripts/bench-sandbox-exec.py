#!/usr/bin/env python3
"""What bubblewrap adds to starting one process, as a sandboxed lane starts its agent
(docs/sandbox.md): p50/p99 over N runs of `/bin/true` plain against `/bin/true` under the
bwrap arguments a lane in a plain folder gets. A lane's start pays this twice (the probe in
`Sandbox::build`, then the agent's own bwrap). Prints a Markdown table.

Usage: scripts/bench-sandbox-exec.py [N]   (default 200)
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def timed(cmd, n):
    runs = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True)
        runs.append((time.perf_counter() - t0) * 1000)
    runs.sort()
    return runs[n // 2], runs[max(0, int(n * 0.99) - 1)]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    # Outside /tmp: the sandbox's /tmp is its own.
    base = tempfile.mkdtemp(prefix="bench-sandbox-", dir=os.path.join(ROOT, "target"))
    try:
        work = os.path.join(base, "w")
        os.makedirs(work)
        box = ["bwrap", "--unshare-user", "--die-with-parent", "--ro-bind", "/", "/",
               "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
               "--bind", work, work, "--chdir", work, "--"]
        plain = timed(["/bin/true"], n)
        boxed = timed(box + ["/bin/true"], n)
        print(f"| start of `/bin/true`, {n} runs | p50 | p99 |")
        print("|---|---|---|")
        print(f"| plain | {plain[0]:.1f} ms | {plain[1]:.1f} ms |")
        print(f"| in a lane's bwrap sandbox | {boxed[0]:.1f} ms | {boxed[1]:.1f} ms |")
        print(f"| ratio | {boxed[0] / plain[0]:.1f}x | {boxed[1] / plain[1]:.1f}x |")
    finally:
        shutil.rmtree(base)


if __name__ == "__main__":
    main()
