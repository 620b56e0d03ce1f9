"""docs/INSTRUCTORS.md agrees with the lessons (issues 26 and 40): each lesson's minutes in the
guide's table are the lesson's own "**Time:** about N minutes" line; the one-day workshop fits
09:00-17:30, each slot long enough for its lessons' minutes, and lists every lesson once (in a
slot, as homework or in the follow-up session), with its core's and homework's minutes as the
guide says; the two-day workshop holds every lesson once, each day's lesson minutes as its
heading says; each 90-minute session of the series holds at most 90 minutes of lessons; the
README's total is the lessons' sum."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
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


def section(title: str, end: str) -> str:
    return GUIDE.split(title)[1].split(end)[0]


def _clock(t: str) -> int:
    h, m = t.split(":")
    return int(h) * 60 + int(m)


def _ids(text: str) -> list:
    """Lesson numbers listed as "00–04, 09, 10 and 11" (not clock times, not in parentheses)."""
    text = re.sub(r"\([^)]*\)", "", text)
    text = re.sub(r"\b(\d\d)–(\d\d)\b",                   # "00–04": 00, 01, 02, 03, 04
                  lambda m: ", ".join(f"{i:02d}" for i in range(int(m.group(1)), int(m.group(2)) + 1)), text)
    return re.findall(r"(?:^|, | and |: )(\d\d)\b(?! *:)", text)


def day_slots(block: str) -> list:
    """The lessons of a schedule table, checking each slot is as long as its lessons' minutes
    and the day runs 09:00 to 17:30."""
    minutes = lesson_minutes()
    slots = re.findall(r"^\| (\d\d:\d\d) \| (.*) \|$", block, re.M)
    assert slots[0][0] == "09:00" and slots[-1] == ("17:30", "end"), slots
    seen = []
    for (t, what), (t_next, _) in zip(slots, slots[1:]):
        ids = _ids(what)
        seen += ids
        assert _clock(t_next) - _clock(t) >= sum(minutes[i] for i in ids), (t, what)
    return seen


def test_the_guides_minutes_are_the_lessons_time_lines():
    assert guide_minutes() == lesson_minutes()


def test_the_one_day_workshop_fits_the_day_and_places_every_lesson_once():
    minutes = lesson_minutes()
    block = section("## A one-day workshop", "## A two-day workshop")
    day = day_slots(block)
    homework = _ids(re.search(r"\*\*Homework\*\*[^:]*:([^\n]*)", block).group(1).strip())
    follow_up = _ids(re.search(r"\*\*A follow-up session\*\*[^:]*:([^\n]*)", block).group(1).strip())
    assert sorted(day + homework + follow_up) == sorted(minutes), (day, homework, follow_up)
    assert "10" in day
    core = re.search(r"a core of them: ([^(]+) \((\d+) minutes of lesson", " ".join(block.split()))
    assert sorted(_ids(core.group(1))) == sorted(day)
    assert int(core.group(2)) == sum(minutes[i] for i in day)
    stated = int(re.search(r"\*\*Homework\*\*[^\n]*?(\d+) minutes", block).group(1))
    assert stated == sum(minutes[i] for i in homework)
    assert f"({minutes[follow_up[0]]} minutes" in block


def test_the_two_day_workshop_holds_every_lesson_once_and_each_day_adds_up():
    minutes = lesson_minutes()
    block = section("## A two-day workshop", "## A series of sessions")
    days = re.split(r"^### ", block, flags=re.M)[1:]
    assert len(days) == 2
    seen = []
    for day in days:
        ids = day_slots(day)
        stated = int(re.match(r"Day \d \((\d+) minutes of lessons\)", day).group(1))
        assert stated == sum(minutes[i] for i in ids), (day.splitlines()[0], ids)
        seen += ids
    assert sorted(seen) == sorted(minutes)


def test_each_session_of_the_series_holds_at_most_ninety_minutes():
    minutes = lesson_minutes()
    line = section("## A series of sessions", "## Live or replay").split("\n\n")[1]
    listed = line.split(":", 1)[1].split(" (")[0]          # "00+01+02, ..., and 13 over two sessions"
    sessions = re.findall(r"\b(\d\d(?:\+\d\d)*)\b( over two sessions)?", listed)
    assert sorted(i for s, _ in sessions for i in s.split("+")) == sorted(minutes)
    for s, two in sessions:
        assert sum(minutes[i] for i in s.split("+")) / (2 if two else 1) <= 90, s
    count = {"Nine": 9, "Eight": 8, "Ten": 10, "Seven": 7}[line.split()[0]]
    assert count == sum(2 if two else 1 for _, two in sessions)


def test_the_readmes_total_is_the_lessons_sum():
    readme = " ".join((ROOT / "README.md").read_text().split())
    m = re.search(r"the fourteen lessons take about [a-z ]+ hours, (\d+) minutes, at a new learner's pace", readme)
    assert m and int(m.group(1)) == sum(lesson_minutes().values())
    assert f"add up to\n  {sum(lesson_minutes().values())} minutes" in GUIDE or \
        f"add up to {sum(lesson_minutes().values())} minutes" in " ".join(GUIDE.split())
