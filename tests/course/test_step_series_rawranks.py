"""The helpers lessons 10 and 12 read raw material with (kitlib/course/step_series.py,
kitlib/course/raw_views.py, l12.excerpt_lateness): what they return on the recordings and
on hand-made input, and the clear errors on input they cannot use."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from kitlib.errors import KitError

ROOT = Path(__file__).resolve().parents[2]
REF = ROOT / "data" / "reference"


def test_timed_loops_quotes_the_script_with_its_line_numbers(tmp_path):
    from kitlib.course.step_series import capture_script, timed_loops
    text = timed_loops()
    lines = capture_script().read_text().splitlines()
    # a long line continues, unnumbered and indented, on the next (issue 40): joined back here
    rows = []
    for row in text.splitlines():
        if row.startswith(" " * 6):
            rows[-1] += " " + row.strip()
        else:
            rows.append(row)
    assert all(len(row) <= 105 for row in text.splitlines())
    for row in rows:
        n, _, code = row.partition("  ")
        assert " ".join(lines[int(n) - 1].split()) == " ".join(code.split())
        assert code.startswith(lines[int(n) - 1][:len(code) - len(code.lstrip())])
    assert text.splitlines()[-1].strip().endswith("p.step()") and "# --- D: uninstrumented timing" in text
    bad = tmp_path / "capture.py"
    bad.write_text("print('no loops here')\n")
    with pytest.raises(KitError, match="no '# --- D"):
        timed_loops(bad)
    with pytest.raises(KitError, match="cannot read"):
        timed_loops(tmp_path / "missing.py")


def test_batches_and_floors_and_their_errors():
    from kitlib.course.step_series import batches_before_profiled, min_p_value
    assert batches_before_profiled({"step_ms_uninstrumented": [1.0] * 10}) == 14
    with pytest.raises(KitError, match="no step_ms_uninstrumented"):
        batches_before_profiled({"step_ms_fixed_batch": [1.0]})
    assert min_p_value(4, 5) == 2 / 126 and min_p_value(3, 3) == 0.1 and min_p_value(1, 1) == 1.0
    with pytest.raises(KitError):
        min_p_value(0, 3)


def test_by_batch_refuses_a_series_that_spans_two_epochs():
    from kitlib.course.step_series import by_batch
    from kitlib.readers.bundle import open_capture
    cap = open_capture("profiler_5step")
    times = cap.step_times()
    with pytest.raises(KitError, match="spans epochs"):
        by_batch(cap, {**times, "step_ms_uninstrumented": [50.0] * 20})
    with pytest.raises(KitError, match="needs step_ms_profiled_all_attribution"):
        by_batch(cap, {"step_ms_uninstrumented": [50.0]})


def test_fix_pair_keeps_the_active_steps_of_each_run():
    from kitlib.course.step_series import fix_pair
    pair = fix_pair(1)
    for side, run in (("before", "ranks_straggler"), ("after", "ranks_balanced")):
        raw = json.loads((REF / run / "rank1" / "step_times.json").read_text())
        assert pair[side] == raw["step_ms_profiled"][2:] and json.loads(pair[f"{side}_raw"]) == raw
    assert pair["removed_ms"] == 500.0 and pair["schedule"]["active"] == 3


def test_collective_excerpt_is_the_raw_events_of_one_step():
    from kitlib.course.raw_views import KEEP, collective_excerpt
    from kitlib.readers.ranks import load_traces
    x = collective_excerpt(load_traces("ranks_straggler"), step=3, calls=2)
    assert x["step"] == 3 and sorted(x["ranks"].values()) == [0, 1] and len(x["events"]) == 6
    for r in (0, 1):
        doc = json.loads(gzip.decompress((REF / "ranks_straggler" / f"rank{r}" / "trace.json.gz").read_bytes()))
        mine = [e for e in x["events"] if x["ranks"][e["pid"]] == r]
        step = next(e for e in doc["traceEvents"] if e.get("name") == "ProfilerStep#3")
        assert mine[0] == {k: step[k] for k in KEEP}
        assert [e["ts"] for e in mine[1:]] == sorted(e["ts"] for e in mine[1:])
        assert all(step["ts"] <= e["ts"] < step["ts"] + step["dur"] and e["name"].startswith("gloo:") for e in mine[1:])
        assert x["base_ns"][r] == doc["baseTimeNanoseconds"]
    with pytest.raises(KitError, match="ProfilerStep#99"):
        collective_excerpt(load_traces("ranks_straggler"), step=99)
    with pytest.raises(KitError, match="no gloo"):
        collective_excerpt(load_traces(REF / "public-traces", partial=True))


def test_excerpt_lateness_on_hand_made_events():
    from kitlib.course.exercises.l12 import excerpt_lateness
    ev = [{"name": "ProfilerStep#1", "pid": 10, "ts": 0.0, "dur": 1e6},
          {"name": "gloo:broadcast", "pid": 10, "ts": 100.0, "dur": 50.0},
          {"name": "gloo:all_reduce", "pid": 10, "ts": 1000.0, "dur": 3000.0},
          {"name": "ProfilerStep#1", "pid": 11, "ts": 20.0, "dur": 1e6},
          {"name": "gloo:broadcast", "pid": 11, "ts": 400.0, "dur": 10.0},
          {"name": "gloo:all_reduce", "pid": 11, "ts": 3500.0, "dur": 400.0}]
    got = excerpt_lateness({"ranks": {10: 0, 11: 1}, "base_ns": {0: 0, 1: 1_000_000}, "events": ev})
    # rank 1's trace starts 1 ms (1,000 µs) later on the shared clock: its all_reduce at 4,500 µs
    assert got == {"last_rank": 1, "late_ms": 3.5, "dur_diff_ms": 2.6, "step_start_diff_ms": 1.02,
                   "first_call_late_ms": 1.3}
    with pytest.raises(ValueError, match="fewer than two ranks"):
        excerpt_lateness({"ranks": {10: 0, 11: 1}, "events": ev[:3]})
