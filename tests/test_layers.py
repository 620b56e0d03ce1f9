"""The package's layering: imports flow one way and never in a loop.

Reads every ``import`` and ``from … import`` in kitlib — at module level and inside
functions, since a lazy import is still a dependency — and checks them against the
layer order written in ``kitlib/__init__.py`` and ``../shared/DESIGN.md``::

    base (errors, units, phases, paths, settings) < model < readers < analyses < capture, plots < course

A module may import its own layer and the layers below it; ``capture`` and ``plots``
are side by side and may not import each other. Inside ``readers`` the format
readers sit below ``bundle``. The package's ``__init__``/``__main__`` are its public
face and may import anything.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parent.parent / "kitlib"

RANK = {"base": 0, "model": 1, "readers": 2, "analyses": 3, "capture": 4, "plots": 4, "course": 5}
BASE = {"errors", "units", "phases", "paths", "settings", "progress"}
PUBLIC_FACE = {"kitlib", "kitlib.__main__"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(KIT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "face"
    top = parts[1]
    if top in BASE:
        return "base"
    if top in RANK:
        return top
    raise AssertionError(f"{module}: not in any layer (add it to a sub-package, or to BASE)")


def kit_imports(path: Path) -> set[str]:
    """The kitlib modules ``path`` imports (absolute names), wherever the import statement is."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "kitlib")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.split(".")[0] == "kitlib":
                target = node.module
            else:
                continue
            found.add(target)
            for a in node.names:             # `from kitlib.analyses import chain`: the module chain
                sub = f"{target}.{a.name}"
                if (KIT.parent / sub.replace(".", "/")).with_suffix(".py").is_file() \
                        or (KIT.parent / sub.replace(".", "/") / "__init__.py").is_file():
                    found.add(sub)
    return found


def import_graph() -> dict[str, set[str]]:
    return {module_name(p): kit_imports(p) for p in sorted(KIT.rglob("*.py"))}


def layering_violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for mod, deps in graph.items():
        if mod in PUBLIC_FACE:
            continue
        mine = layer_of(mod)
        for dep in sorted(deps):
            if dep == "kitlib":
                bad.append(f"{mod} imports the package's public face (kitlib); import the module it needs")
                continue
            theirs = layer_of(dep)
            if theirs == "face":
                continue
            if RANK[theirs] > RANK[mine] or (RANK[theirs] == RANK[mine] and theirs != mine):
                bad.append(f"{mod} ({mine}) imports {dep} ({theirs})")
            if mine == "readers" and dep in FOLDER_READERS and mod not in FOLDER_READERS:
                bad.append(f"{mod}: a format reader imports a folder reader ({dep})")
            if mine == "analyses" and theirs == "readers":
                bad.append(f"{mod} (analyses) imports {dep} (readers): an analysis takes the model's values "
                           "(Trace, NsysReport, RankTraces), never a reader")
    return bad


#: Readers that open a folder of files and hand each to a format reader: the bundle, and
#: the ranks of a distributed run (which reads a multi-rank bundle). Format readers never
#: import them.
FOLDER_READERS = {"kitlib.readers.bundle", "kitlib.readers.ranks"}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import loop, as the list of modules around it (Tarjan's strongly connected
    components with more than one module, or a module importing itself)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_every_module_is_in_a_layer():
    for mod in import_graph():
        if mod not in PUBLIC_FACE:
            layer_of(mod)


def test_imports_flow_one_way():
    bad = layering_violations(import_graph())
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_no_import_loops():
    graph = {m: d for m, d in import_graph().items() if m not in PUBLIC_FACE}
    loops = cycles(graph)
    assert not loops, "import loops: " + "; ".join(" <-> ".join(c) for c in loops)


def test_each_layer_says_what_belongs_there():
    for pkg in ("model", "readers", "analyses", "capture", "plots", "course"):
        doc = ast.get_docstring(ast.parse((KIT / pkg / "__init__.py").read_text()))
        assert doc and "may import" in doc.lower(), f"kitlib.{pkg}: its docstring must say what it may import"


