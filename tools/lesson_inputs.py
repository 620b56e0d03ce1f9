"""Measure what a lesson asks of a learner, for docs/LESSON_TIMES.md.

    python tools/lesson_inputs.py [NN ...] [--run] > lesson_inputs.json

Counted from each notebook: words of markdown (code spans and the first cell's "**Time:**"
line included; tables and formulas as written), code cells and their non-blank lines, cells
that call ``ex.check(`` / ``ex.predicted(`` and ``ex.reveal(``. With ``--run`` the lesson is also
executed in replay (tests/support/run_notebook.py, in a temporary folder, one lesson at a time) with a
last cell added that lists every ``Exercises`` object's questions by ``kind``; the wall time of
that run (kernel start included) is recorded too.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent

DUMP = r'''
import json as _j
from kitlib.course.exercises import Exercises as _E
_seen, _out = set(), []
for _v in list(globals().values()):
    if isinstance(_v, _E) and id(_v) not in _seen:
        _seen.add(id(_v)); _out += [q.kind for q in _v.questions]
print("KINDS=" + _j.dumps(_out))
'''


def static(nb) -> dict:
    md = [c.source for c in nb.cells if c.cell_type == "markdown"]
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    words = sum(len(re.findall(r"\S+", s)) for s in md)
    lines = sum(sum(1 for ln in s.splitlines() if ln.strip()) for s in code)
    return {"md_cells": len(md), "md_words": words, "code_cells": len(code), "code_lines": lines,
            "check_cells": sum("ex.check(" in s or ".check(" in s for s in code),
            "reveal_cells": sum(".reveal(" in s for s in code)}


def run(path: Path) -> dict:
    nb = nbformat.read(path, 4)
    nb.cells.append(nbformat.v4.new_code_cell(DUMP))
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / path.name
        nbformat.write(nb, src)
        env = dict(os.environ, KITLIB_MODE="replay", MPLBACKEND="Agg", PYTHONPATH=str(ROOT))
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, str(ROOT / "tests" / "support" / "run_notebook.py"), str(src),
                            str(Path(tmp) / "out.ipynb"), "--timeout", "600"],
                           cwd=tmp, env=env, capture_output=True, text=True)
        wall = time.monotonic() - t0
        if p.returncode:
            return {"run_s": round(wall, 1), "error": p.stderr[-2000:]}
        out = nbformat.read(Path(tmp) / "out.ipynb", 4)
        text = "".join(o.get("text", "") for o in out.cells[-1].outputs)
        kinds = json.loads(text.split("KINDS=", 1)[1].splitlines()[0])
        return {"run_s": round(wall, 1), "questions": len(kinds), "kinds": dict(Counter(kinds))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lessons", nargs="*")
    ap.add_argument("--run", action="store_true")
    a = ap.parse_args()
    res = {}
    for path in sorted((ROOT / "lessons").glob("[0-9][0-9]_*.ipynb")):
        nn = path.name[:2]
        if a.lessons and nn not in a.lessons:
            continue
        row = static(nbformat.read(path, 4))
        if a.run:
            row.update(run(path))
        res[nn] = row
        print(nn, json.dumps(row), file=sys.stderr, flush=True)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
