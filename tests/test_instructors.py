"""docs/INSTRUCTORS.md agrees with the lessons (issue 26): each lesson's minutes in the
guide's table are the lesson's own "**Time:** about N minutes" line; the one-day workshop
lists every lesson once, each slot long enough for its lessons' minutes; the core a short
day keeps includes lesson 10, with its total as the guide says; each 90-minute session of
the series holds at most 90 minutes of lessons."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
GUIDE = (ROOT / "docs" / "INSTRUCTORS.md").read_text()
LESSONS = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.ipynb"))


def lesson_minutes() -> dict:
    """``{"NN": minutes}`` from each notebook's first "**Time:** about N minutes"."""
    out = {}
    for p in LESSONS:
        md = "\n".join(c.source for c in nbformat.read(p, 4).cells if c.cell_type == "markdown")
        m = re.search(r"\*\*Time:\*\* about (\d+) minutes", md)
        assert m, f"{p.name}: no '**Time:** about N minutes' line"
        out[p.name[:2]] = int(m.group(1))
    return out


def guide_minutes() -> dict:
    """``{"NN": minutes}`` from the guide's table "How long each lesson takes"."""
    table = GUIDE.split("## How long each lesson takes")[1].split("\n\n")[1]
    assert table.splitlines()[0].startswith("| # | lesson | minutes |")
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^\| (\d\d) \| [^|]+ \| (\d+) \|", table, re.M)}


def test_the_guides_minutes_are_the_lessons_time_lines():
    assert guide_minutes() == lesson_minutes()


def _clock(t: str) -> int:
    h, m = t.split(":")
    return int(h) * 60 + int(m)


def test_the_workshop_fits_each_slots_lessons_and_holds_every_lesson_once():
    minutes = lesson_minutes()
    block = GUIDE.split("## A one-day workshop")[1].split("## A series of sessions")[0]
    slots = re.findall(r"^\| (\d\d:\d\d) \| (.*) \|$", block, re.M)
    seen = []
    for (t, what), (t_next, _) in zip(slots, slots[1:]):
        ids = re.findall(r"(?:^|, )(\d\d)\b(?! *:)", what)
        seen += ids
        assert _clock(t_next) - _clock(t) >= sum(minutes[i] for i in ids), (t, what)
    assert sorted(seen) == sorted(minutes), "every lesson once in the day"


def test_the_core_keeps_lesson_10_and_its_total_is_as_stated():
    minutes = lesson_minutes()
    m = re.search(r"keep the core:\s+00–04,\s+([\d,\s]+?)\s+and\s+(\d\d)\s+\(about\s+([a-z\s]+?)\s+hours", GUIDE)
    assert m, "the core sentence"
    core = ["00", "01", "02", "03", "04", *[x.strip() for x in m.group(1).split(",")], m.group(2)]
    assert "10" in core
    words = {"four and a quarter": 255, "four and a half": 270, "four": 240, "four and three quarters": 285,
             "five": 300, "four hours": 240}
    assert abs(sum(minutes[i] for i in core) - words[" ".join(m.group(3).split())]) <= 7, \
        sum(minutes[i] for i in core)


def test_each_session_of_the_series_holds_at_most_ninety_minutes():
    minutes = lesson_minutes()
    line = GUIDE.split("## A series of sessions")[1].split("\n\n")[1]
    listed = line.split(":", 1)[1].split(" (")[0]          # "00+01, 02+03, ..., and 13"
    sessions = re.findall(r"\b(\d\d(?:\+\d\d)*)\b", listed)
    assert sorted(i for s in sessions for i in s.split("+")) == sorted(minutes)
    assert all(sum(minutes[i] for i in s.split("+")) <= 90 for s in sessions), sessions