# The checker itself must catch what it is for: a made-up graph with a loop and an
# upward import.
def test_the_checker_finds_a_loop_and_an_upward_import():
    graph = {"kitlib.analyses.grouping": {"kitlib.analyses.callsites"},
             "kitlib.analyses.callsites": {"kitlib.analyses.grouping"},
             "kitlib.readers.trace": {"kitlib.readers.bundle", "kitlib.analyses.chain"},
             "kitlib.readers.bundle": {"kitlib.readers.trace"},
             "kitlib.plots.memory": {"kitlib.capture.workload"}}
    assert sorted(map(tuple, cycles(graph))) == [
        ("kitlib.analyses.callsites", "kitlib.analyses.grouping"),
        ("kitlib.readers.bundle", "kitlib.readers.trace")]
    bad = layering_violations(graph)
    assert "kitlib.readers.trace (readers) imports kitlib.analyses.chain (analyses)" in bad
    assert "kitlib.plots.memory (plots) imports kitlib.capture.workload (capture)" in bad
    assert "kitlib.readers.trace: a format reader imports a folder reader (kitlib.readers.bundle)" in bad
    assert not layering_violations({"kitlib.readers.ranks": {"kitlib.readers.bundle", "kitlib.readers.trace"}})
    assert layering_violations({"kitlib.readers.nsys": {"kitlib.readers.ranks"}}) == [
        "kitlib.readers.nsys: a format reader imports a folder reader (kitlib.readers.ranks)"]
    assert layering_violations({"kitlib.analyses.collectives": {"kitlib.readers.ranks", "kitlib.model.ranks"}}) == [
        "kitlib.analyses.collectives (analyses) imports kitlib.readers.ranks (readers): an analysis takes the "
        "model's values (Trace, NsysReport, RankTraces), never a reader"]


def test_relative_imports_are_resolved():
    # `from ..model import Trace` inside kitlib/analyses/x.py is kitlib.model
    assert "kitlib.model" in kit_imports(KIT / "analyses" / "chain.py")
    assert "kitlib.errors" in kit_imports(KIT / "readers" / "trace.py")


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-v"])


# -- at run time: importing a lower layer loads nothing above it ---------------------------
#: One fresh interpreter imports the package's face, then each layer in turn from the bottom
#: (base, model, readers, analyses), printing the kitlib and IPython modules loaded after each
#: step; the two side-by-side layers (capture, plots) are each imported in a child forked from
#: it after analyses, so neither sees the other. A module loaded by a layer above the one just
#: imported can only have come from that import or from a lower layer's (whose own check then
#: fails): the same verdicts as one interpreter per layer, with one start of Python, pandas and
#: numpy instead of seven (about 7 s of CPU).
RUNTIME_PROBE = r"""
import importlib, json, os, sys
steps, side = json.loads(sys.argv[1])

def report(name):
    loaded = sorted(k for k in sys.modules if k == "IPython" or k.startswith(("kitlib", "IPython.")))
    print(json.dumps([name, loaded]), flush=True)

for name, mods in steps:
    for m in mods:
        importlib.import_module(m)
    report(name)
for name, mods in side:
    pid = os.fork()
    if pid == 0:
        try:
            for m in mods:
                importlib.import_module(m)
            report(name)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
"""

#: The layers imported one after the other, and the side-by-side ones each in a child.
STEPS = ["base", "model", "readers", "analyses"]
SIDE = ["capture", "plots"]


