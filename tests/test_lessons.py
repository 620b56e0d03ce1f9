"""Every lesson notebook runs top to bottom in replay mode, and is stored without outputs."""
import re
from pathlib import Path

import nbformat
import pytest

LESSONS = sorted((Path(__file__).resolve().parent.parent / "lessons").glob("[0-9][0-9]_*.ipynb"))

#: Pictures each lesson shows when run in replay mode (PNG outputs under Jupyter's inline
#: backend). A lesson that loses a picture, or draws one twice, fails its test.
EXPECTED_FIGURES = {"00": 2, "01": 1, "02": 1, "03": 1, "04": 1, "05": 2, "06": 2, "07": 1, "08": 3, "09": 2,
                    "10": 1, "11": 1, "12": 2}


def figure_count(nb) -> int:
    """PNG pictures among the outputs of an executed notebook."""
    return sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def test_every_lesson_has_an_expected_figure_count():
    assert sorted(EXPECTED_FIGURES) == [p.name[:2] for p in LESSONS]
    assert all(n >= 1 for n in EXPECTED_FIGURES.values()), "every lesson has a picture"


def test_there_are_lessons():
    assert len(LESSONS) >= 2


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_is_stored_clean_and_has_exercises(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), "commit lessons without outputs"
    assert sum("ex.check(" in c.source for c in code) >= 2, "each lesson has at least two exercises"
    md = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert md.lstrip().startswith("# ") and "## Takeaways" in md and "## Go further" in md
    assert all(len(c.source.splitlines()) <= 15 for c in code), "logic over ~15 lines belongs in kitlib"


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_runs_in_replay_mode(path, executed_lesson):
    """Each lesson runs once (shared with tests/test_lesson_figures.py): the odd-numbered
    ones on "your own" recordings (every recording in KITLIB_REPLAY_DIR, see conftest's
    executed_lesson), the even-numbered on the kit's; the note under each table names the
    recordings, and never the kit's when the learner's are there."""
    run = executed_lesson(path.name[:2])
    own = run.own
    outputs = run.outputs
    assert not [o for o in outputs if o.get("output_type") == "error"]
    tables = [o["data"]["text/html"] for o in outputs if "<table" in o.get("data", {}).get("text/html", "")]
    noted = [t for t in tables if ">data: " in t]
    if path.name[:2] != "01":                  # lesson 01 shows only the learner's own CPU run
        # once a recording is open, every table says which recordings it comes from (a table
        # of facts shown before, such as lesson 11's routes, has no recording to name)
        first = next(i for i, t in enumerate(tables) if ">data: " in t)
        assert tables[first:] == noted, "every table says which recordings it comes from"
        assert all(("your own recording" in t) if own else re.search(r"kit's \w+ reference", t) for t in noted)
        assert not own or not any("kit's" in t for t in noted)
    text = "\n".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "mode: replay" in text or "recorded" in text
    # the exercises ran unanswered: each asks for an answer instead of judging
    assert "replace `None`" in "\n".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    # and drew its pictures, each once
    assert figure_count(run.nb) == EXPECTED_FIGURES[path.name[:2]], "a lesson's pictures are part of it"


@pytest.mark.parametrize("path", [p for p in LESSONS if p.name[:2] in ("00", "02", "03")], ids=lambda p: p.stem)
def test_lesson_runs_on_a_capture_the_kit_recorded_live(path, lesson_on_live_capture):
    """The lessons built on profiler_5step, fed the kit's own live H200 capture
    (through KITLIB_REPLAY_DIR) instead of the reference recording (conftest's
    lesson_on_live_capture)."""
    nb = lesson_on_live_capture(path.name[:2]).nb
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "\n".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "(torch_profiler, live)" in text
