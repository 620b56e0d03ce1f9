"""The reach of a kitlib function: what a reader must read to understand it.

Reach is the function itself and every kitlib function it calls, transitively, counted in
code lines (no docstring, no blank or comment-only line) and in modules. Calls are found in the
source, without running it:

* a name defined at the top of the same module, or imported from a kitlib module;
* ``module.name`` where ``module`` is an imported kitlib module;
* ``param.name`` where the parameter's annotation names a kitlib class and ``name`` is one
  of its methods or properties (``trace.kernels`` for ``trace: Trace``), and ``self.name``.

A function passed as a value (``key=_order``, ``lambda: _chain(...)``) counts as called.

    python tools/reach.py kitlib/analyses/chain.py::chain_core
    python tools/reach.py kitlib/analyses/chain.py::chain --list

Used by tests/lessons/test_reach.py, which holds every function a lesson's "Read it" line names to a
budget (issue 39).
"""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kitlib"


@dataclass
class Module:
    name: str                     # kitlib.analyses.chain
    path: Path
    tree: ast.Module
    functions: dict = field(default_factory=dict)   # "f" or "Class.f" -> FunctionDef
    classes: dict = field(default_factory=dict)     # "Class" -> ClassDef
    imports: dict = field(default_factory=dict)     # local name -> "kitlib.x.y" or "kitlib.x.y:name"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve_relative(mod: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.name.split(".")
    if mod.path.name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def load_modules() -> dict[str, Module]:
    """Every module of kitlib, parsed, with its functions, classes and kitlib imports."""
    mods = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module_name(path)
        mod = Module(name, path, ast.parse(path.read_text(), str(path)))
        for node in mod.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                mod.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                mod.classes[node.name] = node
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        mod.functions[f"{node.name}.{item.name}"] = item
        for node in ast.walk(mod.tree):
            if isinstance(node, ast.ImportFrom):
                src = _resolve_relative(mod, node)
                if src.startswith("kitlib"):
                    for a in node.names:
                        mod.imports[a.asname or a.name] = f"{src}:{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("kitlib"):
                        mod.imports[a.asname or a.name.split(".")[0]] = a.name if a.asname else "kitlib"
        mods[name] = mod
    return mods


def _target(mods: dict[str, Module], ref: str, seen: int = 0):
    """``"kitlib.x:name"`` -> (module, key) of a function or class, following re-exports; or
    ``("module", name)`` for a module."""
    if seen > 10:
        return None
    if ":" not in ref:
        return ("module", ref) if ref in mods else None
    src, name = ref.split(":")
    if f"{src}.{name}" in mods:
        return ("module", f"{src}.{name}")
    mod = mods.get(src)
    if mod is None:
        return None
    if name in mod.functions:
        return (src, name)
    if name in mod.classes:
        return (src, f"class:{name}")
    if name in mod.imports:
        return _target(mods, mod.imports[name], seen + 1)
    return None


def code_lines(fn: ast.AST, source_lines: list[str]) -> int:
    """Lines of ``fn`` without its docstring, blank lines and comment-only lines."""
    skip = set()
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        skip.update(range(body[0].lineno, body[0].end_lineno + 1))
    start = min([fn.lineno] + [d.lineno for d in getattr(fn, "decorator_list", [])])
    n = 0
    for i in range(start, fn.end_lineno + 1):
        s = source_lines[i - 1].strip()
        if i not in skip and s and not s.startswith("#"):
            n += 1
    return n