@pytest.fixture(scope="module")
def loaded_by_layer() -> dict:
    """``{step: kitlib and IPython modules loaded}`` after ``import kitlib`` (step ``"face"``)
    and after each layer's modules are imported (see RUNTIME_PROBE)."""
    import json
    import os
    import subprocess
    import sys
    graph = import_graph()
    mods = {layer: sorted(m for m in graph if m not in PUBLIC_FACE and layer_of(m) == layer) for layer in STEPS + SIDE}
    plan = [[["face", ["kitlib"]]] + [[layer, mods[layer]] for layer in STEPS], [[layer, mods[layer]] for layer in SIDE]]
    env = {k: v for k, v in os.environ.items() if k != "KITLIB_PLOT_SCALE"}
    env["MPLBACKEND"] = "Agg"
    run = subprocess.run([sys.executable, "-c", RUNTIME_PROBE, json.dumps(plan)], capture_output=True, text=True,
                         env=env, cwd=str(KIT.parent), timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    out = dict(json.loads(line) for line in run.stdout.splitlines() if line.startswith("["))
    assert set(out) == {"face", *STEPS, *SIDE}, run.stdout[-2000:]
    return {k: set(v) for k, v in out.items()}


@pytest.mark.parametrize("layer", STEPS + SIDE)
def test_importing_a_layer_loads_nothing_above_it(layer, loaded_by_layer):
    """In a fresh interpreter, every module of ``layer`` imported (``import kitlib`` first,
    as any import of a submodule runs the package's face; the layers below it before it, see
    RUNTIME_PROBE): no module of a higher or side-by-side layer is loaded, and IPython is not
    touched (no display hooks)."""
    assert any(layer_of(m) == layer for m in import_graph() if m not in PUBLIC_FACE)
    loaded = loaded_by_layer[layer]
    bad = sorted(m for m in loaded if m.startswith("kitlib.") and layer_of(m) != layer
                 and (RANK[layer_of(m)] > RANK[layer] or (RANK[layer_of(m)] == RANK[layer] and layer_of(m) != layer)))
    assert not bad, f"importing kitlib.{layer} loads a higher layer: {bad}"
    assert not any(m == "IPython" or m.startswith("IPython.") for m in loaded), \
        f"importing kitlib.{layer} loads IPython"


def test_the_public_face_is_lazy_but_complete(loaded_by_layer):
    """``import kitlib`` loads only kitlib.errors and kitlib.settings; every name of the face
    is there on first use."""
    assert loaded_by_layer["face"] == {"kitlib", "kitlib.errors", "kitlib.settings"}
    import kitlib
    for name in ("open_capture", "list_references", "reference_dir", "Trace", "load_trace", "RankTraces",
                 "load_traces", "chain", "NsysReport", "load_nsys", "nsys_stats", "load_memory_snapshot",
                 "align", "lint", "course", "exercises", "model", "readers", "analyses", "plots"):
        assert getattr(kitlib, name) is not None, name
    assert kitlib.Trace is kitlib.readers.trace.Trace
    with pytest.raises(AttributeError):
        kitlib.no_such_name


# -- private names stay in their module (issue 39) ------------------------------------------
#: A private name (one leading underscore, not a dunder) is its module's own: no other kitlib
#: module imports it (``from kitlib.x import _y``, ``from .x import _y``), reads it off the
#: module (``x._y``, ``kitlib.x._y``, ``import kitlib.x as m; m._y``) or calls a private
#: method or attribute that another kitlib module defines (``cap._first_of(...)`` where only
#: kitlib.readers.bundle defines ``_first_of``; a name the module defines too is not seen
#: this way). A private *module* (``kitlib/model/_values.py``)
#: belongs to its package: its siblings may import it, modules outside may not. A helper that
#: two modules share gets a public name where it belongs.
#:
#: The only exceptions, ``(importing module, module of the name, name)``: files other workers
#: were editing when the rule came in (issue 39). Each is a leftover to fix there, after which
#: its line goes; :func:`test_the_private_allow_list_is_not_stale` fails on a line no longer needed.
PRIVATE_ALLOWED: set = set()     # none left (6 December)


def _private(name: str) -> bool:
    """One leading underscore; not a dunder, nor a protocol name such as ``_repr_html_``."""
    return name.startswith("_") and not name.startswith("__") and not name.endswith("_")


def _is_module(name: str) -> bool:
    f = KIT.parent / name.replace(".", "/")
    return f.with_suffix(".py").is_file() or (f / "__init__.py").is_file()


def _is_package(module: str) -> bool:
    return (KIT.parent / module.replace(".", "/") / "__init__.py").is_file()


def _private_module_outsider(importer: str, target: str) -> bool:
    """Whether ``target`` has a private component (``kitlib.model._values``) whose package
    ``importer`` is not in."""
    parts = target.split(".")
    for i, p in enumerate(parts):
        if _private(p):
            package = ".".join(parts[:i])
            return not (importer == package or importer.startswith(package + "."))
    return False


def _defined_private(tree: ast.AST) -> set[str]:
    """The private names a module defines: at module level, in its classes, and as
    attributes it sets on ``self``/``cls``."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            out.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
    return {n for n in out if _private(n)}


def private_uses(sources: dict[str, str]) -> list[tuple[str, str, str, int]]:
    """Every private name used across modules, as ``(module, module of the name, name,
    line)``. ``sources`` maps a module's name (``kitlib.analyses.steps``) to its text."""
    trees = {m: ast.parse(text) for m, text in sources.items()}
    defined = {m: _defined_private(t) for m, t in trees.items()}
    found = []
    for me, tree in trees.items():
        package = me if _is_package(me) else me.rpartition(".")[0]
        bound = {}                                           # local name -> kitlib module
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] != "kitlib":
                        continue
                    if _private_module_outsider(me, a.name):
                        found.append((me, a.name, a.name.rpartition(".")[2], node.lineno))
                    bound[a.asname or "kitlib"] = a.name if a.asname else "kitlib"
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                elif node.module and node.module.split(".")[0] == "kitlib":
                    target = node.module
                else:
                    continue
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    if _private_module_outsider(me, sub if _is_module(sub) or sub in sources else target):
                        found.append((me, target, a.name, node.lineno))
                    elif _private(a.name) and not _is_module(sub) and sub not in sources and target != me:
                        found.append((me, target, a.name, node.lineno))
                    if _is_module(sub) or sub in sources:
                        bound[a.asname or a.name] = sub
        others = set().union(*(d for m, d in defined.items() if m != me)) - defined[me]
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            chain, v = [], node.value
            while isinstance(v, ast.Attribute):
                chain.append(v.attr)
                v = v.value
            if isinstance(v, ast.Name) and v.id in bound:
                target = ".".join([bound[v.id]] + chain[::-1])
                if target != me:
                    found.append((me, target, node.attr, node.lineno))
            elif isinstance(v, ast.Name) and v.id in ("self", "cls"):
                continue
            elif node.attr in others:                       # obj._y, _y defined only elsewhere in kitlib
                home = sorted(m for m, d in defined.items() if m != me and node.attr in d)
                found.append((me, " or ".join(home), node.attr, node.lineno))
    return found


