"""The preformatted blocks of the lessons' text (diagrams, command lines) fit their cell at a
laptop's width, unwrapped.

JupyterLab renders a fenced block of a markdown cell as a ``pre`` with ``white-space:
pre-wrap``: a line too long for the cell wraps, and a box diagram falls apart (issue 27:
"the lesson 04 diagram wraps at 1280 px"). Measured in the browser harness of
``tests/support/browser.py`` (JupyterLab, Chromium at 1280 × 800, file browser open), a markdown
cell's ``pre`` is 765 px wide and its font (14 px DejaVu Sans Mono) 8.43 px a character,
box-drawing characters and ``◀ ▶`` included: 90 characters fit. The test asks for at most
:data:`MAX_CHARS`, leaving room for a wider monospace font. Static, so cheap: no browser.
"""
import json
import re

import pytest

from test_lessons import LESSONS

#: Characters a line of a fenced block may hold (90 fit at 1280 px; see the module docstring).
MAX_CHARS = 84

#: Lessons whose blocks are known to be wider: each must be fixed, then removed from here
#: (the test is a strict xfail, so it says when that has happened).
KNOWN_WIDE: dict = {}

_FENCED = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)


def fenced_lines(nb: dict) -> list:
    """(cell index, line) of every line of every fenced block in the markdown cells."""
    out = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown":
            for block in _FENCED.findall("".join(cell["source"])):
                out += [(i, line) for line in block.split("\n")]
    return out


@pytest.mark.parametrize("path", [
    pytest.param(p, marks=pytest.mark.xfail(reason=KNOWN_WIDE[p.name[:2]], strict=True))
    if p.name[:2] in KNOWN_WIDE else p for p in LESSONS], ids=[p.name[:2] for p in LESSONS])
def test_fenced_blocks_fit_at_1280_px(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    wide = [(i, len(line), line) for i, line in fenced_lines(nb) if len(line) > MAX_CHARS]
    assert not wide, f"{path.name}: lines wider than {MAX_CHARS} characters wrap at 1280 px: {wide}"


def test_the_lesson_04_diagram_is_a_closed_box_drawing():
    """Lesson 04's DataLoader picture: every row of its boxes the same width, so the borders
    line up (they did not, before it was redrawn to fit)."""
    nb = json.loads(next(p for p in LESSONS if p.name.startswith("04")).read_text(encoding="utf-8"))
    rows = [line for _, line in fenced_lines(nb) if line.startswith(("┌", "│", "└"))]
    assert len(rows) >= 5
    assert len({len(r) for r in rows}) == 1, sorted({len(r) for r in rows})
    assert max(len(r) for r in rows) <= MAX_CHARS


def test_the_check_finds_a_wide_line():
    nb = {"cells": [{"cell_type": "markdown", "source": ["text\n", "```\n", "x" * 100 + "\n", "```\n"]},
                    {"cell_type": "code", "source": ["y" * 200]}]}
    assert [len(line) for _, line in fenced_lines(nb) if line] == [100]
