"""Stop mutmut's mutants that run away. Run beside `mutmut run`; stop it with Ctrl-C.

    python tools/mutmut_watchdog.py [--max-seconds 240] [--max-gib 6]

Some mutants turn a loop endless (``j += 1`` made ``j = 1`` in
``chain.innermost_containing``): the forked child then grows by tens of MB a second,
and mutmut 3.8's own timeout let one reach 6 GB on this 24 GB machine before it ended.
This script looks at the processes every few seconds and kills (SIGKILL) any mutmut
child (its process title starts with ``mutmut:``) that has run longer or grown larger
than the limits; mutmut then records that mutant as killed by a signal (``segfault`` in
``mutmut results``), which counts as caught: the edit did not pass the tests. Linux
only (reads ``/proc``).
"""
from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path


def _children(max_seconds: float, max_bytes: int):
    tick = os.sysconf("SC_CLK_TCK")
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    page = os.sysconf("SC_PAGE_SIZE")
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            title = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            if not title.startswith("mutmut:"):
                continue
            stat = (p / "stat").read_text().rsplit(")", 1)[1].split()
            age = uptime - int(stat[19]) / tick          # field 22: start time, in clock ticks
            rss = int((p / "statm").read_text().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue                                     # gone meanwhile
        if age > max_seconds or rss > max_bytes:
            yield int(p.name), title, age, rss


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-seconds", type=float, default=240, help="longest a mutant may run (s)")
    ap.add_argument("--max-gib", type=float, default=6, help="most memory a mutant may hold (GiB)")
    a = ap.parse_args()
    print(f"watching mutmut's children: killing any past {a.max_seconds:g} s or {a.max_gib:g} GiB", flush=True)
    try:
        while True:
            for pid, title, age, rss in _children(a.max_seconds, int(a.max_gib * 2**30)):
                try:
                    os.kill(pid, signal.SIGKILL)
                    print(f"{time.strftime('%H:%M:%S')} killed {title} after {age:.0f} s at {rss / 2**30:.1f} GiB",
                          flush=True)
                except ProcessLookupError:
                    pass
            time.sleep(5)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