def kit_sources() -> dict[str, str]:
    return {module_name(p): p.read_text() for p in sorted(KIT.rglob("*.py"))}


def test_no_private_name_is_used_across_modules():
    bad = [u for u in private_uses(kit_sources()) if u[:3] not in PRIVATE_ALLOWED]
    assert not bad, ("private names used outside their module (give the helper a public name where "
                     "it belongs, with a docstring):\n"
                     + "\n".join(f"{m}:{line} uses {name} of {home}" for m, home, name, line in bad))


def test_the_private_allow_list_is_not_stale():
    used = {u[:3] for u in private_uses(kit_sources())}
    stale = sorted(PRIVATE_ALLOWED - used)
    assert not stale, f"these allowed private uses are gone: remove them from PRIVATE_ALLOWED: {stale}"


def test_the_private_checker_finds_each_form():
    src = {
        "kitlib.analyses.a": "def _helper():\n    pass\nclass C:\n    def _m(self):\n        self._x = 1\n",
        "kitlib.analyses.b": ("from .a import _helper, C\n"
                              "from kitlib.analyses import a\n"
                              "import kitlib.analyses.a as m\n"
                              "import kitlib\n"
                              "a._helper(); m._helper(); kitlib.analyses.a._helper()\n"
                              "def f(c):\n    return c._m(), c._x, c.__len__(), c._repr_html_(), c._own\n"
                              "class D:\n    def _own(self):\n        return self._m\n"),
        "kitlib.model.nsys": "from ._values import kept\nfrom . import _values\n",
        "kitlib.readers.ranks": "from ..model._values import kept\nfrom ..model import _values\n",
        "kitlib.model._values": "def kept():\n    pass\n",
    }
    got = sorted((m, home, name) for m, home, name, _ in private_uses(src))
    assert got == sorted([
        ("kitlib.analyses.b", "kitlib.analyses.a", "_helper"),     # from .a import _helper
        ("kitlib.analyses.b", "kitlib.analyses.a", "_helper"),     # a._helper
        ("kitlib.analyses.b", "kitlib.analyses.a", "_helper"),     # m._helper
        ("kitlib.analyses.b", "kitlib.analyses.a", "_helper"),     # kitlib.analyses.a._helper
        ("kitlib.analyses.b", "kitlib.analyses.a", "_m"),          # c._m(): a method of another module
        ("kitlib.analyses.b", "kitlib.analyses.a", "_x"),          # c._x: set on self elsewhere
        ("kitlib.readers.ranks", "kitlib.model._values", "kept"),  # a private module, from outside
        ("kitlib.readers.ranks", "kitlib.model", "_values"),
    ]), got


