#!/usr/bin/env python3
"""The whole test suite's peak memory: pytest plus everything it starts.

    python tools/suite_peak.py                        # the README's command: python -m pytest
    python tools/suite_peak.py tests/analyses/test_intervals.py -q   # arguments go to pytest
    python tools/suite_peak.py --limit-gb 6 --json peak.json

Runs ``python -m pytest [ARGS]`` in a session of its own and, every ``--interval``
seconds (0.5), reads from ``/proc`` the memory of every process of that session or
descended from pytest (Jupyter kernels of the lesson tests, ``torchrun`` ranks, CLI
runs, DataLoader workers, the browser test's Chromium), and reports at the end:

* ``peak PSS``: the largest sum over those processes of their proportional set size
  (``/proc/PID/smaps_rollup``: pages shared by N processes count 1/N in each), the
  figure to compare with a laptop's memory;
* ``peak RSS``: the same with resident set sizes (shared pages counted in every
  process that maps them, so an upper bound);
* the largest single process (``ru_maxrss`` of the waited-for tree, as
  ``/usr/bin/time -v`` reports it) and the most processes alive at once;
* the wall time, and pytest's exit status (also this script's).

Sampling can miss a peak shorter than the interval. Where you own a cgroup v2, the
kernel's own figure is exact: ``systemd-run --user --scope -p MemoryAccounting=yes``
around the same command, then its ``memory.peak``.

``--limit-gb N`` makes the exit status 3 when the peak PSS is above N GB (10^9 bytes),
though pytest passed.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid: int):
    """(ppid, session id) of a process, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()      # after "pid (comm) "
    return int(fields[1]), int(fields[3])              # ppid, session


def _memory(pid: int):
    """(rss, pss) of a process in bytes, or None when it is gone or unreadable."""
    try:
        rss = pss = None
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("Pss:"):
                pss = int(line.split()[1]) * 1024
        if rss is not None and pss is not None:
            return rss, pss
    except OSError:
        pass
    try:                                               # no smaps_rollup: RSS only
        rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        return rss, rss
    except OSError:
        return None


def tree(root: int) -> set:
    """``root``, its descendants, and every process of its session."""
    info = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = _stat(int(d))
            if st is not None:
                info[int(d)] = st
    members = {p for p, (_, sid) in info.items() if sid == root}
    members.add(root)
    children: dict = {}
    for p, (ppid, _) in info.items():
        children.setdefault(ppid, []).append(p)
    todo = list(members)
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in members:
                members.add(c)
                todo.append(c)
    return members


class Sampler(threading.Thread):
    def __init__(self, root: int, interval: float):
        super().__init__(daemon=True)
        self.root, self.interval = root, interval
        self.peak_rss = self.peak_pss = self.peak_procs = self.samples = 0
        self.peak_at = 0.0
        self.t0 = time.monotonic()
        self.done = threading.Event()

    def sample(self):
        rss = pss = n = 0
        for pid in tree(self.root):
            m = _memory(pid)
            if m is not None:
                rss, pss, n = rss + m[0], pss + m[1], n + 1
        self.samples += 1
        if pss > self.peak_pss:
            self.peak_pss, self.peak_at = pss, time.monotonic() - self.t0
        self.peak_rss = max(self.peak_rss, rss)
        self.peak_procs = max(self.peak_procs, n)

    def run(self):
        while not self.done.wait(self.interval):
            self.sample()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="Every other argument goes to pytest (use -- before pytest "
                                       "options that clash with these).")
    p.add_argument("--interval", type=float, default=0.5, help="seconds between samples (default 0.5)")
    p.add_argument("--limit-gb", type=float, help="exit 3 when the peak PSS is above this many GB")
    p.add_argument("--json", metavar="FILE", help="also write the figures to FILE as JSON")
    a, pytest_args = p.parse_known_args(argv)
    if pytest_args[:1] == ["--"]:
        pytest_args = pytest_args[1:]
    cmd = [sys.executable, "-m", "pytest", *pytest_args]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, start_new_session=True)
    sampler = Sampler(proc.pid, a.interval)
    sampler.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGINT)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    sampler.done.set()
    sampler.join()
    rc = os.waitstatus_to_exitcode(status)
    gb = lambda b: f"{b / 1e9:.2f} GB"  # noqa: E731
    largest = usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    figures = {"command": shlex.join(cmd), "exit_status": rc, "wall_s": round(wall, 1),
               "peak_pss_bytes": sampler.peak_pss, "peak_rss_bytes": sampler.peak_rss,
               "peak_at_s": round(sampler.peak_at, 1), "largest_process_bytes": largest,
               "most_processes": sampler.peak_procs, "samples": sampler.samples, "interval_s": a.interval}
    print(f"\nsuite_peak: {figures['command']}\n"
          f"  exit status {rc}, {round(wall) // 60} min {round(wall) % 60} s wall\n"
          f"  peak PSS (whole process tree) {gb(sampler.peak_pss)} at {sampler.peak_at:.0f} s; "
          f"peak RSS {gb(sampler.peak_rss)} (shared pages counted per process)\n"
          f"  largest single process {gb(largest)}; at most {sampler.peak_procs} processes at once; "
          f"{sampler.samples} samples every {a.interval:g} s", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(figures, indent=1) + "\n")
    if rc == 0 and a.limit_gb is not None and sampler.peak_pss > a.limit_gb * 1e9:
        print(f"suite_peak: peak PSS {gb(sampler.peak_pss)} is above the limit of {a.limit_gb:g} GB")
        return 3
    return rc


if __name__ == "__main__":
    sys.exit(main())
