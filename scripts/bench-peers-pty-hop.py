#!/usr/bin/env python3
"""Splits the peer bench's start figure (the tap sees the prompt taken -> clawpool's
`lane.prompt_accepted`) into the kernel's delivery of those bytes to clawpool and clawpool's
own share, by tracing the scheduler while the clawpool half of scripts/bench-peers.py runs.

In the bench every agent runs under a tap (scripts/bench-peers-tap.py) that relays its output
into clawpool's terminal. A write to a pseudo-terminal does not reach the reader directly:
Linux queues the bytes and a kernel worker thread (`kworker/u*`, the unbound workqueue's
`flush_to_ldisc`) moves them to the reader's side and wakes it. That worker competes for a
core with every agent. This script records, with `perf sched record -k monotonic -a`:

- when the lane's tap wrote the chunk that showed the prompt taken (its record);
- when the kernel worker that the tap's write woke first ran: the bytes reach clawpool's side
  then (the worker's own run is a few microseconds);
- when clawpool recorded `lane.prompt_accepted` (its event's `at_ms`).

and prints each session accepted by the screen that took over 20 ms, split in the two parts,
then p50 / p99 / max of each over every session. Needs `perf` with tracepoints allowed (root, or perf_event_paranoid <= -1),
pyte 0.8.2 on PYTHONPATH, the agents of scripts/install-agents.sh, and a release build.

Usage: scripts/bench-peers-pty-hop.py N [RUNS]

Each run's scratch folder (its repository, tap records and `sched.data`, about 50 MB) is kept
and printed, for a second look with `perf sched timehist -i`; remove them afterwards.
"""
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("bench_peers", os.path.join(ROOT, "scripts", "bench-peers.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

# `perf script` lines for the two scheduler events this needs.
WAKING = re.compile(r"^\s*(?P<comm>.+?)\s+(?P<tid>\d+)\s+\[\d+\]\s+(?P<t>\d+\.\d+):\s+sched:sched_waking: "
                    r"comm=(?P<wcomm>.+?) pid=(?P<wtid>\d+) ")
SWITCH_IN = re.compile(r"^\s*.+?\s+\d+\s+\[\d+\]\s+(?P<t>\d+\.\d+):\s+sched:sched_switch: .* ==> "
                       r"next_comm=(?P<ncomm>.+?) next_pid=(?P<ntid>\d+) ")


def traced_run(n):
    """One clawpool run of N lanes under the scheduler trace: (scratch folder, trace file,
    seconds to add to the trace's monotonic clock to get the epoch)."""
    bench.settle()
    scratch = tempfile.mkdtemp(prefix="bench-pty-hop.")
    trace = os.path.join(scratch, "sched.data")
    # The starts are over well within this; the turns' ends are not what is measured here.
    perf = subprocess.Popen(["perf", "sched", "record", "-k", "monotonic", "-a", "-o", trace,
                             "--", "sleep", "30"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)  # perf's own start-up, before the first lane starts
    offset = time.time() - time.monotonic()
    bench.run_clawpool(scratch, n)
    if perf.wait() != 0:
        sys.exit("perf sched record failed (is perf allowed to trace the scheduler here?)")
    return scratch, trace, offset


def scheduler_events(trace):
    """(wakings, switch-ins): [(t, waker tid, wakee comm, wakee tid)], {tid: [t, ...]}."""
    out = subprocess.run(["perf", "script", "-i", trace], capture_output=True, text=True, check=True).stdout
    wakings, switch_ins = [], {}
    for line in out.splitlines():
        m = WAKING.match(line)
        if m:
            wakings.append((float(m["t"]), int(m["tid"]), m["wcomm"], int(m["wtid"])))
            continue
        m = SWITCH_IN.match(line)
        if m:
            switch_ins.setdefault(int(m["ntid"]), []).append(float(m["t"]))
    return wakings, switch_ins


def kernel_worker_ran(taken_s, tap_pid, wakings, switch_ins):
    """When the kernel worker that the tap's write woke first ran (monotonic seconds), or None
    when the write woke none (a worker already running took the bytes)."""
    woken = next((w for w in wakings
                  if w[1] == tap_pid and w[2].startswith("kworker/u") and taken_s - 0.002 <= w[0] <= taken_s + 0.050),
                 None)
    if woken is None:
        return None
    return next((t for t in switch_ins.get(woken[3], []) if t >= woken[0]), None)


def sessions(scratch, n, trace, offset):
    w = os.path.join(scratch, f"clawpool-{n}")
    folders = [os.path.join(os.path.realpath(w), "repo.lanes", f"s{i:02d}") for i in range(1, n + 1)]
    screens = bench.read_taps(os.path.join(w, "taps"), folders)
    wakings, switch_ins = scheduler_events(trace)
    rows = []
    for folder in folders:
        name = os.path.basename(folder)
        with open(os.path.join(w, "repo", ".git", "clawpool", "lanes", name, "events.jsonl")) as f:
            events = [json.loads(line) for line in f]
        accepted = next(e for e in events if e["kind"] == "lane.prompt_accepted")
        taken = screens.get(folder, {}).get("taken")
        if accepted.get("source") != "screen" or taken is None:
            continue
        tap_pid = next(e["detail"]["pid"] for e in events if e["kind"] == "lane.started")
        taken_s = taken / 1000 - offset
        ran = kernel_worker_ran(taken_s, tap_pid, wakings, switch_ins)
        total = accepted["at_ms"] - taken
        if ran is None:
            rows.append((name, total, None, None))
            continue
        hop_ms = (ran - taken_s) * 1000
        rows.append((name, total, round(hop_ms, 1), round(total - hop_ms, 1)))
    return rows


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))] if values else None


if __name__ == "__main__":
    n = int(sys.argv[1])
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    all_rows = []
    for run in range(runs):
        scratch, trace, offset = traced_run(n)
        rows = sessions(scratch, n, trace, offset)
        all_rows += rows
        print(f"run {run + 1}: {scratch}")
        for name, total, hop, own in sorted(rows, key=lambda r: -r[1]):
            if total > 20 and hop is None:
                print(f"  {name}: taken -> accepted {total} ms (the tap's write woke no kernel worker)")
            elif total > 20:
                print(f"  {name}: taken -> accepted {total} ms = the kernel's worker ran after {hop} ms, "
                      f"then clawpool's own {own} ms")
    split_rows = [r for r in all_rows if r[2] is not None]
    print(f"\n{len(all_rows)} sessions accepted by the screen, {len(split_rows)} split "
          f"(the rest: the tap's write woke no kernel worker)")
    print("| ms after the tap saw the prompt taken | p50 | p99 | max |")
    print("|---|---:|---:|---:|")
    for label, col, rows in (("accepted (the bench's figure)", 1, all_rows),
                             ("the kernel's worker ran: the bytes move to clawpool's side", 2, split_rows),
                             ("clawpool's own: that worker ran -> accepted", 3, split_rows)):
        values = [r[col] for r in rows]
        print(f"| {label} | {pct(values, 50)} | {pct(values, 99)} | {max(values) if values else None} |")