#: A format switch: code outside kitlib/model/ that asks which recording format it holds
#: (an isinstance on Trace/NsysReport/RankTraces, ``.FORMAT``, ``_is_nsys``) instead of
#: asking the recording (``has_operators``, ``labelled_ranges()``…; model/sources.py's checks).
SWITCH = re.compile(r"isinstance\([^)]*(Trace|NsysReport)|\.FORMAT\b|_is_nsys")
#: Switches inside one reader, on its own private document type: not a format question.
SWITCH_EXEMPT = re.compile(r"isinstance\(\w+, _TraceDoc\)")
MAX_SWITCHES = 5


def format_switches(sources: dict) -> list:
    """``(path, line, text)`` of each format switch in ``{path: source}``, model/ left out."""
    found = []
    for path, text in sources.items():
        if path.startswith("kitlib/model/"):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            code = line.split("#", 1)[0]
            if SWITCH.search(code) and not SWITCH_EXEMPT.search(code):
                found.append((path, n, line.strip()))
    return found


def test_format_switches_outside_the_model_are_few():
    sources = {p.relative_to(KIT.parent).as_posix(): p.read_text(encoding="utf-8") for p in KIT.rglob("*.py")}
    found = format_switches(sources)
    assert len(found) <= MAX_SWITCHES, (
        f"{len(found)} format switches outside kitlib/model/ (at most {MAX_SWITCHES}): ask the recording "
        "(Trace/NsysReport's shared interface) or use kitlib.model.sources' checks instead:\n"
        + "\n".join(f"  {p}:{n}: {t}" for p, n, t in found))


def test_the_switch_counter_finds_each_form():
    src = {"kitlib/analyses/a.py": ("if isinstance(x, Trace):\n    pass\n"
                                    "if isinstance(x, (Trace, NsysReport)):\n    pass\n"
                                    "k = x.FORMAT\nif _is_nsys(x):\n    pass\n"
                                    "ok = x.has_operators  # isinstance(x, Trace) in a comment\n"),
           "kitlib/readers/trace.py": "if isinstance(doc, _TraceDoc):\n    pass\n",
           "kitlib/model/sources.py": "if isinstance(x, Trace):\n    pass\n"}
    assert [(p, n) for p, n, _ in format_switches(src)] == [
        ("kitlib/analyses/a.py", 1), ("kitlib/analyses/a.py", 3), ("kitlib/analyses/a.py", 5),
        ("kitlib/analyses/a.py", 6)]
