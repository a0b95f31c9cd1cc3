#!/usr/bin/env python3
"""The supervisor's own CPU for one spawn of SCALE scripted-agent lanes (300 by default), set
up exactly as scripts/bench-lanes.py sets up its spawns (its repository, config, packet and
environment): wall time to all finished, and the CPU time of the `clawpool` process's own
threads (utime + stime in /proc/<pid>/stat, its agents and git processes not included),
sampled every 20 ms until it exits. Meant for comparing builds on a shared machine, where
wall time says little: run it against each build's folder, alternately, a few times.

Usage: cargo build --release --workspace --bins && scripts/spawn-cpu.py [SCALE] [--root DIR]
         [--perf FILE]
  --root DIR   the checkout whose target/release binaries to run (default: this one)
  --perf FILE  record the spawn with `perf record -F 149 --call-graph dwarf` into FILE
Prints one JSON line. Works in a throwaway folder and removes it (--keep leaves it, in
--keep-dir if given: on ext4 without a journal, deleting thousands of files just before the
next run slows that run's file creations, as the allocator skips recently deleted inodes).
"""
import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def load_bench(root):
    spec = importlib.util.spec_from_file_location(
        "bench_lanes", os.path.join(root, "scripts", "bench-lanes.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def own_cpu(pid):
    """utime + stime of `pid`'s threads, in seconds (not its children's)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    args = argparse.ArgumentParser()
    args.add_argument("scale", nargs="?", type=int, default=300)
    args.add_argument("--root", default=os.path.dirname(HERE))
    args.add_argument("--perf")
    args.add_argument("--keep", action="store_true")
    args.add_argument("--keep-dir")
    opts = args.parse_args()
    bench = load_bench(opts.root)
    n = opts.scale
    base = tempfile.mkdtemp(prefix="clawpool-spawn-cpu-", dir=opts.keep_dir)
    try:
        repo = bench.make_repo(base, "repo")
        config = bench.write_config(base, bench.WORK, True)
        cmd = [bench.CLAWPOOL, "spawn", bench.packet(base, n), "--repo", repo, "--config", config,
               "--concurrency", str(n), "--output-format", "json"]
        if opts.perf:
            cmd = ["perf", "record", "-F", "149", "--call-graph", "dwarf,16384", "-o", opts.perf,
                   "--"] + cmd
        load = os.getloadavg()
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, env=bench.env(base), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        supervisor = proc.pid
        if opts.perf:
            # The supervisor is perf's child.
            children = f"/proc/{proc.pid}/task/{proc.pid}/children"
            while proc.poll() is None and not open(children).read().split():
                time.sleep(0.005)
            supervisor = int(open(children).read().split()[0])
        cpu = 0.0
        while proc.poll() is None:
            try:
                cpu = own_cpu(supervisor)
            except (OSError, IndexError):
                pass  # it has just exited: the last sample stands
            time.sleep(0.02)
        wall = time.perf_counter() - started
        stderr = proc.stderr.read().decode(errors="replace")
        complete, events, _ = bench.check_lanes(repo, n)
        print(json.dumps({
            "lanes": n, "wall_s": round(wall, 2), "supervisor_cpu_s": round(cpu, 2),
            "cpu_ms_per_lane": round(cpu / n * 1000, 1), "exit": proc.returncode,
            "complete": complete, "events": events,
            "load_before": [round(x, 2) for x in load],
            "load_after": [round(x, 2) for x in os.getloadavg()],
        }))
        if proc.returncode != 0:
            print(stderr[-3000:])
    finally:
        bench.kill_leftover_agents(base)
        if not opts.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
