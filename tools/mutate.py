"""A small mutation tester for modules mutmut is too slow for here (the exercises, the lessons'
question builders): each mutant is one edit of the module's syntax tree, run against the
tests named, in a copy of the package, one at a time.

    python tools/mutate.py kitlib/course/exercises/__init__.py \
        --tests tests/lessons/test_questions_teach.py tests/course/test_exercises_feedback.py [--only judge,_wrong]
        [--timeout 300] [--json out.json] [--select 3,17,42]

The edits (each applied alone, inside functions only):
- a comparison's operator: ``<``↔``<=``, ``>``↔``>=``, ``==``↔``!=``, ``in``↔``not in``,
  ``is``↔``is not``;
- an arithmetic operator: ``+``↔``-``, ``*``↔``/``, ``//``→``/``, ``%``→``*``;
- a number: ``n`` → ``n + 1`` (0 → 1, 1 → 2, 0.02 → 1.02);
- a boolean operator: ``and``↔``or``; ``not x`` → ``x``;
- a constant ``True``↔``False``;
- ``return x`` → ``return None`` (not for a bare return).
Strings are left alone: an edit of a fixed sentence changes wording, not a verdict.

The package is copied once to a temporary folder (``data/`` linked, not copied); for each
mutant the module's file there is rewritten and pytest runs the checkout's tests with that
copy first on ``sys.path`` (pytest runs in the copy's folder, which ``python -m`` puts first;
the editable install's finder comes after it; the script checks which kitlib the tests would
import, and that they pass without a mutant), ``-x -q``.
A mutant is *killed* when pytest fails, *survived* when it passes, *timeout* past
``--timeout`` seconds. The survivors are printed with their line and edit: a survivor that
changes a verdict or a picture is a missing test (docs/MUTATION.md).
"""
from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CMP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
        ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_BIN = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
        ast.Mod: ast.Mult}


def _sites(tree: ast.Module, only: set | None):
    """``(function name, node path, description)`` of every edit, in source order."""
    out = []

    def walk(node, fn):
        for child in ast.iter_child_nodes(node):
            name = fn
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = child.name if fn is None else f"{fn}.{child.name}"
            if name is not None and (only is None or name.split(".")[0] in only or name in only):
                if isinstance(child, ast.Compare):
                    for i, op in enumerate(child.ops):
                        if type(op) in _CMP:
                            out.append((name, child, ("cmp", i), f"{type(op).__name__} → {_CMP[type(op)].__name__}"))
                elif isinstance(child, ast.BinOp) and type(child.op) in _BIN:
                    out.append((name, child, ("bin",), f"{type(child.op).__name__} → {_BIN[type(child.op)].__name__}"))
                elif isinstance(child, ast.Constant) and type(child.value) in (int, float):
                    out.append((name, child, ("num",), f"{child.value!r} → {child.value + 1!r}"))
                elif isinstance(child, ast.Constant) and type(child.value) is bool:
                    out.append((name, child, ("bool",), f"{child.value} → {not child.value}"))
                elif isinstance(child, ast.BoolOp):
                    out.append((name, child, ("boolop",), f"{type(child.op).__name__} → "
                                                          f"{'Or' if isinstance(child.op, ast.And) else 'And'}"))
                elif isinstance(child, ast.UnaryOp) and isinstance(child.op, ast.Not):
                    out.append((name, child, ("not",), "not x → x"))
                elif isinstance(child, ast.Return) and child.value is not None and \
                        not (isinstance(child.value, ast.Constant) and child.value.value is None):
                    out.append((name, child, ("ret",), "return x → return None"))
            walk(child, name)
    walk(tree, None)
    return out


