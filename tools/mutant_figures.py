"""Does a surviving mutant change a figure on the shipped recordings? Printed, never asserted.

    mutmut run --max-children 1 "kitlib.analyses.steps.x_step_measures*"    # first: the survivors
    python tools/mutant_figures.py kitlib.analyses.steps.step_measures     # then: which of them matter

mutmut reports a mutant as "survived" when no selected test failed; that alone does not
say whether the edit would change anything a learner reads. This script calls the named
analysis on every recording the kit ships (each torch.profiler trace under
``data/reference``, the public NCCL ranks included, and each Nsight Systems export where the function takes a report),
once unmutated and once per surviving mutant of that function (mutmut's ``mutants/``
copy, the mutant switched on with ``MUTANT_UNDER_TEST`` as mutmut itself does), and
compares the outputs: values, columns, dtypes, index and ``attrs`` of every table, or the
error raised. A mutant listed under "changes a figure" needs a test; one under "same
figures" is equivalent on the shipped recordings (a boundary, tie or default that they
never reach) and is named as such in the README.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import pickle
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = r'''
import hashlib, importlib, pickle, sys, warnings
from pathlib import Path
warnings.simplefilter("ignore")
import pandas as pd
import kitlib
from kitlib.readers.nsys import load_nsys
mod_name, fn_name = sys.argv[1].rsplit(".", 1)
fn = getattr(importlib.import_module(mod_name), fn_name)
call = sys.argv[2]
import numpy as np
from kitlib import analyses
ref = Path("data/reference")
traces = set(ref.rglob("trace.json.gz")) | set((ref / "public-traces").glob("*.json.gz"))
if sys.argv[3] == "ranks":     # multi-rank analyses: each folder of rank traces, read with load_traces
    sources = [(str(p), lambda p=p: kitlib.load_traces(p))
               for p in (ref / "ranks_balanced", ref / "ranks_straggler", ref / "public-traces")]
else:
    sources = [(str(p), lambda p=p: kitlib.load_trace(p)) for p in sorted(traces)]
    sources += [(str(p), lambda p=p: load_nsys(p)) for p in sorted(ref.rglob("report.sqlite"))]

def digest(obj):
    if isinstance(obj, pd.DataFrame):
        return ("frame", list(map(str, obj.columns)), [str(t) for t in obj.dtypes], list(obj.index[:3]),
                len(obj), repr(obj.attrs), hashlib.sha256(pd.util.hash_pandas_object(
                    obj.map(repr), index=True).to_numpy().tobytes()).hexdigest())  # repr: None is not NaN
    if isinstance(obj, pd.Series):
        return digest(obj.to_frame())
    if isinstance(obj, dict):
        return ("dict", sorted((str(k), digest(v)) for k, v in obj.items()))
    if isinstance(obj, (list, tuple)):
        return ("seq", [digest(v) for v in obj])
    return ("value", repr(obj))

out = {}
for name, load in sources:
    try:
        src = load()
    except Exception as e:
        continue
    try:
        out[name] = digest(eval(call, {"fn": fn, "src": src, "kitlib": kitlib, "pd": pd, "np": np,
                                       "analyses": analyses, "importlib": importlib}))
    except Exception as e:
        out[name] = ("error", type(e).__name__, str(e)[:300])
sys.stdout.buffer.write(pickle.dumps(out))
'''


def _run(function: str, mutant: str, call: str = "fn(src)", mutants: Path = ROOT / "mutants",
         sources: str = "files") -> dict:
    env = {**os.environ, "MUTANT_UNDER_TEST": mutant, "KITLIB_PROGRESS": "0", "KITLIB_TRACE_CACHE": "0",
           "PYTHONPATH": str(mutants)}
    r = subprocess.run([sys.executable, "-c", _CHILD, function, call, sources], cwd=mutants, env=env,
                       capture_output=True, timeout=900)
    if r.returncode != 0:
        return {"<crash>": r.stderr.decode(errors="replace")[-300:]}
    return pickle.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("function", help="dotted name, e.g. kitlib.analyses.steps.step_measures")
    ap.add_argument("--call", default="fn(src)",
                    help="how to call it on one recording `src` (a Trace or an NsysReport), e.g. "
                         "\"fn(analyses.steps.device_work(src), src.steps[['step', 'start_ns', 'end_ns']])\"")
    ap.add_argument("mutants", nargs="*", help="mutant names (default: the survivors `mutmut results` lists)")
    ap.add_argument("--ranks", action="store_true",
                    help="call it on each folder of rank traces instead (ranks_balanced, ranks_straggler, "
                         "the public NCCL pair; `src` is a RankTraces)")
    ap.add_argument("--mutants-dir", type=Path, default=ROOT / "mutants",
                    help="mutmut's mutants/ folder (default: the repository's; a copy lets the next "
                         "`mutmut run` start meanwhile)")
    a = ap.parse_intermixed_args()      # mutant names may follow the options
    if not a.mutants_dir.is_dir():
        sys.exit(f"no {a.mutants_dir} folder: run `mutmut run` first (see the README's mutation-testing section)")
    mod, fn = a.function.rsplit(".", 1)
    prefix = f"{mod}.x_{fn}__mutmut_"
    names = a.mutants or [line.split(":")[0].strip() for line in subprocess.run(
        ["mutmut", "results"], cwd=ROOT, capture_output=True, text=True).stdout.splitlines()
        if line.strip().startswith(prefix) and line.strip().endswith("survived")]
    kind = "ranks" if a.ranks else "files"
    base = _run(a.function, "", a.call, a.mutants_dir, kind)
    errors = sum(1 for v in base.values() if v and v[0] == "error")
    print(f"{a.function}: {len(base)} shipped recordings ({errors} where the unmutated call raises), "
          f"{len(names)} surviving mutants")
    changed, same = [], []
    for n in names:
        got = _run(a.function, n, a.call, a.mutants_dir, kind)
        diff = sorted(k for k in set(base) | set(got) if base.get(k) != got.get(k))
        (changed if diff else same).append(n)
        print(f"  {n.rsplit('_', 1)[-1]:>4}  {'changes a figure: ' + ', '.join((Path(d).name if a.ranks else Path(d).parent.name) or d for d in diff) if diff else 'same figures'}",
              flush=True)
    print(f"changes a figure: {len(changed)}; same figures on every shipped recording: {len(same)}")


# -- kitlib/plots: mutants made here, judged by what the pictures draw ----------------------
#
#     python tools/mutant_figures.py --plots kitlib.plots.grouping [--only plot_shapes,_bars]
#         [--json out.json] [--budget-s 1800] [--timeout 300]
#
# mutmut is too slow for the plots on a shared two-core machine, and a picture is judged by
# what it draws, not by a table: so this mode makes its own mutants (one edit of the
# module's syntax tree each, inside its functions: a comparison or arithmetic operator
# swapped, a number n -> n + 1, a unary minus dropped (``[::-1]`` -> ``[::1]``), and/or,
# True/False, a string constant wrapped in XX (mutmut's string edit: *wording* where only
# a text changes), a call statement dropped (``ax.invert_yaxis()``, ``ax.legend(...)``),
# ``return x`` -> ``return None``), and judges each in a process forked from one that has
# read the recordings and worked out the lessons' tables once:
#
# 1. the module is executed again with the edit, in place (names other kitlib.plots modules
#    imported from it are re-bound), and the pictures the edited function takes part in are
#    drawn as the lessons draw them, at scale 1 and at the projector's 1.5;
# 2. every artist is read back (titles, labels, ticks, bars, lines, collections' paths and
#    colours, texts and their sizes, legends, figure size) and hashed: the same digest as
#    unmutated -> "same picture" (equivalent on the shipped recordings);
# 3. otherwise the tests of that picture in tests/plots/test_plots_drawn.py run (pytest -x, in the
#    child): a failure kills the mutant; a pass leaves a survivor that changes a picture,
#    which is a missing test (docs/MUTATION.md), unless only wording changed.

PLOT_TESTS = {   # plot function -> the -k expression of its tests in tests/plots/test_plots_drawn.py
    "plot_chain": "chain", "plot_step_timeline": "step_timeline_rows or profiler_trace", "plot_step_times": "step_times",
    "plot_device_time_counted": "device_time_counted", "plot_achieved_vs_peak": "achieved",
    "plot_ncu_speed_of_light": "ncu", "plot_shapes": "shapes", "plot_callsites": "callsites",
    "plot_attribution_cost": "attribution_cost", "plot_memory_over_time": "memory_over_time",
    "plot_memory_categories": "memory_categories", "plot_rank_timeline": "rank_timeline",
    "plot_routes": "routes", "plot_attribution": "attribution_bars", "plot_timeline": "lanes_and_gaps or profiler_trace",
    "plot_four_measures": "four_measures"}
#: The pictures a helper function takes part in (module-level helpers: the module's pictures).
PLOT_HELPERS = {"_bars": ["plot_shapes", "plot_callsites"], "_short_shapes": ["plot_shapes", "plot_callsites"],
                "timeline_rows": ["plot_timeline"], "_series_label": ["plot_step_times"],
                "_label_levels": ["plot_chain"]}


def _plot_mutants(source: str, only: set | None) -> list:
    """Every single-edit mutant of a module's functions: (function, line, description, new source)."""
    import ast
    import copy
    tree = ast.parse(source)
    cmp = {ast.Lt: ast.GtE, ast.LtE: ast.Gt, ast.Gt: ast.LtE, ast.GtE: ast.Lt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
           ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
    binop = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
             ast.Mod: ast.Mult, ast.Pow: ast.Mult}
    sites = []   # (function, path to node, kind)

    def visit(node, fn, path):
        for field, value in ast.iter_fields(node):
            items = value if isinstance(value, list) else [value]
            for i, child in enumerate(items):
                if not isinstance(child, ast.AST):
                    continue
                p = path + [(field, i if isinstance(value, list) else None)]
                name = fn
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn is None:
                    name = child.name
                if name is not None and (only is None or name in only):
                    if isinstance(child, ast.JoinedStr):
                        sites.append((name, p, "fstring"))
                        continue         # its parts are one wording
                    if isinstance(child, ast.Compare) and type(child.ops[0]) in cmp:
                        sites.append((name, p, "compare"))
                    elif isinstance(child, ast.BinOp) and type(child.op) in binop:
                        sites.append((name, p, "binop"))
                    elif isinstance(child, ast.BoolOp):
                        sites.append((name, p, "boolop"))
                    elif isinstance(child, ast.UnaryOp) and isinstance(child.op, (ast.USub, ast.Not)):
                        sites.append((name, p, "unary"))
                    elif isinstance(child, ast.Constant) and isinstance(child.value, bool):
                        sites.append((name, p, "bool"))
                    elif isinstance(child, ast.Constant) and isinstance(child.value, (int, float)):
                        sites.append((name, p, "number"))
                    elif isinstance(child, ast.Constant) and isinstance(child.value, str) and child.value \
                            and not (field == "body" and isinstance(node, ast.Expr)):
                        if not (isinstance(node, ast.Expr)):      # not a docstring
                            sites.append((name, p, "string"))
                    elif isinstance(child, ast.Expr) and isinstance(child.value, ast.Call):
                        sites.append((name, p, "dropcall"))
                    elif isinstance(child, ast.Return) and child.value is not None \
                            and not (isinstance(child.value, ast.Constant) and child.value.value is None):
                        sites.append((name, p, "return"))
                visit(child, name, p)

    visit(tree, None, [])
    out = []
    for fn, path, kind in sites:
        t = copy.deepcopy(tree)
        parent, node = None, t
        for field, i in path:
            parent = (node, field, i)
            node = getattr(node, field) if i is None else getattr(node, field)[i]
        line = getattr(node, "lineno", 0)

        def put(new):
            owner, field, i = parent
            if i is None:
                setattr(owner, field, new)
            else:
                getattr(owner, field)[i] = new
        if kind == "compare":
            node.ops[0] = cmp[type(node.ops[0])]()
            desc = f"comparison -> {type(node.ops[0]).__name__}"
        elif kind == "binop":
            node.op = binop[type(node.op)]()
            desc = f"operator -> {type(node.op).__name__}"
        elif kind == "boolop":
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            desc = f"boolean -> {type(node.op).__name__}"
        elif kind == "unary":
            put(node.operand)
            desc = f"{type(node.op).__name__} dropped"
        elif kind == "bool":
            node.value = not node.value
            desc = f"{not node.value} -> {node.value}"
        elif kind == "number":
            old = node.value
            node.value = old + 1
            desc = f"{old!r} -> {node.value!r}"
        elif kind == "string":
            desc = f"{node.value[:30]!r} -> XX…XX"
            node.value = f"XX{node.value}XX"
        elif kind == "fstring":
            node.values.insert(0, ast.Constant("XX"))
            desc = "f-string -> XX…"
        elif kind == "dropcall":
            desc = f"call dropped: {ast.unparse(node)[:50]}"
            put(ast.Pass())
        elif kind == "return":
            desc = f"return {ast.unparse(node.value)[:30]} -> return None"
            node.value = ast.Constant(None)
        ast.fix_missing_locations(t)
        out.append((fn, line, kind, desc, ast.unparse(t)))
    return out


