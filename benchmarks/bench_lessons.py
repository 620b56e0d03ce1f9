"""How long do the lessons take in replay mode, one after another? Printed, never asserted.

    python benchmarks/bench_lessons.py [--cache DIR] [--top N] [LESSON_PREFIX ...]

Runs every lesson notebook (or those whose names start with the given prefixes, e.g.
``00 06``) top to bottom with nbclient, sequentially, in replay mode, as
``tests/lessons/test_lessons.py`` does, and prints each lesson's time (kernel start included),
the total, and the slowest cells with their first line. The kit's cache folder is a new,
empty one (a learner's first run: every trace parsed once) unless ``--cache`` names one
(run twice with the same folder to see a second run, every trace read from the cache).
Issue 12's target: every lesson, one after another, in 60 s or less. On a shared machine
the wall time depends on what else runs; the kernels' CPU time (user + system, from
``getrusage`` of the exited kernels) is printed beside it.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("prefixes", nargs="*", help="lesson number prefixes (default: all)")
    ap.add_argument("--cache", default=None, help="KITLIB_CACHE folder to use (default: a new empty one)")
    ap.add_argument("--top", type=int, default=8, help="how many of the slowest cells to list")
    a = ap.parse_args()
    import nbformat
    from nbclient import NotebookClient

    lessons = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.ipynb"))
    if a.prefixes:
        lessons = [p for p in lessons if any(p.name.startswith(x) for x in a.prefixes)]
    cache = Path(a.cache) if a.cache else Path(tempfile.mkdtemp(prefix="kitlib-lessons-cache-"))
    work = Path(tempfile.mkdtemp(prefix="kitlib-lessons-"))
    os.environ.update(KITLIB_MODE="replay", KITLIB_PROGRESS="0", KITLIB_CACHE=str(cache),
                      MPLBACKEND="module://matplotlib_inline.backend_inline",
                      PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; cache {cache}")
    import resource
    cells, total, total_cpu = [], 0.0, 0.0
    for path in lessons:
        nb = nbformat.read(path, as_version=4)
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        # shutdown_kernel="immediate": the kernel is stopped, not asked to wind down (a learner
        # moving to the next lesson does not wait for the last one's kernel to exit)
        client = NotebookClient(nb, timeout=600, kernel_name="python3", shutdown_kernel="immediate",
                                resources={"metadata": {"path": str(work)}})
        with client.setup_kernel():
            t_kernel = time.perf_counter() - t0
            for i, cell in enumerate(nb.cells):
                if cell.cell_type != "code":
                    continue
                t = time.perf_counter()
                client.execute_cell(cell, i)
                cells.append((time.perf_counter() - t, path.name[:2], i, (cell.source.strip().splitlines() or [""])[0]))
            t_cells = time.perf_counter() - t0 - t_kernel
        dt = time.perf_counter() - t0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)     # the kernel, once it has exited
        cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        total += dt
        total_cpu += cpu
        print(f"  {path.stem:<55} {dt:6.1f} s (kernel start {t_kernel:.1f} s, cells {t_cells:.1f} s, "
              f"shutdown {dt - t_kernel - t_cells:.1f} s; kernel CPU {cpu:.1f} s)", flush=True)
    print(f"all {len(lessons)} lessons, one after another: {total:.1f} s (target <= 60 s); "
          f"the kernels' CPU time {total_cpu:.1f} s (what an idle machine would wait, about); "
          f"load average now {os.getloadavg()[0]:.1f}")
    print("slowest cells:")
    for dt, lesson, i, first in sorted(cells, reverse=True)[: a.top]:
        print(f"  {dt:5.1f} s  lesson {lesson} cell {i}: {first[:80]}")
    shutil.rmtree(work, ignore_errors=True)
    if not a.cache:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