def callees(mods: dict[str, Module], modname: str, key: str) -> set[tuple[str, str]]:
    """The kitlib functions ``modname::key`` calls or passes on, as (module, key) pairs."""
    mod = mods[modname]
    fn = mod.functions[key]
    cls = key.split(".")[0] if "." in key else None
    known_classes = {}  # class name -> (module, class) visible in this module
    for cname in mod.classes:
        known_classes[cname] = (modname, cname)
    for local, ref in mod.imports.items():
        t = _target(mods, ref)
        if t and t[1].startswith("class:"):
            known_classes[local] = (t[0], t[1][len("class:"):])
    typed = {}  # parameter name -> (module, class) where its annotation names a kitlib class
    args = fn.args
    for a in args.posonlyargs + args.args + args.kwonlyargs:
        if a.annotation is not None:
            words = {n.id for n in ast.walk(a.annotation) if isinstance(n, ast.Name)}
            if isinstance(a.annotation, ast.Constant) and isinstance(a.annotation.value, str):
                words = set(a.annotation.value.replace("|", " ").split())
            hits = [known_classes[w] for w in words if w in known_classes]
            if hits:
                typed[a.arg] = hits[0]
    out = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in mod.functions:
                out.add((modname, node.id))
            elif node.id in mod.imports:
                t = _target(mods, mod.imports[node.id])
                if t and t[0] != "module":
                    if t[1].startswith("class:"):
                        c = t[1][len("class:"):]
                        for init in ("__init__", "__post_init__"):
                            if f"{c}.{init}" in mods[t[0]].functions:
                                out.add((t[0], f"{c}.{init}"))
                    else:
                        out.add(t)
        elif isinstance(node, ast.Attribute):
            base = node.value
            if isinstance(base, ast.Name) and base.id in mod.imports:
                t = _target(mods, mod.imports[base.id])
                if t and t[0] == "module":
                    t2 = _target(mods, f"{t[1]}:{node.attr}")
                    if t2 and t2[0] != "module" and not t2[1].startswith("class:"):
                        out.add(t2)
                    continue
            if isinstance(base, ast.Name) and base.id == "self" and cls and f"{cls}.{node.attr}" in mod.functions:
                out.add((modname, f"{cls}.{node.attr}"))
            elif isinstance(base, ast.Name) and base.id in typed:
                cmod, cname = typed[base.id]
                if f"{cname}.{node.attr}" in mods[cmod].functions:
                    out.add((cmod, f"{cname}.{node.attr}"))
    out.discard((modname, key))
    return out


def reach(mods: dict[str, Module], modname: str, key: str) -> dict:
    """``{"lines": int, "modules": [...], "functions": {"module::key": lines}}`` of a function."""
    todo, seen = [(modname, key)], {}
    lines_of = {}
    while todo:
        m, k = todo.pop()
        if (m, k) in seen:
            continue
        if m not in lines_of:
            lines_of[m] = mods[m].path.read_text().splitlines()
        seen[(m, k)] = code_lines(mods[m].functions[k], lines_of[m])
        todo.extend(callees(mods, m, k))
    return {"lines": sum(seen.values()), "modules": sorted({m for m, _ in seen}),
            "functions": {f"{m}::{k}": n for (m, k), n in sorted(seen.items())}}


def parse_spec(spec: str) -> tuple[str, str]:
    """``kitlib/analyses/chain.py::chain`` -> (``kitlib.analyses.chain``, ``chain``)."""
    path, _, key = spec.partition("::")
    p = (ROOT / path).resolve()
    if not p.is_file() or not key:
        raise SystemExit(f"reach: {spec!r}: give a path under kitlib/ and a function, as kitlib/analyses/chain.py::chain")
    return _module_name(p), key


def main(argv: list[str]) -> int:
    mods = load_modules()
    for spec in [a for a in argv if not a.startswith("--")]:
        modname, key = parse_spec(spec)
        if key not in mods[modname].functions:
            print(f"reach: {spec}: no function {key!r} in {modname}", file=sys.stderr)
            return 2
        r = reach(mods, modname, key)
        print(f"{spec}: {r['lines']} code lines in {len(r['modules'])} modules ({', '.join(r['modules'])})")
        if "--list" in argv:
            for f, n in r["functions"].items():
                print(f"  {n:4d}  {f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