def _plot_tables():
    """The lessons' tables and recordings, worked out once (in the parent): {picture name: draw()}."""
    import matplotlib
    matplotlib.use("Agg")
    sys.path.insert(0, str(ROOT / "tests"))
    import tempfile
    from plots import test_plots_drawn as T      # the tests' own builders, reading the same recordings
    tmp = Path(tempfile.mkdtemp(prefix="plot-mutants-"))
    from kitlib.analyses import align as A, collectives as C, flop_rates, flops, four_measures, grouping, memory
    from kitlib.analyses import callsites, steps
    for mod, names in ((A, ["align"]), (memory, ["memory_timeline", "memory_peak"]),
                       (flop_rates, ["matched_rates"]), (flops, ["device_time_covered", "peak_table"]),
                       (four_measures, ["four_measures"]), (grouping, ["shape_table"]),
                       (callsites, ["callsites", "group_by_callsite"]), (steps, ["step_gaps", "steps_of"]),
                       (C, ["rank_step_times", "collectives", "collective_waits"])):
        for n in names:      # the analyses are not mutated here: each table worked out once
            f = getattr(mod, n)
            cache = {}

            def cached(*a, __f=f, __c=cache, **k):
                key = (tuple(id(x) for x in a), tuple(sorted((kk, id(v)) for kk, v in k.items())))
                if key not in __c:
                    __c[key] = (a, k, __f(*a, **k))        # keeps the arguments alive: ids stay unique
                return __c[key][2]
            setattr(mod, n, cached)
    T.memo = lambda key, make, _m={}: _m[key] if key in _m else _m.setdefault(key, make())   # kept across tests
    return T._pictures(tmp), T      # the builders, with the analyses they import already cached


