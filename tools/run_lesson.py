"""Run a lesson notebook's code cells as a plain script (no Jupyter needed).

    python tools/run_lesson.py lessons/02_*.ipynb [--figures DIR]

Each code cell runs in one namespace, in order; the value of a cell's last
expression is printed (as a notebook would show it) and every open matplotlib
figure is saved to DIR. Used to check lessons live on a GPU machine that has no
Jupyter installed. Exit status 1 if any cell raised.
"""
import argparse
import ast
import json
import os
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("notebooks", nargs="+")
    ap.add_argument("--figures", default=None)
    a = ap.parse_args()
    import matplotlib.pyplot as plt
    import pandas as pd
    pd.set_option("display.width", 200)  # print tables whole, as a notebook shows them
    pd.set_option("display.max_columns", 30)
    failed = 0
    for nbp in a.notebooks:
        nb = json.loads(Path(nbp).read_text())
        ns = {"__name__": "__main__", "display": lambda *objs: [print(str(o)[:3000]) for o in objs]}
        t0 = time.time()
        print(f"\n######## {nbp}", flush=True)
        for i, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
            src = "".join(cell["source"])
            try:
                tree = ast.parse(src)
                last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
                if last is not None:
                    tree.body = tree.body[:-1]
                exec(compile(tree, f"{nbp}:cell{i}", "exec"), ns)
                if last is not None:
                    val = eval(compile(ast.Expression(last.value), f"{nbp}:cell{i}", "eval"), ns)
                    if val is not None and not type(val).__name__ in ("Figure", "Axes"):
                        print(str(val)[:3000], flush=True)
            except Exception:
                failed += 1
                print(f"!!!! cell {i} raised:\n{traceback.format_exc()}", flush=True)
            if a.figures:
                for k in plt.get_fignums():
                    Path(a.figures).mkdir(parents=True, exist_ok=True)
                    plt.figure(k).savefig(Path(a.figures) / f"{Path(nbp).stem[:2]}_cell{i}_{k}.png", dpi=70)
            plt.close("all")
        print(f"######## {nbp}: {time.time() - t0:.1f} s", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
