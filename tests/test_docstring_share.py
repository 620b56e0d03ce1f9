"""Documentation where each reader reads it (issue 39): every ``Sources:`` line of a kitlib
docstring points at a section of docs/SOURCES.md that exists, every section there is pointed
at, and tools/docstring_share.py measures the package (its figures are in its output, not
pinned here: the share is 39 % on 6 December, above the issue's third)."""
import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("docstring_share", ROOT / "tools" / "docstring_share.py")
docstring_share = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("docstring_share", docstring_share)   # its dataclasses look themselves up there
_spec.loader.exec_module(docstring_share)

_POINTER = re.compile(r"docs/SOURCES\.md#([\w-]+)")


def _pointers():
    found = {}
    for path in sorted((ROOT / "kitlib").rglob("*.py")):
        for anchor in _POINTER.findall(path.read_text(encoding="utf-8")):
            found.setdefault(anchor, []).append(path.relative_to(ROOT).as_posix())
    return found


def test_every_sources_pointer_has_its_section_and_every_section_a_pointer():
    anchors = set(re.findall(r'<a id="([\w-]+)"></a>', (ROOT / "docs" / "SOURCES.md").read_text(encoding="utf-8")))
    pointers = _pointers()
    assert pointers, "no docstring points at docs/SOURCES.md"
    missing = {a: where for a, where in pointers.items() if a not in anchors}
    assert not missing, f"docstrings point at sections docs/SOURCES.md lacks: {missing}"
    orphans = anchors - set(pointers)
    assert not orphans, f"sections of docs/SOURCES.md no docstring points at: {sorted(orphans)}"


def test_the_share_tool_counts_docstring_lines():
    doc = 'Sum.\n\nMore.\n\nReturns\n-------\nint\n\nExamples\n--------\n>>> 1\n1\n'
    assert docstring_share.section_lines(doc, {"Examples"}) == 4      # title, dashes, two lines
    assert docstring_share.prose_lines(doc) == 4          # 'Sum.', blank, 'More.', blank
    shares = docstring_share.measure()
    total = shares["total"]
    assert total.files == sum(s.files for k, s in shares.items() if k != "total")
    assert 0 < total.doc_lines < total.lines
    assert 0.2 < total.share < 0.5