def _digest_figure(fig) -> tuple:
    """What a picture draws, read back the way the tests read it, as two hashes: the *data*
    (every bar, line, collection path and segment, marker and text in data coordinates, their
    colours and labels, the legend's texts and colours, axis labels and titles, the tick labels
    of axes whose ticks the code sets, and whether each artist lies inside the visible limits)
    and the *layout* (figure size, font sizes, limits, numeric ticks, marker sizes)."""
    import numpy as np
    from matplotlib.colors import to_rgba
    from matplotlib.ticker import FixedLocator
    fig.canvas.draw()
    data, layout = [], [("size", tuple(np.round(fig.get_size_inches(), 4)))]

    def col(c):
        try:
            return tuple(np.round(np.atleast_2d(np.asarray(c, dtype=float)), 4).ravel())
        except (TypeError, ValueError):
            return tuple(np.round(to_rgba(c), 4))

    def arr(v):
        return np.round(np.asarray(v, dtype=float), 6)

    for ax in fig.axes:
        (x0, x1), (y0, y1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
        ex, ey = (x1 - x0) * 1e-6 + 1e-12, (y1 - y0) * 1e-6 + 1e-12

        def inside(xy):
            xy = np.asarray(xy, dtype=float).reshape(-1, 2)
            xy = xy[np.isfinite(xy).all(axis=1)]
            return bool(len(xy) == 0 or ((xy[:, 0] >= x0 - ex) & (xy[:, 0] <= x1 + ex)
                                         & (xy[:, 1] >= y0 - ey) & (xy[:, 1] <= y1 + ey)).all())
        ticks = []
        for axis, get_t, get_l in ((ax.xaxis, ax.get_xticks, ax.get_xticklabels),
                                   (ax.yaxis, ax.get_yticks, ax.get_yticklabels)):
            pairs = tuple((round(float(t), 6), lab.get_text()) for t, lab in zip(get_t(), get_l()))
            def numeric(text):
                try:
                    float(text.replace("−", "-").replace(",", "") or "0")
                    return True
                except ValueError:
                    return False
            if isinstance(axis.get_major_locator(), FixedLocator) or not all(numeric(t) for _, t in pairs):
                ticks.append(pairs)      # names (set_yticks, or barh's categories): what each row is
            else:     # numeric ticks move with the limits (layout); whether each label says its value is data
                layout.append(pairs)
                honest = []
                for pos, text in pairs:
                    t = text.replace("−", "-").replace(",", "")
                    try:
                        digits = len(t.split(".")[1]) if "." in t else 0
                        honest.append(abs(float(t) - pos) <= 0.5 * 10 ** -digits + 1e-9 * abs(pos))
                    except ValueError:
                        honest.append(text == "" or None)
                ticks.append(("honest", tuple(honest).count(False)))
        data.append(("axes", ax.get_title(), ax.get_xlabel(), ax.get_ylabel(), ax.get_xscale(), ax.get_yscale(),
                      ax.xaxis_inverted(), ax.yaxis_inverted(), tuple(ticks)))
        layout.append(("axes", (x0, x1, y0, y1), ax.title.get_fontsize(), ax.xaxis.label.get_fontsize(),
                       tuple(lab.get_fontsize() for lab in ax.get_xticklabels() + ax.get_yticklabels())))
        for c in ax.collections:
            paths = [arr(p.vertices).tobytes() for p in c.get_paths()]
            segs = [arr(s_).tobytes() for s_ in getattr(c, "get_segments", lambda: [])()]
            vis = all(inside(p.vertices) for p in c.get_paths())
            data.append(("coll", type(c).__name__, c.get_label(), hashlib.sha256(b"".join(paths + segs)).hexdigest(),
                          col(c.get_facecolor()), col(c.get_edgecolor()), vis))
        for ln in ax.lines:
            xy = np.column_stack([arr(ln.get_xdata()), arr(ln.get_ydata())])
            data.append(("line", ln.get_label(), xy.tobytes(), col(ln.get_color()), ln.get_marker(),
                         ln.get_linestyle(), ln.get_drawstyle(), inside(xy) if ln.get_transform() is ax.transData else None))
            layout.append(("marker", round(ln.get_markersize(), 4), ln.get_linewidth()))
        for p in ax.patches:
            if hasattr(p, "_posA_posB") and p._posA_posB is not None:
                xy = arr(p._posA_posB)
            else:
                xy = arr(p.get_patch_transform().transform(p.get_path().vertices))
            data.append(("patch", type(p).__name__, xy.tobytes(), col(p.get_facecolor()), col(p.get_edgecolor()),
                         inside(xy) if p.get_transform().contains_branch(ax.transData) else None))
        for t in ax.texts:
            pos = arr(t.get_position())
            data.append(("text", t.get_text(), pos.tobytes(), col(t.get_color()),
                         inside(pos) if t.get_transform() is ax.transData else None))
            layout.append(("textsize", t.get_fontsize()))
        leg = ax.get_legend()
        if leg is not None:
            data.append(("legend", tuple(t.get_text() for t in leg.get_texts()),
                         tuple(col(h.get_facecolor() if hasattr(h, "get_facecolor") else h.get_color())
                               for h in leg.legend_handles)))
            layout.append(("legend", tuple(t.get_fontsize() for t in leg.get_texts())))
    h = lambda v: hashlib.sha256(repr(v).encode()).hexdigest()  # noqa: E731
    return h(data), h(layout)


def _run_in_place(module, source: str) -> None:
    """Run ``source`` as ``module`` (in a forked child): its functions are replaced in place,
    and every kitlib module that imported one of them by name gets the new one."""
    old = dict(vars(module))
    exec(compile(source, module.__file__, "exec"), vars(module))
    for m in list(sys.modules.values()):
        if getattr(m, "__name__", "").startswith("kitlib.") and m is not module:
            for n, v in list(vars(m).items()):
                for on, ov in old.items():
                    if v is ov and callable(ov) and on in vars(module) and vars(module)[on] is not ov:
                        setattr(m, n, vars(module)[on])


def _judge_plot_mutant(module, source: str, names: list, pictures: dict, base: dict, k: str, timeout: int):
    """In a forked child: apply the mutant, draw, compare, run the tests. Returns a verdict."""
    import select
    import signal
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:      # the child
        os.close(r)
        verdict = "error"
        try:
            import io
            import contextlib
            import matplotlib.pyplot as plt
            from kitlib import plots
            _run_in_place(module, source)
            changed = layout = False
            try:
                for scale in (1.0, 1.5):
                    plots.set_scale(scale)
                    for n in names:
                        d = _digest_figure(pictures[n]())
                        plt.close("all")
                        changed |= d[0] != base[(n, scale)][0]
                        layout |= d[1] != base[(n, scale)][1]
                        if changed:
                            break
                    if changed:
                        break
            except Exception:
                changed = True
            plots.set_scale(1.0)
            if not changed:
                verdict = "layout only" if layout else "same picture"
            else:
                import pytest
                buf = io.StringIO()
                with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
                    code = pytest.main([str(ROOT / "tests" / "plots" / "test_plots_drawn.py"), "-x", "-q", "-p", "no:cacheprovider",
                                        "-k", k, "-W", "ignore", "-o", "addopts=", "-p", "no:doctest"])
                verdict = "killed" if code == 1 else "survived" if code == 0 else f"pytest exit {int(code)}"
        except BaseException as e:   # noqa: BLE001
            verdict = f"error: {type(e).__name__}: {str(e)[:80]}"
        os.write(w, verdict.encode())
        os._exit(0)
    os.close(w)
    ready, _, _ = select.select([r], [], [], timeout)
    if not ready:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(r)
        return "timeout"
    out = b""
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        out += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return out.decode() or "error: no verdict"


def plots_main(argv):
    import importlib
    import json
    import time
    ap = argparse.ArgumentParser(description="mutants of a kitlib.plots module, judged by the pictures")
    ap.add_argument("module", help="e.g. kitlib.plots.grouping")
    ap.add_argument("--only", default="", help="comma-separated function names (default: every function)")
    ap.add_argument("--json", type=Path, help="write every mutant's verdict here")
    ap.add_argument("--budget-s", type=float, default=1800, help="stop starting mutants after this many seconds")
    ap.add_argument("--timeout", type=int, default=300, help="a mutant still running after this is killed (caught)")
    ap.add_argument("--rerun", type=Path, help="a --json file of an earlier run: judge again only its survivors and "
                                                "its layout-only mutants (matched by function, edit and their order), "
                                                "e.g. after new tests")
    a = ap.parse_args(argv)
    os.environ.setdefault("KITLIB_PROGRESS", "0")
    t_start = time.time()
    module = importlib.import_module(a.module)
    source = Path(module.__file__).read_text()
    pictures, _ = _plot_tables()
    only = set(filter(None, a.only.split(","))) or None
    mutants = _plot_mutants(source, only)
    seen = {}
    keyed = []
    for m in mutants:        # a mutant's name: its function, its edit, and which such edit of the function
        key = (m[0], m[3])
        seen[key] = seen.get(key, -1) + 1
        keyed.append((key + (seen[key],), m))
    if a.rerun:
        import json as _json
        old_run = _json.loads(a.rerun.read_text())["mutants"]
        again = {(r["function"], r["edit"], r.get("n", 0)) for r in old_run
                 if r["verdict"].startswith("survived") or r["verdict"] == "layout only"}
        keyed = [(k, m) for k, m in keyed if k in again]
    mutants = [m for _, m in keyed]
    ordinal = [k[2] for k, _ in keyed]
    short = a.module.rsplit(".", 1)[-1]
    own = [n for n in PLOT_TESTS if n in vars(module)] if short != "plots" else list(PLOT_TESTS)

    def affected(fn):
        if fn in PLOT_TESTS:
            return [fn]
        if fn in PLOT_HELPERS:
            return PLOT_HELPERS[fn]
        return own or list(PLOT_TESTS)
    import matplotlib.pyplot as plt
    from kitlib import plots
    base = {}
    for n in sorted({p for fn, *_ in mutants for p in affected(fn)}):
        for scale in (1.0, 1.5):
            plots.set_scale(scale)
            base[(n, scale)] = _digest_figure(pictures[n]())
            again = _digest_figure(pictures[n]())
            assert again == base[(n, scale)], f"{n}: two unmutated drawings differ"
            plt.close("all")
    plots.set_scale(1.0)
    import contextlib
    import io
    import pytest
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        pytest.main([str(ROOT / "tests" / "plots" / "test_plots_drawn.py"), "-q", "-p", "no:cacheprovider", "--collect-only",
                     "-o", "addopts=", "-p", "no:doctest"])      # warm: children start from a collected pytest
    print(f"{a.module}: {len(mutants)} mutants; pictures ready in {time.time() - t_start:.0f} s", flush=True)
    results = []
    for (fn, line, kind, desc, src), n_th in zip(mutants, ordinal):
        if time.time() - t_start > a.budget_s:
            results.append({"function": fn, "line": line, "kind": kind, "edit": desc, "n": n_th,
                            "verdict": "not run (budget)"})
            continue
        names = affected(fn)
        k = "(" + " or ".join(f"({PLOT_TESTS[n]})" for n in names) + ") and not projector"   # the digest saw both scales
        t0 = time.time()
        v = _judge_plot_mutant(module, src, names, pictures, base, k, a.timeout)
        if v == "survived" and kind in ("string", "fstring"):
            v = "survived (wording)"
        results.append({"function": fn, "line": line, "kind": kind, "edit": desc, "n": n_th, "verdict": v})
        print(f"  {fn:28s} line {line:4d}  {desc[:60]:60s} {v}  ({time.time() - t0:.1f} s)", flush=True)
    counts = {}
    for r in results:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    print(f"{a.module}: {len(results)} mutants: " + ", ".join(f"{v}: {n}" for v, n in sorted(counts.items())))
    if a.json:
        a.json.write_text(json.dumps({"module": a.module, "counts": counts, "mutants": results}, indent=1))


# -- the one-line picture bugs of issue 31, each made on purpose --------------------------
#
#     python tools/mutant_figures.py --plots-bugs [WORDS ...]      # only those whose name has a word
#
# Each bug below is the kind a reviewer made by hand (issue 31: a shape chart drawing
# per-call times under "total device time", a memory line in GiB on a GB axis, a median
# bar drawn at the mean; and for each plot function a swapped series, a unit factor, a
# wrong statistic or a wrong row order). Each is applied in memory, in a forked process
# (the file on disk is never touched), and the picture's tests in tests/plots/test_plots_drawn.py
# run against it: every one must be caught.

PLOT_BUGS = [
 # (id, file, old, new, -k expression)
 ("shapes per-call under total", "grouping.py", 'fig, ax, ms = _bars(t, t["device_total_ns"]', 'fig, ax, ms = _bars(t, t["device_per_call_ns"]', "shapes"),
 ("memory GiB under GB", "memory.py", "from ..units import bytes_to_gb, ns_to_ms", "from ..units import ns_to_ms\nbytes_to_gb = lambda b: b / 2**30", "memory_over_time"),
 ("step_times median at mean", "__init__.py", "ax.hlines(np.median(v)", "ax.hlines(np.mean(v)", "step_times"),
 ("attribution_cost median at mean", "grouping.py", "[np.median(v)] * 2", "[np.mean(v)] * 2", "attribution_cost"),
 ("chain µs as ms", "__init__.py", "us = lambda ns: ns_to_us(np.asarray(ns, dtype=\"float64\") - t0)", "us = lambda ns: ns_to_us(np.asarray(ns, dtype=\"float64\") - t0) / 1000", "chain"),
 ("chain arrow to wrong gpu", "__init__.py", "ax.add_patch(FancyArrowPatch((ls + ld / 2, y_l - h / 2), (gs, y_g + h / 2)", "ax.add_patch(FancyArrowPatch((ls + ld / 2, y_l - h / 2), (gs + gd, y_g + h / 2)", "chain"),
 ("step_timeline kind colour swapped", "__init__.py", "color=COLORS.get(kind, \"gray\"), label=kind)", "color=COLORS.get(kind, \"gray\"), label={'kernel': 'memset', 'memset': 'kernel'}.get(kind, kind))", "step_timeline"),
 ("step_timeline x in µs", "__init__.py", "ms = lambda ns: ns_to_ms(np.asarray(ns, dtype=\"float64\") - t0)", "ms = lambda ns: ns_to_us(np.asarray(ns, dtype=\"float64\") - t0)", "step_timeline"),
 ("step_times series swapped", "__init__.py", "for i, (lab, vals) in enumerate(series.items()):", "for i, (lab, vals) in enumerate(list(series.items())[::-1]):", "step_times"),
 ("device_time_counted not reversed", "flops.py", "top = covered.head(n).iloc[::-1]", "top = covered.head(n)", "device_time_counted"),
 ("device_time_counted µs", "flops.py", 'ns_to_ms(top["device_time_ns"])', 'top["device_time_ns"] / 1e3', "device_time_counted"),
 ("achieved FP32 column", "flops.py", 'col = f"{precision}_tflops"', 'col = "FP32_tflops"', "achieved"),
 ("ncu metrics swapped", "flops.py", '["Compute (SM) Throughput", "Memory Throughput"]', '["Memory Throughput", "Compute (SM) Throughput"]', "ncu"),
 ("ncu kernels unordered", "flops.py", "x = np.arange(len(w))", "x = np.arange(len(w))[::-1]", "ncu"),
 ("shapes sorted by count", "grouping.py", 't = table.head(top).iloc[::-1]\n    fig, ax, ms = _bars(t, t["device_total_ns"]', 't = table.sort_values("count", ascending=False).head(top).iloc[::-1]\n    fig, ax, ms = _bars(t, t["device_total_ns"]', "shapes"),
 ("callsites host self", "grouping.py", 'fig, ax, ms = _bars(t, t["device_self_ns"]', 'fig, ax, ms = _bars(t, t["host_self_ns"]', "callsites"),
 ("attribution_cost MiB", "grouping.py", 'sizes["gzip_bytes"].to_numpy() / 1e6', 'sizes["gzip_bytes"].to_numpy() / 2**20', "attribution_cost"),
 ("attribution_cost json bytes", "grouping.py", 'sizes["gzip_bytes"].to_numpy()', 'sizes["json_bytes"].to_numpy()', "attribution_cost"),
 ("memory lines swapped", "memory.py", 'ax.step(t_ms, bytes_to_gb(timeline["reserved_bytes"])', 'ax.step(t_ms, bytes_to_gb(timeline["allocated_bytes"])', "memory_over_time"),
 ("memory peak at last", "memory.py", 'ax.plot([x], [bytes_to_gb(peak["allocated_bytes"])], "v"', 'ax.plot([x], [bytes_to_gb(timeline["allocated_bytes"].iloc[-1])], "v"', "memory_over_time"),
 ("categories MB", "memory.py", "from ..units import bytes_to_mib", "bytes_to_mib = lambda b: b / 1e6", "categories"),
 ("categories reversed", "memory.py", "ax.stackplot(x, *[bytes_to_mib(timeline[f\"{c}_bytes\"]) for c in cats], labels=cats", "ax.stackplot(x, *[bytes_to_mib(timeline[f\"{c}_bytes\"]) for c in cats[::-1]], labels=cats", "categories"),
 ("rank wait/transfer swapped", "ranks.py", 'facecolors=COLOURS["wait"])', 'facecolors=COLOURS["transfer"])', "rank"),
 ("rank ms as s", "ranks.py", "ms = lambda ns: (ns - origin) / 1e6", "ms = lambda ns: (ns - origin) / 1e9", "rank"),
 ("routes transposed", "routes.py", "ax.plot(x, y, \"o\"", "ax.plot(y % len(tools), x, \"o\"", "routes"),
 ("attribution rules swapped", "system.py", "a, b = med(by_thread), med(by_time)", "a, b = med(by_time), med(by_thread)", "attribution_bars"),
 ("attribution mean", "system.py", "[col].median().dropna()", "[col].mean().dropna()", "attribution_bars"),
 ("attribution with step 0", "system.py", 't = t[(t["step"] > 0) & (t["label"] != "step")]', 't = t[(t["step"] >= 0) & (t["label"] != "step")]', "attribution_bars"),
 ("timeline origin", "timeline.py", "bars = list(zip(ns_to_ms(g[\"start_ns\"] - t0)", "bars = list(zip(ns_to_ms(g[\"start_ns\"] - start_ns)", "timeline"),
 ("timeline gaps end", "timeline.py", "ns_to_ms(gp.start_ns + gp.dur_ns - t0)", "ns_to_ms(gp.start_ns + gp.dur_ns)", "timeline"),
 ("timeline stream lanes kind swap", "timeline.py", '+ {"memcpy": 0, "kernel": 1, "memset": 2}[k], kind=k))', '+ {"memcpy": 0, "kernel": 1, "memset": 2}[k], kind={"kernel": "memset", "memset": "kernel"}.get(k, k)))', "timeline"),
 ("four measures clocks swapped", "timeline.py", 'colors = ["#4C72B0" if c == "host" else "#55A868" for c in m["clock"]]', 'colors = ["#55A868" if c == "host" else "#4C72B0" for c in m["clock"]]', "four_measures"),
 ("four measures µs", "timeline.py", 'ax.barh(m["measure"], ns_to_ms(m["value_ns"])', 'ax.barh(m["measure"], m["value_ns"] / 1e3', "four_measures"),
 ("four measures order", "timeline.py", "m = measures.iloc[::-1]", "m = measures", "four_measures"),
 ("step_times tick labels in cs", "__init__.py", 'ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda y, _: f"{y:,.0f}"))',
  'ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda y, _: f"{y / 10:,.0f}"))', "every_picture"),
 # the two bugs of kitlib/plots these tests found (1 December): put back, they must fail
 ("timeline OS lanes among the streams", "timeline.py", "order=20 + i,", "order=20 + tid % 1000,", "lanes_and_gaps"),
 ("timeline labels in the memsets' colour", "timeline.py", '_COLORS = {"range": _KIT_COLORS["annotation"]',
  '_COLORS = {"memset": "#937860", "range": _KIT_COLORS["memset"]', "profiler_trace"),
]


def _run_bug(module, source: str, k: str) -> str:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            import contextlib
            import io
            import pytest
            _run_in_place(module, source)
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
                code = pytest.main([str(ROOT / "tests" / "plots" / "test_plots_drawn.py"), "-x", "-q", "-p", "no:cacheprovider",
                                    "-k", k, "-o", "addopts=", "-p", "no:doctest"])
            fails = [ln for ln in buf.getvalue().splitlines() if ln.startswith("FAILED")]
            out = ("caught by " + fails[0].split("::", 1)[-1].split(" ")[0]) if code == 1 else \
                  "MISSED" if code == 0 else f"pytest exit {int(code)}"
        except BaseException as e:   # noqa: BLE001
            out = f"error: {type(e).__name__}: {e}"
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    out = b""
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        out += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return out.decode()


def plot_bugs_main(words):
    import importlib
    import matplotlib
    matplotlib.use("Agg")
    os.environ.setdefault("KITLIB_PROGRESS", "0")
    sys.path.insert(0, str(ROOT / "tests"))
    missed = 0
    for name, fname, old, new, k in PLOT_BUGS:
        if words and not any(w in name for w in words):
            continue
        mod_name = "kitlib.plots" if fname == "__init__.py" else f"kitlib.plots.{fname[:-3]}"
        module = importlib.import_module(mod_name)
        source = Path(module.__file__).read_text()
        if source.count(old) != 1:
            print(f"  {name:40s} the line to break is no longer there once: update PLOT_BUGS", flush=True)
            missed += 1
            continue
        verdict = _run_bug(module, source.replace(old, new), k)
        missed += not verdict.startswith("caught")
        print(f"  {name:40s} {verdict}", flush=True)
    print("every bug caught" if not missed else f"{missed} bug(s) not caught")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--plots":
        plots_main(sys.argv[2:])
    elif len(sys.argv) > 1 and sys.argv[1] == "--plots-bugs":
        plot_bugs_main(sys.argv[2:])
    else:
        main()