class _Apply(ast.NodeTransformer):
    def __init__(self, target, how):
        self.target, self.how = target, how

    def generic_visit(self, node):
        node = super().generic_visit(node)
        if getattr(node, "_mut_id", None) != self.target:
            return node
        kind = self.how[0]
        if kind == "cmp":
            node.ops[self.how[1]] = _CMP[type(node.ops[self.how[1]])]()
        elif kind == "bin":
            node.op = _BIN[type(node.op)]()
        elif kind == "num":
            node.value = node.value + 1
        elif kind == "bool":
            node.value = not node.value
        elif kind == "boolop":
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        elif kind == "not":
            return node.operand
        elif kind == "ret":
            node.value = ast.Constant(None)
        return node


def mutants(source: str, only: set | None):
    """Yield ``(function, line, edit, mutated source)`` for each edit of ``source``."""
    tree = ast.parse(source)
    for i, node in enumerate(ast.walk(tree)):
        node._mut_id = i
    for fn, node, how, what in _sites(tree, only):
        t = copy.deepcopy(tree)
        new = _Apply(node._mut_id, how).visit(t)
        ast.fix_missing_locations(new)
        yield fn, node.lineno, what, ast.unparse(new)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("module", help="the module's file, e.g. kitlib/course/exercises/__init__.py")
    ap.add_argument("--tests", nargs="+", required=True)
    ap.add_argument("--only", default=None, help="comma-separated function names")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--json", default=None)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--select", default=None,
                    help="comma-separated mutant indices (0-based, in the order of mutants(); "
                         "tools/exercise_mutants.py prints them): run only those")
    a = ap.parse_args(argv)
    rel = Path(a.module)
    source = (ROOT / rel).read_text()
    only = set(a.only.split(",")) if a.only else None
    work = Path(tempfile.mkdtemp(prefix="kit_mutants_"))
    shutil.copytree(ROOT / "kitlib", work / "kitlib", ignore=shutil.ignore_patterns("__pycache__"))
    (work / "data").symlink_to(ROOT / "data")
    target = work / rel
    env = dict(os.environ, PYTHONPATH=str(work), MPLBACKEND="Agg", KITLIB_MODE="replay",
               PYTHONDONTWRITEBYTECODE="1")
    tests = [str((ROOT / t.split("::")[0]).resolve()) + ("::" + t.split("::", 1)[1] if "::" in t else "")
             for t in a.tests]
    # the copy is what the tests import: `python -m` puts the working folder first on sys.path
    where = subprocess.run([sys.executable, "-c", "import kitlib; print(kitlib.__file__)"], cwd=work, env=env,
                           capture_output=True, text=True).stdout.strip()
    if not where.startswith(str(work)):
        raise SystemExit(f"the tests would import kitlib from {where}, not from the mutated copy in {work}")
    base = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
                          cwd=work, env=env, capture_output=True, text=True, timeout=a.timeout)
    if base.returncode != 0:
        raise SystemExit(f"the tests fail without a mutant:\n{base.stdout[-3000:]}")
    results = []
    todo = list(enumerate(mutants(source, only)))
    if a.select:
        todo = [todo[int(i)] for i in a.select.split(",") if i.strip()]
    todo = todo[: a.limit]
    print(f"{len(todo)} mutants of {rel}", flush=True)
    try:
        for k, (index, (fn, line, what, text)) in enumerate(todo, 1):
            target.write_text(text)
            t0 = time.time()
            try:
                p = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
                                   cwd=work, env=env, capture_output=True, text=True, timeout=a.timeout)
                status = "killed" if p.returncode != 0 else "survived"
            except subprocess.TimeoutExpired:
                status = "timeout"
            results.append({"index": index, "function": fn, "line": line, "edit": what, "status": status,
                            "seconds": round(time.time() - t0, 1)})
            print(f"[{k}/{len(todo)}] #{index} {status:8s} {fn} line {line}: {what} ({time.time() - t0:.0f} s)", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    killed = sum(r["status"] != "survived" for r in results)
    print(f"\n{killed} of {len(results)} killed; survivors:")
    for r in results:
        if r["status"] == "survived":
            print(f"  #{r['index']} {r['function']} line {r['line']}: {r['edit']}")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
