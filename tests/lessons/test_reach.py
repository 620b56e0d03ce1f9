"""The plain cores the lessons point to stay readable (issue 39).

Every "Read it: `kitlib/...py::function`" line in a lesson names a function whose reach (itself
and every kitlib function it calls, transitively, in code lines without docstrings, and in
modules; tools/reach.py) is at most 80 code lines in at most 2 modules; together they cover
the five concepts the lessons do by hand; docs/ARCHITECTURE.md lists each one.
"""
from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("reach_tool", ROOT / "tools" / "reach.py")
reach_tool = importlib.util.module_from_spec(spec)
sys.modules["reach_tool"] = reach_tool
spec.loader.exec_module(reach_tool)

READ_IT = re.compile(r"Read it:\*?\s*`(kitlib/[\w/]+\.py)::(\w+)`")
MAX_LINES, MAX_MODULES = 80, 2
CONCEPTS = {  # the list: each must be named by some lesson
    "the chain's correlation and external-id joins": "kitlib/analyses/chain.py::join_ids",
    "the grouping behind key_averages": "kitlib/analyses/grouping.py::average_by_key",
    "the memory rule": "kitlib/analyses/memory.py::memory_by_event",
    "the idle categories": "kitlib/analyses/gpu_idle.py::classify_gaps",
    "the collective match": "kitlib/analyses/collectives.py::match_calls",
}


@pytest.fixture(scope="module")
def mods():
    return reach_tool.load_modules()


def read_it_lines() -> dict[str, list[str]]:
    """``{"kitlib/x.py::f": [lesson file names]}`` from the lessons' markdown cells."""
    out: dict[str, list[str]] = {}
    for nb in sorted((ROOT / "lessons").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                for path, fn in READ_IT.findall("".join(cell["source"])):
                    out.setdefault(f"{path}::{fn}", []).append(nb.name)
    return out


def test_the_read_it_lines_cover_the_lessons_concepts():
    named = read_it_lines()
    missing = {c: f for c, f in CONCEPTS.items() if f not in named}
    assert not missing, f"no lesson's Read it line names: {missing}"


@pytest.mark.parametrize("spec", sorted(set(read_it_lines()) | set(CONCEPTS.values())))
def test_a_named_core_reads_in_five_minutes(mods, spec):
    modname, key = reach_tool.parse_spec(spec)
    assert key in mods[modname].functions, f"{spec}: no such function (a Read it line names it)"
    r = reach_tool.reach(mods, modname, key)
    assert r["lines"] <= MAX_LINES and len(r["modules"]) <= MAX_MODULES, \
        f"{spec} reaches {r['lines']} code lines in {len(r['modules'])} modules: {r['functions']}"


def test_architecture_lists_every_read_it_line():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    assert not [s for s in read_it_lines() if f"`{s}`" not in text]


def test_reach_follows_calls_across_modules_and_leaves_docstrings_out(mods):
    # group_ops reaches chain's join through chain, op_events and its own helpers: far above the budget
    r = reach_tool.reach(mods, "kitlib.analyses.grouping", "group_ops")
    assert "kitlib.analyses.chain::join_ids" in r["functions"]
    assert "kitlib.analyses.grouping::average_by_key" in r["functions"]
    assert "kitlib.model.trace::Trace.kernels" in r["functions"]      # trace: Trace, then trace.kernels
    assert r["lines"] > MAX_LINES and len(r["modules"]) > MAX_MODULES
    # a function's own count: its lines less the docstring, blank and comment-only lines
    fn = mods["kitlib.analyses.grouping"].functions["average_by_key"]
    src = (ROOT / "kitlib/analyses/grouping.py").read_text().splitlines()
    doc = range(fn.body[0].lineno, fn.body[0].end_lineno + 1)
    code = [src[i - 1] for i in range(fn.lineno, fn.end_lineno + 1) if i not in doc]
    code = [s for s in code if s.strip() and not s.strip().startswith("#")]
    assert reach_tool.code_lines(fn, src) == len(code) == 8       # the def line and seven of code
    assert reach_tool.reach(mods, "kitlib.analyses.grouping", "average_by_key")["functions"] == \
        {"kitlib.analyses.grouping::average_by_key": reach_tool.code_lines(fn, src)}
