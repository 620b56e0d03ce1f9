"""Lesson 13's picture of the fixes (``kitlib.course.clinic_signs.plot_fixes``) draws what
the recordings hold: each case's two series of step times, read here from the raw
``step_times.json`` and convolution ``Input Dims`` of the shipped clinic, without the kit's
series code, each relative to its own *before* median, with the two medians marked."""
import functools
import gzip
import json
import re
import statistics
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[2]
CLINIC = ROOT / "data" / "clinic" / "cpu"
LETTERS = "abcdefgh"


def _bundle(x, side):
    path = CLINIC / f"case_{x}" / side
    return (path / "rank0") if (path / "rank0").is_dir() else path


def _trace_json(x, side) -> dict:
    return json.loads(gzip.decompress((_bundle(x, side) / "trace.json.gz").read_bytes()))


def _images(doc) -> int:
    conv = min((e for e in doc["traceEvents"] if e.get("name") == "aten::convolution"), key=lambda e: e["ts"])
    return conv["args"]["Input Dims"][0][0]


# cached: both drawing tests compare against the same series, read and parsed once per case
@functools.lru_cache(maxsize=None)
def _raw_series(x) -> dict:
    """before/after as the lesson measures a fix, from the raw files: the heavy profile's
    active steps against the uninstrumented ones where only the profiler changed (the case
    whose before trace holds Python-stack events and whose after trace none), per image
    where the batch changed, else the uninstrumented steps (rank 0 for two ranks)."""
    st = {s: json.loads((_bundle(x, s) / "step_times.json").read_text()) for s in ("before", "after")}
    docs = {s: _trace_json(x, s) for s in ("before", "after")}          # each trace parsed once
    stacks = {s: any(e.get("cat") == "python_function" for e in docs[s]["traceEvents"]) for s in ("before", "after")}
    if stacks["before"] and not stacks["after"]:
        n = sum(e.get("name", "").startswith("ProfilerStep#") for e in docs["before"]["traceEvents"])
        return {"before": st["before"]["step_ms_profiled"][-n:], "after": st["after"]["step_ms_uninstrumented"]}
    ib, ia = _images(docs["before"]), _images(docs["after"])
    return {s: [v / (ib if s == "before" else ia) for v in st[s]["step_ms_uninstrumented"]]
            for s in ("before", "after")}


@pytest.fixture(scope="module")
def drawn():
    import matplotlib.pyplot as plt
    from kitlib.course.clinic_signs import plot_fixes
    ax = plot_fixes(list(LETTERS))
    yield ax
    plt.close(ax.figure)


def test_each_case_draws_its_two_series_relative_to_its_before_median(drawn):
    dots = drawn.collections
    scatters = [c for c in dots if c.get_offsets().shape[0] > 2]
    assert len(scatters) == 2 * len(LETTERS)
    for i, x in enumerate(LETTERS):
        raw = _raw_series(x)
        ref = statistics.median(raw["before"])
        for j, side in enumerate(("before", "after")):
            pts = scatters[2 * i + j].get_offsets()
            assert np.asarray(pts[:, 1]) == pytest.approx(np.asarray(raw[side]) / ref, rel=1e-9), (x, side)
            centre = i + (j - 0.5) * 0.36                 # each side's dots around its own place
            assert np.all(np.abs(np.asarray(pts[:, 0]) - centre) <= 0.07 + 1e-9), (x, side)


def test_the_medians_are_marked_and_the_axis_says_what_it_shows(drawn):
    segs = [s for c in drawn.collections if hasattr(c, "get_segments") for s in c.get_segments()]
    medians = sorted((round(float(s[0][0] + s[1][0]) / 2, 6), float(s[0][1])) for s in segs if len(s) == 2)
    want = []
    for i, x in enumerate(LETTERS):
        raw = _raw_series(x)
        ref = statistics.median(raw["before"])
        want += [(round(i + (j - 0.5) * 0.36, 6), statistics.median(raw[s]) / ref)
                 for j, s in enumerate(("before", "after"))]
    assert len(medians) == 2 * len(LETTERS)
    assert [m[0] for m in medians] == [w[0] for w in sorted(want)]
    assert [m[1] for m in medians] == pytest.approx([w[1] for w in sorted(want)], rel=1e-9)
    assert drawn.get_yscale() == "log" and "median before" in drawn.get_ylabel()
    assert [t.get_text() for t in drawn.get_xticklabels()] == [f"case_{x}" for x in LETTERS]
    assert [t.get_text() for t in drawn.get_legend().get_texts()] == ["before", "after"]


def test_the_ratio_axis_reads_as_plain_ratios_and_the_legend_covers_no_dot(drawn):
    """A learner's trial (2 December): the log axis read 4×10⁰ and 6×10⁻¹, and the legend sat
    on case_h's dots. Each tick is now a ratio written out (0.5×), the ticks cover every dot,
    and the legend sits beside the axes."""
    fig = drawn.figure
    fig.canvas.draw()
    labels = [t.get_text() for t in drawn.get_yticklabels() if t.get_text()]
    assert labels and all(re.fullmatch(r"\d+(\.\d+)?×", t) for t in labels), labels
    ticks = [float(t[:-1]) for t in labels]
    assert ticks == sorted(ticks) and 1.0 in ticks
    ys = np.concatenate([c.get_offsets()[:, 1] for c in drawn.collections if c.get_offsets().shape[0] > 2])
    lo, hi = drawn.get_ylim()
    assert lo <= ys.min() and ys.max() <= hi
    legend = drawn.get_legend().get_window_extent()
    axes = drawn.get_window_extent()
    assert legend.x0 >= axes.x1                            # beside the axes, so over no dot
    assert "heavy profile's active steps (before)" in drawn.get_title()
