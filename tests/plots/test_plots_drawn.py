"""Every plot function of ``kitlib.plots`` checked on what it draws (issue 31, the pictures).

Each test builds the picture a lesson builds, on the recording that lesson uses, reads the
artists back from the figure (bar lengths, line and step data, marker positions, the
segments of ``hlines``, the texts, the legend's handles) and compares them with figures
this file computes itself from the tools' own files: the raw Chrome-trace JSON (gzip +
orjson, :func:`conftest.raw_trace_events`), the Nsight Systems SQLite export
(:func:`conftest.sql_rows`), the profiler's ``key_averages`` rows, ``step_times.json``,
Nsight Compute's CSV. Where that would mean writing the analysis a second time (the
call-site grouping, the two NVTX attributions, the achieved-rate estimates, the wait and
transfer split of a collective), the drawn values are compared with the analysis' table
instead, and a comment says so; the value axis is then still checked to be that table's
numbers in the unit its label names.

Every axis label's unit is read from the label (:func:`unit_of`) and the drawn numbers
must be the raw ones divided by that unit: a GiB series under "GB", per-call times under
"total", µs under "ms" fail. Every legend entry must name the artist it stands for: its
handle has the colour of the drawn series that the test finds by its data. Each test runs
at the default scale and at a projector's (``set_scale(1.5)``), and one test checks that
all text of all 16 pictures is at least 9 px at scale 1 and grows with the scale.
"""
from __future__ import annotations

import csv
import gzip
import json
import re
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from conftest import REF, raw_trace_events, sql_rows  # noqa: E402

import kitlib  # noqa: E402
from kitlib import plots  # noqa: E402

#: The projector scale the lessons suggest (README, ``set_scale``).
PROJECTOR = 1.5


@pytest.fixture(params=[1.0, PROJECTOR], ids=["scale1", "projector"])
def scale(request):
    plots.set_scale(request.param)
    yield request.param
    plots.set_scale(1.0)
    plt.close("all")


# -- reading a figure back ----------------------------------------------------------------

#: What one unit of an axis label is worth in the raw unit of its data: times in ns,
#: sizes in bytes. The label must name exactly one of these.
UNITS = {"ns": ("time", 1.0), "µs": ("time", 1e3), "us": ("time", 1e3), "ms": ("time", 1e6), "s": ("time", 1e9),
         "B": ("bytes", 1.0), "KB": ("bytes", 1e3), "MB": ("bytes", 1e6), "GB": ("bytes", 1e9),
         "KiB": ("bytes", 2 ** 10), "MiB": ("bytes", 2 ** 20), "GiB": ("bytes", 2 ** 30)}


def unit_of(label: str) -> tuple[str, float]:
    """The unit an axis label names, as (kind, factor to the raw unit): 'memory (GB, 10⁹
    bytes)' -> ('bytes', 1e9). Exactly one unit word must appear in the label."""
    words = re.findall(r"[A-Za-zµ]+", label)
    found = {w for w in words if w in UNITS and w != "s" and w != "B"}
    assert len(found) == 1, f"the axis label {label!r} names {sorted(found) or 'no'} unit(s), not exactly one"
    (u,) = found
    if u == "GB":   # a GB that says which GB
        assert "10⁹" in label or "1e9" in label or "10^9" in label, f"{label!r}: GB without saying 10⁹ bytes"
    return UNITS[u]


def bars(ax, i=0) -> list:
    """The rectangles of the i-th bar() / barh() call on ``ax``: (x, width, y, height) each."""
    cont = [c for c in ax.containers if hasattr(c, "patches")][i]
    return [(p.get_x(), p.get_width(), p.get_y(), p.get_height()) for p in cont.patches]


def barh_by_label(ax, i=0) -> dict:
    """Horizontal bars of the i-th barh call: {y tick label: width} (the label at each bar's centre)."""
    ticks = {round(t, 6): lab.get_text() for t, lab in zip(ax.get_yticks(), ax.get_yticklabels())}
    out = {}
    for x, w, y, h in bars(ax, i):
        out[ticks[round(y + h / 2, 6)]] = w
    return out


def spans(coll) -> list:
    """The rectangles of one broken_barh collection: (x, width, y, height) each."""
    out = []
    for p in coll.get_paths():
        (x0, y0), (x1, y1) = p.vertices.min(axis=0), p.vertices.max(axis=0)    # two reductions, not six
        out.append((x0, x1 - x0, y0, y1 - y0))
    return out


def in_view(ax, xs=None, ys=None):
    """Every given x (and y) lies inside the axes' visible limits: nothing drawn is cut off."""
    for vals, lim in ((xs, ax.get_xlim()), (ys, ax.get_ylim())):
        if vals is None:
            continue
        lo, hi = sorted(lim)
        v = np.asarray(vals, dtype=float)
        assert ((v >= lo - 1e-9 * abs(hi - lo)) & (v <= hi + 1e-9 * abs(hi - lo))).all(), (lim, v.min(), v.max())


def bars_in_view(ax, i=0):
    """The bars of the i-th bar call, both ends of each, and their extent across, inside the view."""
    r = bars(ax, i)
    in_view(ax, [x for x, *_ in r] + [x + w for x, w, *_ in r], [y for *_, y, _ in r] + [y + h for *_, y, h in r])


def no_overlap(ax):
    """No two bars of the axes cover each other (side-by-side bars stay side by side)."""
    r = [b_ for i in range(len([c for c in ax.containers if hasattr(c, "patches")])) for b_ in bars(ax, i)]
    for i, (x, w, y, h) in enumerate(r):
        for x2, w2, y2, h2 in r[i + 1:]:
            ox = min(x + w, x2 + w2) - max(x, x2)
            oy = min(y + h, y2 + h2) - max(y, y2)
            assert not (ox > 1e-9 and oy > 1e-9), ((x, w, y, h), (x2, w2, y2, h2))


def rgba(c):
    """One colour as a rounded RGBA tuple (a name, a tuple, or a one-row array)."""
    arr = np.asarray(c, dtype=object)
    if arr.ndim == 2:
        assert len({tuple(r) for r in np.asarray(c, dtype=float).round(4)}) == 1, "several colours"
        c = tuple(np.asarray(c, dtype=float)[0])
    elif arr.ndim == 1 and not isinstance(c, str):
        c = tuple(float(v) for v in c)
    return tuple(np.round(to_rgba(c), 4))


def face(artist):
    """The one face colour of a drawn artist or a legend handle."""
    if hasattr(artist, "get_facecolor"):
        fc = artist.get_facecolor()
        arr = np.atleast_2d(np.asarray(fc, dtype=float))
        if arr.size and arr.shape[-1] == 4:
            assert len({tuple(np.round(r, 4)) for r in arr}) == 1, "several colours on one artist"
            return tuple(np.round(arr[0], 4))
    return rgba(artist.get_color())


def legend_entries(ax) -> dict:
    """{legend text: handle} of the axes' legend."""
    leg = ax.get_legend()
    assert leg is not None, "no legend"
    names = [t.get_text() for t in leg.get_texts()]
    assert len(set(names)) == len(names), f"an entry twice in the legend: {names}"
    return dict(zip(names, leg.legend_handles))


def texts(ax) -> list:
    return [t for t in ax.texts if t.get_text().strip()]


def number(s: str) -> float:
    return float(s.replace(",", ""))


def ns(us) -> int:
    """Kineto's µs (three decimals) as the ns the profiler measured."""
    return round(us * 1000)


def close(a, b, tol=1e-6):
    """Equal to ``tol`` in the drawn unit (1e-6 ms is 1 ns)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=tol)


# -- the recordings and the tables the lessons draw ---------------------------------------

_MEMO: dict = {}


def memo(key, make):
    if key not in _MEMO:
        _MEMO[key] = make()
    return _MEMO[key]


@pytest.fixture(scope="module", autouse=True)
def _forget_tables():
    yield
    _MEMO.clear()


def p5():
    return memo("p5", lambda: kitlib.open_capture("profiler_5step"))


def fixed():
    return memo("fixed", lambda: kitlib.open_capture("fixed_batch"))


def fixed_events():
    def make():
        from kitlib.analyses.chain import chain
        from kitlib.analyses.events import op_events
        tr = fixed().trace
        return op_events(tr, chain(tr))
    return memo("fixed_events", make)


def raw(name):
    return raw_trace_events(REF / name / "trace.json.gz")


def raw_steps(ev) -> list:
    return sorted((e for e in ev if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")),
                  key=lambda e: e["ts"])


def p5_steps() -> list:
    """``raw_steps`` of profiler_5step's raw JSON, found once for the module (several tests
    read them; each search walks every event of the trace)."""
    return memo("p5_raw_steps", lambda: raw_steps(raw("profiler_5step")))


def raw_launches(ev) -> dict:
    return {e["args"]["correlation"]: e for e in ev
            if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}


GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}


# == plot_step_times (lessons 00 and 10) =====================================================

def test_step_times_points_and_medians_from_step_times_json(scale):
    """Every point is a step time of ``step_times.json`` (ms, as its keys say) in its own
    column, in the file's order; the black bar of each column is that series' median (not
    its mean: the profiled series has a 764 ms first step that drags the mean to 161 ms);
    the one legend entry "median" is that black bar."""
    series = json.loads((REF / "profiler_5step" / "step_times.json").read_text())
    assert all(k.startswith("step_ms_") for k in series)          # the file's own unit: ms
    fig = plots.plot_step_times(p5().step_times(), title="step wall time, repeated (ms)")
    ax = fig.axes[0]
    assert unit_of(ax.get_ylabel()) == ("time", 1e6)
    assert ax.get_ylabel() == "step wall time (ms, log scale)"
    points = [ln for ln in ax.lines if ln.get_marker() == "o"]
    assert len(points) == len(series)
    for i, (ln, (key, vals)) in enumerate(zip(points, series.items())):
        close(ln.get_ydata(), vals, 0)
        x = np.asarray(ln.get_xdata())
        assert np.all(np.abs(x - i) <= 0.3) and np.all(np.diff(x) > 0)     # in its own column, steps left to right
    meds = [c for c in ax.collections if c.get_segments()]
    assert len(meds) == len(series)
    for i, (c, vals) in enumerate(zip(meds, series.values())):
        (seg,) = c.get_segments()
        assert seg[0][1] == seg[1][1] == pytest.approx(statistics.median(vals), abs=1e-12)
        assert i - 0.45 <= seg[0][0] < i - 0.15 and i + 0.15 < seg[1][0] <= i + 0.45   # across its column only
    assert statistics.mean(series["step_ms_profiled_all_attribution"]) > 2 * statistics.median(
        series["step_ms_profiled_all_attribution"])
    # the column labels name the series in the file's order
    assert list(ax.get_xticks()) == list(range(len(series)))          # each label under its column
    labels = [re.sub(r"[^a-z ]", " ", t.get_text().lower()) for t in ax.get_xticklabels()]
    for lab, key in zip(labels, series):
        words = key.removeprefix("step_ms_").split("_")
        assert all(w in lab.split() for w in words), (lab, key)
    # legend: "median" is drawn in the medians' colour
    entries = legend_entries(ax)
    assert list(entries) == ["median"]
    assert rgba(entries["median"].get_color()) == rgba(meds[0].get_color())
    assert all(rgba(m.get_color()) == rgba(meds[0].get_color()) for m in meds)
    assert rgba(meds[0].get_color()) not in {rgba(p.get_color()) for p in points}      # not a series' colour
    # the unit cross-checked on the trace: the profiled steps' median in ms is the ProfilerStep#N durations' (µs / 1000)
    in_view(ax, [x for ln in points for x in ln.get_xdata()], [y for ln in points for y in ln.get_ydata()])
    assert ax.get_title() == "step wall time, repeated (ms)" and ax.get_yscale() == "log"
    prof = statistics.median(e["dur"] / 1e3 for e in p5_steps())
    assert 0.5 < prof / statistics.median(series["step_ms_profiled_all_attribution"]) < 2


# == plot_shapes (lesson 05) =================================================================

def _profiler_shapes(name):
    """The profiler's own rows for ``name`` grouped by input shape (key_averages.json.gz of
    fixed_batch), largest device total first: (input_shapes, count, device_time_total_us)."""
    with gzip.open(REF / "fixed_batch" / "key_averages.json.gz", "rt") as f:
        rows = [r for r in json.load(f)["by_input_shape"] if r["key"] == name]
    return sorted(((json.loads(r["input_shapes"]), r["count"], r["device_time_total_us"]) for r in rows), key=lambda r: -r[2])


@pytest.mark.parametrize("name,n_shapes", [("aten::cudnn_convolution", 23), ("aten::add_", 6)])
def test_shapes_bars_are_the_profilers_device_totals_in_its_order(scale, name, n_shapes):
    """Lesson 05's shape charts: one bar per input shape, the top 12 by total device time,
    largest at the top; each bar's length the profiler's own device total of that shape
    (``key_averages(group_by_input_shape=True)``, µs) in the axis' unit (ms), each label
    the shape's tensors and each note its calls × the per-call time (µs)."""
    from kitlib.analyses import grouping
    from kitlib.plots.grouping import plot_shapes
    want = _profiler_shapes(name)
    assert len(want) == n_shapes and len({w[2] for w in want}) == n_shapes      # no ties: the order is the profiler's
    table = grouping.shape_table(fixed().trace, name, events=fixed_events())
    fig = plot_shapes(table, name)
    ax = fig.axes[0]
    kind, unit = unit_of(ax.get_xlabel())
    assert kind == "time" and "total" in ax.get_xlabel()
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("total device time (ms)", "input shapes (first two tensors)")
    top = want[:12]
    drawn = bars(ax)
    assert len(drawn) == len(top)
    # bottom to top: the smallest of the 12 first, so the largest is on top; every row in order
    close([w for _, w, _, _ in drawn], [ns(us) / unit for _, _, us in reversed(top)])
    assert [y for _, _, y, _ in drawn] == sorted(y for _, _, y, _ in drawn)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    for lab, (shapes, _, _) in zip(labels, reversed(top)):
        first = [s for s in shapes if s != []][:2]
        if not first:
            assert lab.startswith("[]"), lab
        else:
            assert lab.replace(" ", "").startswith("×".join(str(s) for s in first).replace(" ", "")), (lab, shapes)
    # the note at each bar's end: calls × device time per call (µs)
    notes = texts(ax)
    assert len(notes) == len(top)
    for t, (x, w, y, h), (_, count, us) in zip(notes, drawn, reversed(top)):
        m = re.fullmatch(r"\s*(\d+) calls × ([\d,.]+) µs", t.get_text())
        assert m, t.get_text()
        assert int(m[1]) == count and number(m[2]) == pytest.approx(round(us / count, 1), abs=0.051)
        assert t.get_position() == pytest.approx((x + w, y + h / 2))
    assert ax.get_title() == f"{name}: device time per input shape ({n_shapes} shapes, top {len(top)})"
    bars_in_view(ax)
    in_view(ax, [t.get_position()[0] for t in notes])


# == plot_memory_over_time (lesson 07) =======================================================

def _raw_cuda_memory():
    ev = raw("profiler_5step")
    mem = [e for e in ev if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1]
    return sorted(mem, key=lambda e: e["ts"]), ev


def test_memory_over_time_lines_steps_and_peak_from_raw_json(scale):
    """Lesson 07: the allocated and reserved lines are the allocator's ``Total Allocated``
    and ``Total Reserved`` after each CUDA ``[memory]`` event of the raw JSON, in the unit
    the y label names (GB = 10⁹ bytes), against ms since the first event; a dashed line
    where each ProfilerStep starts; the peak marker at the largest Total Allocated, with
    its value, the operator and the phase around it written beside it. The legend's two
    entries are the two lines, each named for the data it draws."""
    from kitlib.analyses import memory
    from kitlib.plots.memory import plot_memory_over_time
    mem, ev = _raw_cuda_memory()
    t0 = ns(mem[0]["ts"])
    x = [(ns(e["ts"]) - t0) / 1e6 for e in mem]
    alloc = [e["args"]["Total Allocated"] for e in mem]
    reserved = [e["args"]["Total Reserved"] for e in mem]
    tr = p5().trace
    tl = memory.memory_timeline(tr)
    ax = plot_memory_over_time(tl, tr.steps, memory.memory_peak(tl))
    assert unit_of(ax.get_xlabel()) == ("time", 1e6)
    kind, unit = unit_of(ax.get_ylabel())
    assert kind == "bytes"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("time since the first allocator event (ms)", "memory (GB, 10⁹ bytes)")
    steps_lines = [ln for ln in ax.lines if ln.get_drawstyle() == "steps-post"]
    assert len(steps_lines) == 2
    by_label = {ln.get_label(): ln for ln in steps_lines}
    (res_label,) = [k for k in by_label if k.startswith("reserved")]
    (all_label,) = [k for k in by_label if k.startswith("allocated")]
    for label, values in ((res_label, reserved), (all_label, alloc)):
        close(by_label[label].get_xdata(), x)
        close(by_label[label].get_ydata(), np.asarray(values) / unit, 1e-12)
    # the legend: each entry's handle has its line's colour, and the two colours differ
    entries = legend_entries(ax)
    assert set(entries) == {res_label, all_label}
    for label, h in entries.items():
        assert rgba(h.get_color()) == rgba(by_label[label].get_color())
    assert rgba(by_label[res_label].get_color()) != rgba(by_label[all_label].get_color())
    # a dashed line at each step's start (ms since the first memory event), each named
    steps = p5_steps()
    vlines = [ln for ln in ax.lines if ln.get_linestyle() == "--"]
    close([ln.get_xdata()[0] for ln in vlines], [(ns(s["ts"]) - t0) / 1e6 for s in steps])
    step_texts = [t for t in texts(ax) if t.get_text().strip().startswith("step ")]
    assert [t.get_text().strip() for t in step_texts] == [f"step {s['name'].split('#')[1]}" for s in steps]
    close([t.get_position()[0] for t in step_texts], [(ns(s["ts"]) - t0) / 1e6 for s in steps])
    lo, hi = ax.get_ylim()      # written low on the axes, under the lines' start, each inside the view
    assert all(lo <= t.get_position()[1] <= lo + 0.1 * (hi - lo) for t in step_texts)
    # the peak: the first event at the largest Total Allocated
    i = int(np.argmax(alloc))
    (marker,) = [ln for ln in ax.lines if ln.get_marker() == "v"]
    close(marker.get_xdata(), [x[i]])
    close(marker.get_ydata(), [alloc[i] / unit], 1e-12)
    (note,) = [t for t in ax.texts if t.get_text().startswith("peak")]
    m = re.fullmatch(r"peak ([\d.]+) (\w+): (\S+) \((\w+)\)", note.get_text())
    assert m and m[2] == [k for k in UNITS if k in ax.get_ylabel()][-1]
    assert float(m[1]) == round(alloc[i] / unit, 2)
    # the operator and the phase named: the innermost host event around the peak on its
    # thread, and the phase label (any thread) whose interval holds it
    tp = ns(mem[i]["ts"])
    host = [e for e in ev if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")
            and e["tid"] == mem[i]["tid"] and ns(e["ts"]) <= tp <= ns(e["ts"]) + ns(e["dur"])
            and not e["name"].startswith("ProfilerStep#")]
    assert m[3] == max(host, key=lambda e: (e["ts"], -e["dur"]))["name"]
    phases = [e["name"] for e in ev if e.get("cat") == "user_annotation"
              and e["name"] in ("data_load", "h2d", "forward", "backward", "optimizer")
              and ns(e["ts"]) <= tp <= ns(e["ts"]) + ns(e["dur"])]
    assert phases == [m[4]]
    in_view(ax, x, np.asarray(reserved + alloc) / unit)
    assert ax.get_title() == "CUDA memory over time"


@pytest.mark.parametrize("at", [1.0, 1.25, PROJECTOR])
def test_memory_over_time_keeps_the_y_axis_clear_as_lesson_07_shows_it(at):
    """Issue 40: lesson 07's memory curve, drawn after a form answer (``ex.outcome``), had its
    y axis crowded. Drawn as the lesson draws it and shown as a held-back outcome is
    (``labels.stamp_figure``, then the notebook's ``fit_width``), at scale 1, between and
    at a projector's: the y label's box overlaps no tick label's, and the peak note (centred
    on lesson 07's peak, 35 ms into 305, it reached left over the tick labels and the y
    label at scales 1 and 1.25) stays inside the axes, clear of both."""
    from kitlib.analyses import memory
    from kitlib.course import labels
    from kitlib.plots.memory import plot_memory_over_time
    plots.set_scale(at)
    try:
        tr = p5().trace
        tl = memory.memory_timeline(tr)
        ax = plot_memory_over_time(tl, tr.steps, memory.memory_peak(tl))
        fig = ax.figure
        plt.close(fig)
        labels.stamp_figure(fig, "data: profiler_5step")
        plots.fit_width(fig)
        fig.draw_without_rendering()
        r = fig._get_renderer()
        ylabel = ax.yaxis.label.get_window_extent(r)
        ticks = [t.get_window_extent(r) for t in ax.get_yticklabels() if t.get_visible() and t.get_text()]
        assert ticks and not [b for b in ticks if b.overlaps(ylabel)]
        assert ylabel.x1 < min(b.x0 for b in ticks)
        (note,) = [t for t in ax.texts if t.get_text().startswith("peak")]
        box = note.get_bbox_patch().get_window_extent(r)
        axes = ax.get_window_extent(r)
        assert axes.x0 <= box.x0 and box.x1 <= axes.x1, (box, axes)
        assert not box.overlaps(ylabel) and not [b for b in ticks if box.overlaps(b)]
    finally:
        plots.set_scale(1.0)
        plt.close("all")


# == plot_memory_categories (lesson 01) ======================================================

def _coalesced_memory_timeline(path) -> list:
    """``export_memory_timeline(….json)``'s ``[times, sizes]`` made from the raw variant
    that fixed_batch ships (``memory_timeline.raw.json.gz``: one ``[t_ns, action, bytes ±,
    category]`` row per change), the way PyTorch's ``MemoryProfileTimeline._coalesce_timeline``
    does: times in µs (ns // 1000), one entry per distinct time with the bytes held per
    category after it; the pre-existing rows (t = -1) at the smallest time."""
    rows = json.loads(gzip.decompress(path.read_bytes()))
    times, sizes, t_min = [], [], -1
    for t, _action, nbytes, cat in rows:
        t = int(t / 1000) if t != -1 else -1
        if t_min == -1 or (0 < t < t_min):
            t_min = t
        if not times:
            times.append(t)
            sizes.append([0] * 9)
        elif t != times[-1]:
            times.append(t)
            sizes.append(list(sizes[-1]))
        sizes[-1][cat + 1] += nbytes
    return [[t_min if t < 0 else t for t in times], sizes]


CATEGORY_INDEX = ["parameter", "optimizer_state", "input", "temporary", "activation", "gradient",
                  "autograd_detail", "unknown"]     # torch's _CATEGORY_TO_INDEX order


def _memory_categories_figure(tmp_path):
    from kitlib.plots.memory import plot_memory_categories
    from kitlib.readers.memory_timeline import load_memory_timeline
    # coalesced once for the module: both scales and the text-size test draw the same rows
    data = memo("coalesced_memory", lambda: _coalesced_memory_timeline(REF / "fixed_batch" / "memory_timeline.raw.json.gz"))
    f = tmp_path / "memory_timeline.json"
    f.write_text(json.dumps(data))
    return data, plot_memory_categories(load_memory_timeline(f))


def test_memory_categories_stacks_from_the_profilers_rows(scale, tmp_path):
    """Lesson 01's stacked areas: one band per category that ever holds memory, in the
    profiler's category order, each band as thick as that category's bytes in the unit
    the y label names (MiB), stacked in that order, against ms since the first change; each
    legend entry has its band's colour. Rows from fixed_batch's raw memory timeline."""
    (times, sizes), ax = _memory_categories_figure(tmp_path)
    kind, unit = unit_of(ax.get_ylabel())
    assert kind == "bytes"
    assert unit_of(ax.get_xlabel()) == ("time", 1e6)
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == (
        "time since the first recorded change (ms)", "memory held (MiB)", "memory held, by what it holds")
    sizes = np.asarray(sizes, dtype=float)[:, 1:]
    used = [i for i in range(8) if np.abs(sizes[:, i]).sum() > 0]
    assert [CATEGORY_INDEX[i] for i in used] == ["parameter", "optimizer_state", "input", "activation",
                                                 "gradient", "autograd_detail", "unknown"]
    x = (np.asarray(times, dtype=float) - times[0]) * 1000 / 1e6        # µs -> ns -> ms
    bands = [c for c in ax.collections if c.get_paths()]
    assert [b.get_label() for b in bands] == [CATEGORY_INDEX[i] for i in used]
    below = np.zeros(len(x))
    n = len(x)
    for b, i in zip(bands, used):
        above = below + sizes[:, i] / unit
        v = b.get_paths()[0].vertices
        lower, upper = v[1:2 * n], v[-2 * n:-1][::-1]      # post steps: (x0, y0), (x1, y0), (x1, y1), ...
        step_x = np.repeat(x, 2)[1:]
        close(lower[:, 0], step_x)
        close(upper[:, 0], step_x)
        close(lower[:, 1], np.repeat(below, 2)[:-1], 1e-9)
        close(upper[:, 1], np.repeat(above, 2)[:-1], 1e-9)
        below = above
    entries = legend_entries(ax)
    assert list(entries) == [b.get_label() for b in bands]
    for b in bands:
        assert face(entries[b.get_label()]) == face(b)
    assert len({face(b) for b in bands}) == len(bands)


# == plot_chain (lesson 02) ==================================================================

def _raw_chain(name="aten::cudnn_convolution"):
    """The first ``name`` operator of the first ProfilerStep, its CUDA launches (runtime or
    driver calls on its thread inside its interval that made a GPU event) and their GPU
    events by correlation id, from the raw JSON: (op, [(launch, gpu event)])."""
    ev = raw("profiler_5step")
    s = p5_steps()[0]
    t0, t1 = ns(s["ts"]), ns(s["ts"]) + ns(s["dur"])
    op = min((e for e in ev if e.get("cat") == "cpu_op" and e["name"] == name and t0 <= ns(e["ts"]) <= t1),
             key=lambda e: e["ts"])
    o0, o1 = ns(op["ts"]), ns(op["ts"]) + ns(op["dur"])
    gpu = {e["args"]["correlation"]: e for e in ev if e.get("cat") in GPU_CATS}
    calls = sorted((e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver") and e["tid"] == op["tid"]
                    and o0 <= ns(e["ts"]) and ns(e["ts"]) + ns(e["dur"]) <= o1
                    and e.get("args", {}).get("correlation") in gpu), key=lambda e: e["ts"])
    return op, [(c, gpu[c["args"]["correlation"]]) for c in calls]


def test_chain_rows_arrows_and_numbers_from_raw_json(scale):
    """Lesson 02: the operator's bar, each launch's bar and each GPU event's bar at µs
    since the operator started (the x label's unit), on the rows their tick labels name;
    each black arrow goes from a launch to the GPU event of the same correlation id; the
    numbers in the box are each launch's and each GPU event's duration in µs, in order."""
    from kitlib.analyses.chain import first_op
    op, links = _raw_chain()
    assert len(links) >= 2
    tr = p5().trace
    fig = plots.plot_chain(tr, first_op(tr, "aten::cudnn_convolution", step=int(tr.steps["step"].iloc[0])))
    ax = fig.axes[0]
    kind, unit = unit_of(ax.get_xlabel())
    assert kind == "time"
    assert ax.get_xlabel() == "time since the operator started (µs)"
    assert ax.get_title() == "operator → launch (external id) → GPU event (correlation id)"
    o0 = ns(op["ts"])
    rows = {round(y, 6): lab.get_text() for y, lab in zip(ax.get_yticks(), ax.get_yticklabels())}
    drawn = {}
    for c in ax.collections:
        for x, w, y, h in spans(c):
            drawn.setdefault(rows[round(y + h / 2, 6)], []).append((x, w, face(c)))
    streams = {g["args"]["stream"] for _, g in links}
    assert set(drawn) == {"operator (CPU thread)", "CUDA launches (CPU thread)", f"GPU (stream {streams.pop()})"}
    close([(x, w) for x, w, _ in drawn["operator (CPU thread)"]], [(0, ns(op["dur"]) / unit)])
    close(sorted((x, w) for x, w, _ in drawn["CUDA launches (CPU thread)"]),
          [((ns(c["ts"]) - o0) / unit, ns(c["dur"]) / unit) for c, _ in links])
    (gpu_row,) = [k for k in drawn if k.startswith("GPU")]
    close(sorted((x, w) for x, w, _ in drawn[gpu_row]), sorted(((ns(g["ts"]) - o0) / unit, ns(g["dur"]) / unit)
                                                              for _, g in links))
    # arrows launch -> GPU event: from the middle of a launch to the start of its own GPU event
    black = [p for p in ax.patches if type(p).__name__ == "FancyArrowPatch" and rgba(p.get_edgecolor()) == rgba("black")]
    ends = sorted((a.get_path().vertices[0][0], a.get_path().vertices[-1][0]) for a in black)
    ax.figure.canvas.draw()
    starts = sorted(((ns(c["ts"]) - o0 + ns(c["dur"]) / 2) / unit, (ns(g["ts"]) - o0) / unit) for c, g in links)
    pairs = sorted((a._posA_posB[0][0], a._posA_posB[1][0]) for a in black)
    close(pairs, starts)
    assert len(ends) == len(links)
    # the box: one line per launch, its host and device µs as the raw JSON has them
    (box,) = [t for t in ax.texts if "→" in t.get_text()]
    lines = box.get_text().split("\n")
    assert len(lines) == len(links)
    for i, (line, (c, g)) in enumerate(zip(lines, links)):
        m = re.fullmatch(r"#(\d+)\s+(\S+) ([\d,.]+) µs \(host\)\s+→\s+.+ ([\d,.]+) µs \(device\)", line)
        assert m, line
        assert m[2] == c["name"] and number(m[3]) == pytest.approx(c["dur"], abs=5e-4)
        assert number(m[4]) == pytest.approx(g["dur"], abs=5e-4)
    every = [(x, x + w) for v in drawn.values() for x, w, _ in v]
    in_view(ax, [a for a, _ in every] + [b for _, b in every])
    # each row's bars whole inside the view, rows apart; every arrow joins the rows it names
    box_of = {}
    for c in ax.collections:
        for x, w, y, h in spans(c):
            in_view(ax, [x, x + w], [y, y + h])
            box_of.setdefault(rows[round(y + h / 2, 6)], (y, y + h))
    (op_lo, op_hi), (l_lo, l_hi), (g_lo, g_hi) = (box_of["operator (CPU thread)"],
                                                  box_of["CUDA launches (CPU thread)"], box_of[gpu_row])
    assert g_hi < l_lo and l_hi < op_lo
    close(sorted(a._posA_posB[0][1] for a in black), [l_lo] * len(links))
    close(sorted(a._posA_posB[1][1] for a in black), [g_hi] * len(links))
    grey = [p for p in ax.patches if type(p).__name__ == "FancyArrowPatch" and p not in black]
    close(sorted((a._posA_posB[0][0], a._posA_posB[0][1], a._posA_posB[1][0], a._posA_posB[1][1]) for a in grey),
          sorted(((ns(c["ts"]) - o0) / unit, op_lo, (ns(c["ts"]) - o0) / unit, l_hi) for c, _ in links))
    # "#i" beside each launch (above its bar) and each GPU event (below its bar), at the bar's
    # centre, i as in the box; no two labels overlap, and all stay inside the axes
    index = [int(re.match(r"#(\d+)", line)[1]) for line in lines]
    tags = [t for t in ax.texts if re.fullmatch(r"#\d+", t.get_text())]
    want_tags = sorted([(f"#{i}", (ns(c["ts"]) - o0 + ns(c["dur"]) / 2) / unit, "launch") for i, (c, _) in zip(index, links)]
                       + [(f"#{i}", (ns(g["ts"]) - o0 + ns(g["dur"]) / 2) / unit, "gpu") for i, (_, g) in zip(index, links)])
    got_tags = sorted((t.get_text(), t.get_position()[0], "launch" if t.get_position()[1] >= l_hi else
                       "gpu" if t.get_position()[1] <= g_lo else "?") for t in tags)
    assert [(a, c) for a, _, c in got_tags] == [(a, c) for a, _, c in want_tags]
    close([b for _, b, _ in got_tags], [b for _, b, _ in want_tags])
    fig.canvas.draw()
    boxes = [t.get_window_extent() for t in tags]
    frame = ax.get_window_extent()
    for i, bb in enumerate(boxes):
        assert frame.x0 - 1 <= bb.x0 and bb.x1 <= frame.x1 + 1 and frame.y0 - 1 <= bb.y0 and bb.y1 <= frame.y1 + 1
        for other in boxes[i + 1:]:
            assert not bb.overlaps(other), "two #i labels overlap"
    (head,) = [t for t in ax.texts if t.get_text().startswith(op["name"])]
    assert head.get_position()[0] == 0 and op_hi <= head.get_position()[1] < ax.get_ylim()[1]
    assert number(re.search(r"([\d,.]+) µs \(host\)", head.get_text())[1]) == pytest.approx(op["dur"], abs=5e-4)


# == plot_step_timeline (lesson 00) ==========================================================

def test_step_timeline_rows_from_raw_json(scale):
    """Lesson 00: the second ProfilerStep; per GPU stream, the kernels, copies and sets
    that the step's launches made (correlation ids of launches inside the step), at ms
    since the step started, one collection per kind whose legend entry has its colour;
    the step's own bar; and each phase label's ranges on its own row."""
    ev = raw("profiler_5step")
    s = p5_steps()[1]
    t0, t1 = ns(s["ts"]), ns(s["ts"]) + ns(s["dur"])
    launch = raw_launches(ev)
    gpu = [e for e in ev if e.get("cat") in GPU_CATS and e["args"].get("correlation") in launch
           and t0 <= ns(launch[e["args"]["correlation"]]["ts"]) <= t1]
    step = int(s["name"].split("#")[1])
    assert step == int(p5().trace.steps["step"].iloc[1])
    fig = plots.plot_step_timeline(p5().trace, step)
    ax = fig.axes[0]
    kind, unit = unit_of(ax.get_xlabel())
    assert ax.get_xlabel() == f"time since ProfilerStep#{step} started (ms)"
    rows = {round(y, 6): lab.get_text() for y, lab in zip(ax.get_yticks(), ax.get_yticklabels())}
    drawn, colours = {}, {}
    for c in ax.collections:
        for x, w, y, h in spans(c):
            drawn.setdefault((rows[round(y + h / 2, 6)], c.get_label()), []).append((x, w))
        colours.setdefault(c.get_label(), set()).add(face(c))
    want = {}
    for e in gpu:
        want.setdefault((f"GPU stream {e['args']['stream']}", GPU_CATS[e["cat"]]), []).append(
            ((ns(e["ts"]) - t0) / unit, ns(e["dur"]) / unit))
    labels = ("data_load", "h2d", "forward", "backward", "optimizer")
    for lab in labels:
        r = [((ns(e["ts"]) - t0) / unit, ns(e["dur"]) / unit) for e in ev
             if e.get("cat") == "user_annotation" and e["name"] == lab and t0 <= ns(e["ts"]) <= t1]
        if r:
            want[(f"{lab} (host)", None)] = r
    want[("step (host)", None)] = [(0.0, (t1 - t0) / unit)]
    got = {(row, k if not k.startswith("_") else None): v for (row, k), v in drawn.items()}
    assert set(got) == set(want)
    for k in want:
        close(sorted(got[k]), sorted(want[k]))
    # the rows, top to bottom: phases in the order given, the step, then the streams in order
    order = [lab.get_text() for lab in sorted(ax.get_yticklabels(), key=lambda t: -t.get_position()[1])]
    phases_drawn = [f"{lab} (host)" for lab in labels if (f"{lab} (host)", None) in want]
    streams = sorted({e["args"]["stream"] for e in gpu})
    assert order == phases_drawn[::-1] + ["step (host)"] + [f"GPU stream {s}" for s in reversed(streams)]
    (step_text,) = [t for t in ax.texts if t.get_text() == f"ProfilerStep#{step}"]
    step_y = [y for y, lab in zip(ax.get_yticks(), ax.get_yticklabels()) if lab.get_text() == "step (host)"]
    assert step_text.get_position() == (0, step_y[0])         # on the step's own bar, at its start
    entries = legend_entries(ax)
    assert set(entries) == {GPU_CATS[e["cat"]] for e in gpu}
    for k, h in entries.items():
        assert colours[k] == {face(h)}
    assert len({face(h) for h in entries.values()}) == len(entries)


# == plot_four_measures (lesson 03) ==========================================================

def test_four_measures_bars_from_raw_json(scale):
    """Lesson 03: one bar per measure of ProfilerStep#2 in the table's row order, top to
    bottom; each bar's length in the x label's unit (ms) and the number written beside it
    computed here from the raw JSON (the step's interval, its operators' totals summed and
    merged per thread, the GPU events its launches made, summed and merged, the kernels
    summed); host measures in the colour of the legend's "host clock", device ones in
    "device clock". The operators' self sum rests on the profiler's tree: taken from the
    table (tests/oracle/test_oracle.py checks it against key_averages)."""
    from conftest import merged_length
    from kitlib.analyses import four_measures
    from kitlib.plots.timeline import plot_four_measures
    ev = raw("profiler_5step")
    s = p5_steps()[0]
    t0, t1 = ns(s["ts"]), ns(s["ts"]) + ns(s["dur"])
    ops = [e for e in ev if e.get("cat") == "cpu_op" and e.get("ph") == "X" and t0 <= ns(e["ts"]) < t1]
    launch = raw_launches(ev)
    gpu = [e for e in ev if e.get("cat") in GPU_CATS
           and t0 <= ns(launch.get(e["args"].get("correlation"), {"ts": -1})["ts"]) <= t1]
    iv = lambda es: [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in es]  # noqa: E731
    m = four_measures.four_measures(p5().trace)
    want = {"wall": ns(s["dur"]), "host_ops_total_sum": sum(ns(e["dur"]) for e in ops),
            "host_ops_self_sum": int(m.set_index("measure").loc["host_ops_self_sum", "value_ns"]),
            "host_ops_top_level": sum(merged_length(iv([e for e in ops if e["tid"] == t])) for t in {e["tid"] for e in ops}),
            "device_busy": merged_length(iv(gpu)), "gpu_sum": sum(ns(e["dur"]) for e in gpu),
            "kernel_sum": sum(ns(e["dur"]) for e in gpu if e["cat"] == "kernel")}
    fig = plot_four_measures(m, title="ProfilerStep#2, measured four ways")
    ax = fig.axes[0]
    kind, unit = unit_of(ax.get_xlabel())
    assert kind == "time"
    assert ax.get_xlabel() == "time (ms)"
    drawn = barh_by_label(ax)
    assert list(drawn) == list(want)[::-1]        # bottom to top: the table's last row first
    close([drawn[k] for k in want], [want[k] / unit for k in want])
    assert len(texts(ax)) == len(bars(ax)) == len(want)
    for t, (x, w, y, h) in zip(texts(ax), bars(ax)):
        assert number(re.fullmatch(r"\s*([\d,.]+) ms", t.get_text())[1]) == pytest.approx(w, abs=0.0051)
        assert t.get_position() == pytest.approx((x + w, y + h / 2))
    entries = legend_entries(ax)
    assert set(entries) == {"host clock", "device clock"}
    cont = [c for c in ax.containers][0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    for p, lab in zip(cont.patches, labels):
        clock = "device clock" if lab in ("device_busy", "gpu_sum", "kernel_sum") else "host clock"
        assert face(p) == face(entries[clock]), lab
    assert face(entries["host clock"]) != face(entries["device clock"])
    bars_in_view(ax)
    assert ax.get_title() == "ProfilerStep#2, measured four ways"


# == plot_callsites (lesson 06) ==============================================================

def test_callsites_bars_are_the_tables_rows_in_order(scale):
    """Lesson 06: the ten call sites with the most device time, the largest on top, each
    bar the table's ``device_self_ns`` in the x label's unit (ms) and its note the table's
    GPU event count. Grouping GPU time by Python frame is the analysis itself
    (``callsites.group_by_callsite``, pinned by tests/analyses/test_callsites_host_calls.py), so the
    bars are compared with its table; the table's whole device time is checked here against
    the raw JSON: every GPU event's duration except those launched before the recording
    began (no runtime call of their correlation id in the trace)."""
    from kitlib.analyses import callsites
    from kitlib.plots.grouping import plot_callsites
    tr = fixed().trace
    table = callsites.group_by_callsite(tr, table=callsites.callsites(tr, fixed_events()))
    ev = raw("fixed_batch")
    launch = raw_launches(ev)
    gpu = [e for e in ev if e.get("cat") in GPU_CATS]
    assert table["device_self_ns"].sum() == sum(ns(e["dur"]) for e in gpu if e["args"].get("correlation") in launch)
    fig = plot_callsites(table)
    ax = fig.axes[0]
    kind, unit = unit_of(ax.get_xlabel())
    assert kind == "time"
    assert ax.get_xlabel() == "device time of the GPU events launched from there (ms)"
    top = table.head(10)
    assert top["device_self_ns"].tolist() == sorted(table["device_self_ns"], reverse=True)[:10]
    drawn = bars(ax)
    close([w for _, w, _, _ in drawn], top["device_self_ns"].to_numpy()[::-1] / unit)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    for lab, site in zip(labels, top["user_frame"].astype(str)[::-1]):
        assert lab == site if len(site) <= 52 else site.startswith(lab.rstrip("…")), (lab, site)
    notes = [int(re.fullmatch(r"\s*(\d+) GPU events", t.get_text())[1]) for t in texts(ax)]
    assert notes == top["gpu_events"].tolist()[::-1]
    bars_in_view(ax)
    assert ax.get_title() == "device time by user frame"


# == plot_attribution_cost (lesson 06) =======================================================

def _attribution_sizes():
    def make():
        from kitlib.analyses import grouping
        from kitlib.readers.files import read_json_file
        return grouping.attribution_bytes(read_json_file(p5().file("trace.json.gz")))
    return memo("sizes", make)


@pytest.mark.parametrize("with_steps", [False, True], ids=["lesson06", "with_step_times"])
def test_attribution_cost_bars_and_medians(scale, with_steps):
    """Lesson 06: one bar per variant of the trace, in the table's order top to bottom,
    each its gzip size in the x label's unit (MB, 10⁶ bytes). Writing the five variants
    is the analysis (``attribution_bytes``, pinned in tests/analyses/test_grouping.py), so the bars
    are compared with its table; the first row is checked against the raw JSON's event
    count. With step times (``step_ms``), the right panel's points are each series of
    ``step_times.json`` (ms) and its black line, which the title calls the median, is the
    median."""
    from kitlib.plots.grouping import plot_attribution_cost
    sizes = _attribution_sizes()
    assert sizes.loc["as recorded", "events"] == len(raw("profiler_5step"))
    series = json.loads((REF / "profiler_5step" / "step_times.json").read_text())
    fig = plot_attribution_cost(sizes, series if with_steps else None)
    ax = fig.axes[0]
    kind, unit = unit_of(ax.get_xlabel())
    assert kind == "bytes" and ax.get_xlabel() == "trace size, gzip (MB)"
    assert ax.get_title() == "the same steps, written without each option"
    labels = [t.get_text() for t in sorted(ax.get_yticklabels(), key=lambda t: -t.get_position()[1])]
    assert labels == list(sizes.index)
    drawn = barh_by_label(ax)
    close([drawn[k] for k in sizes.index], sizes["gzip_bytes"].to_numpy() / unit, 1e-12)
    assert len(fig.axes) == (2 if with_steps else 1)
    bars_in_view(ax)
    if with_steps:
        ax2 = fig.axes[1]
        assert unit_of(ax2.get_ylabel()) == ("time", 1e6)
        assert ax2.get_title() == "step times (black line: median)"
        assert ax2.get_ylabel() == "wall time of a step (ms)" and ax2.get_yscale() == "log"
        points = [ln for ln in ax2.lines if ln.get_marker() == "o"]
        meds = [ln for ln in ax2.lines if ln.get_marker() in ("None", None, "") and rgba(ln.get_color()) == rgba("k")]
        assert len(points) == len(meds) == len(series)
        for i, (p, md, vals) in enumerate(zip(points, meds, series.values())):
            close(p.get_ydata(), vals, 0)
            x = np.asarray(p.get_xdata())
            assert np.all(np.abs(x - i) <= 0.3) and np.all(np.diff(x) > 0)
            close(md.get_ydata(), [statistics.median(vals)] * 2, 1e-12)
            assert i - 0.45 <= min(md.get_xdata()) < i - 0.15 and i + 0.15 < max(md.get_xdata()) <= i + 0.45
        assert [t.get_text() for t in ax2.get_xticklabels()] == list(series)
        assert list(ax2.get_xticks()) == list(range(len(series)))
        in_view(ax2, [x for ln in points for x in ln.get_xdata()], [y for ln in points for y in ln.get_ydata()])


# == plot_device_time_counted (lesson 08) ====================================================

COUNTED = ("aten::conv2d", "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::mul", "aten::add")


def _raw_covered():
    """GPU time by outermost aten:: operator above its launch, from the raw JSON of
    fixed_batch: each kernel, copy or set by its correlation id to the runtime call that
    launched it, then the host events (cpu_op, labels other than ProfilerStep#N) enclosing
    that call on its thread; counted when one of them is an operator ``with_flops``
    estimates (COUNTED, as PyTorch's ``computeFlops`` list). {name: (events, ns, counted)}.
    Worked out once for the module (both scales compare with the same rows)."""
    return memo("raw_covered", _work_out_raw_covered)


def _work_out_raw_covered():
    ev = raw("fixed_batch")
    host = {}
    for e in ev:
        if e.get("ph") == "X" and (e.get("cat") == "cpu_op" or (e.get("cat") == "user_annotation"
                                                                and not e["name"].startswith("ProfilerStep#"))):
            host.setdefault((e["pid"], e["tid"]), []).append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"]))
    host = {k: (np.array([h[0] for h in v]), np.array([h[1] for h in v]), [h[2] for h in v]) for k, v in host.items()}
    launch = raw_launches(ev)
    rows = {}
    for g in ev:
        if g.get("cat") not in GPU_CATS:
            continue
        top, counted = "(no operator)", False
        call = launch.get(g["args"].get("correlation"))
        if call is not None:
            t0, t1 = ns(call["ts"]), ns(call["ts"]) + ns(call["dur"])
            s, e, names = host[(call["pid"], call["tid"])]
            around = sorted(((s[i], e[i], names[i]) for i in np.flatnonzero((s <= t0) & (e >= t1))),
                            key=lambda h: (h[0], -h[1]))
            counted = any(h[2] in COUNTED for h in around)
            aten = [h[2] for h in around if h[2].startswith("aten::")]
            top = aten[0] if aten else (around[-1][2] if around else "(no operator)")
        n, d, c = rows.get(top, (0, 0, False))
        rows[top] = (n + 1, d + ns(g["dur"]), c or counted)
    return rows


def test_device_time_counted_bars_from_raw_json(scale):
    """Lesson 08: the 12 operators with the most GPU time, the largest on top, each bar its
    summed device time in the x label's unit (ms); green where ``with_flops`` counts it,
    grey where not, as the title says."""
    from kitlib.analyses import flops
    from kitlib.plots.flops import plot_device_time_counted
    want = sorted(_raw_covered().items(), key=lambda kv: -kv[1][1])[:12]
    assert len({d for _, (_, d, _) in want}) == 12
    ax = plot_device_time_counted(flops.device_time_covered(fixed().trace), n=12)
    kind, unit = unit_of(ax.get_xlabel())
    assert kind == "time"
    assert ax.get_title() == "GPU time under operators with_flops counts, and the rest\n(green: counted; grey: no FLOP estimate)"
    assert ax.get_xlabel() == "device time, summed over the recorded steps (ms)"
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [k for k, _ in reversed(want)]
    drawn = bars(ax)
    close([w for _, w, _, _ in drawn], [d / unit for _, (_, d, _) in reversed(want)])
    cont = ax.containers[0]
    for p, (k, (_, _, counted)) in zip(cont.patches, reversed(want)):
        assert face(p) == rgba("tab:green" if counted else "tab:gray"), k
    assert sum(c for _, (_, _, c) in want) >= 1 and not all(c for _, (_, _, c) in want)
    bars_in_view(ax)


# == plot_achieved_vs_peak (lesson 08) =======================================================

def test_achieved_vs_peak_bars_are_the_tables_values(scale):
    """Lesson 08: the datasheet peaks of the chosen precision (grey), then the estimates
    (green), top to bottom in the tables' order, each bar and the number beside it in
    TFLOP/s as the tables hold them. The peaks are pinned to NVIDIA's datasheets and the
    estimates to the profiler's figures in tests/analyses/test_memory_flops.py and
    test_lesson_analyses.py; here the picture is checked against those tables."""
    from kitlib.analyses import flops
    from kitlib.analyses.flop_rates import matched_rates
    from kitlib.course import step_flop_counts
    from kitlib.plots.flops import plot_achieved_vs_peak
    cap = fixed()
    rates = matched_rates(cap.trace, step_flop_counts(cap))
    achieved = rates["tflops_estimate"].to_dict()
    peaks = flops.peak_table(cap.provenance.get("gpu"))
    ax = plot_achieved_vs_peak(achieved, peaks, "TF32")
    assert ax.get_xlabel() == "TFLOP/s (10¹² floating-point operations per second)"
    assert ax.get_title() == "achieved-rate estimates (from shape arithmetic)\nvs dense TF32 datasheet peaks — not utilization"
    p = peaks["TF32_tflops"].dropna()
    # short labels (the key, and who the marked GPU is), so the bars keep their width
    assert list(p.index) == ["B300", "B200", "H200 = the capture's GPU (NVIDIA H200)", "H100", "A100"]
    short = {"H200 = the capture's GPU (NVIDIA H200)": "H200 (capture's GPU)"}
    want = [(f"peak {short.get(k, k)}", v, "tab:gray") for k, v in p.items()] + \
           [(f"estimate: {k}", v, "tab:green") for k, v in achieved.items()]
    labels = [t.get_text() for t in sorted(ax.get_yticklabels(), key=lambda t: -t.get_position()[1])]
    assert labels == [w[0] for w in want]
    drawn = barh_by_label(ax)
    close([drawn[w[0]] for w in want], [w[1] for w in want], 1e-12)
    cont = ax.containers[0]
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    colour = dict(zip(ticks, (face(q) for q in cont.patches)))
    assert all(colour[lab] == rgba(c) for lab, _, c in want)
    written = sorted((t.get_position()[1], number(t.get_text())) for t in texts(ax))
    assert [v for _, v in written] == [round(w[1]) for w in reversed(want)]
    bars_in_view(ax)
    in_view(ax, [t.get_position()[0] for t in texts(ax)])


# == plot_ncu_speed_of_light (lesson 08) =====================================================

def _ncu_metrics():
    """{kernel ID: {metric name: (value, unit)}} from Nsight Compute's own CSV."""
    lines = (REF / "ncu" / "conv_kernels_speed_of_light.csv").read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith('"ID"'))
    out, names = {}, {}
    for r in csv.DictReader(lines[start:]):
        if re.fullmatch(r"[\d,.]+", r["Metric Value"].strip()):
            out.setdefault(int(r["ID"]), {})[r["Metric Name"]] = (number(r["Metric Value"]), r["Metric Unit"])
        names[int(r["ID"])] = r["Kernel Name"]
    return out, names


def test_ncu_bars_are_the_csvs_percentages(scale):
    """Lesson 08: per kernel of the ncu report, left: compute (SM) and memory throughput,
    right: theoretical and achieved occupancy, each bar the CSV's value, in % as both the
    CSV's unit and the y labels say; each legend entry has the colour of its metric's
    bars; kernels in ID order, labelled with their ID."""
    from kitlib.plots.flops import plot_ncu_speed_of_light
    from kitlib.readers.ncu import load_ncu_csv
    want, names = _ncu_metrics()
    axes = plot_ncu_speed_of_light(load_ncu_csv(REF / "ncu" / "conv_kernels_speed_of_light.csv"))
    ids = sorted(want)
    for ax, metrics in ((axes[0], ["Compute (SM) Throughput", "Memory Throughput"]),
                        (axes[1], ["Theoretical Occupancy", "Achieved Occupancy"])):
        assert ax.get_ylabel() == ("throughput (% of the device's peak)" if ax is axes[0] else
                                   "occupancy (% of max warps per SM)")
        assert [t.get_text().split()[0] for t in ax.get_xticklabels()] == [f"#{k}" for k in ids]
        entries = legend_entries(ax)
        assert list(entries) == metrics
        for i, m in enumerate(metrics):
            assert {want[k][m][1] for k in ids} == {"%"}
            rect = bars(ax, i)
            close([h for _, _, _, h in rect], [want[k][m][0] for k in ids], 1e-9)
            # each bar over its kernel's tick, this metric's side of it (the legend's order, left to right)
            for k, (x, w, _, _) in enumerate(rect):
                assert k - 0.45 <= x and x + w <= k + 0.45
                assert (x + w <= k + 1e-9) if i == 0 else (x >= k - 1e-9)
            cont = [c for c in ax.containers][i]
            assert {face(p) for p in cont.patches} == {face(entries[m])}
        assert face(entries[metrics[0]]) != face(entries[metrics[1]])
        for i in range(len(metrics)):
            bars_in_view(ax, i)
        no_overlap(ax)
        assert ax.get_title() == f"Nsight Compute: {'speed of light' if ax is axes[0] else 'occupancy'}"


# == plot_timeline (lessons 04 and 09) =======================================================

NSYS = REF / "nsys_8step" / "report.sqlite"


def _nsys_report():
    """``load_nsys(NSYS)``, read once for the module (as ``Capture.nsys`` reads a capture's
    report once): the timeline tests and the text-size test draw on the same report."""
    from kitlib.readers.nsys import load_nsys
    return memo("nsys_report", lambda: load_nsys(NSYS))


def _sql_timeline():
    """Everything plot_timeline can draw, read here from Nsight's SQLite export: NVTX push/pop
    ranges, CUDA runtime calls, OS runtime calls, kernels, copies and sets, each as (pid, tid
    or stream, name, start, end) in ns; thread names by (pid, tid)."""
    def make():
        split = lambda g: (g >> 24 & 0xFFFFFF, g & 0xFFFFFF)  # noqa: E731   globalTid = pid << 24 | tid
        names = {split(g): n for g, n in sql_rows(NSYS, "SELECT t.globalTid, s.value FROM ThreadNames t "
                                                         "JOIN StringIds s ON s.id = t.nameId")}
        nvtx = [(*split(g), text, s, e) for g, text, s, e in sql_rows(
            NSYS, "SELECT globalTid, text, start, end FROM NVTX_EVENTS WHERE eventType = 59 AND end IS NOT NULL")]
        api = [(*split(g), n, s, e) for g, n, s, e in sql_rows(
            NSYS, "SELECT r.globalTid, s.value, r.start, r.end FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                  "JOIN StringIds s ON s.id = r.nameId")]
        osrt = [(*split(g), n, s, e) for g, n, s, e in sql_rows(
            NSYS, "SELECT o.globalTid, s.value, o.start, o.end FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId")]
        gpu = {}
        for kind, table in (("kernel", "KERNEL"), ("memcpy", "MEMCPY"), ("memset", "MEMSET")):
            gpu[kind] = sql_rows(NSYS, f"SELECT streamId, start, end FROM CUPTI_ACTIVITY_KIND_{table}")
        return names, nvtx, api, osrt, gpu
    return memo("sql_timeline", make)


def _cut(rows, w0, w1):
    """(start, end) of the rows that overlap [w0, w1), cut to it (a zero-length row counts
    when w0 <= start < w1)."""
    out = []
    for s, e in rows:
        cs, ce = max(s, w0), min(e, w1)
        if ce > cs or (s == e and w0 <= s < w1):
            out.append((cs, ce))
    return out


def _expected_lanes(w0, w1, osrt_tids):
    """{lane label: [(start, end) ns]}: the lanes as the picture names them, filled here
    from the SQLite rows."""
    names, nvtx, api, osrt, gpu = _sql_timeline()
    steps = sorted((r for r in nvtx if r[2] == "torch_step"), key=lambda r: r[3])
    main = steps[0][1]
    lanes = {}
    lab = [(s, e) for p, t, n, s, e in nvtx if t == main]
    cut = _cut(lab, w0, w1)
    for s, e in cut:
        depth = sum(1 for a, b in cut if a <= s and b >= e) - 1
        lanes.setdefault(f"labels, level {depth} (host)", []).append((s, e))
    for tid in osrt_tids:
        rows = [(p, s, e) for p, t, n, s, e in osrt if t == tid]
        c = _cut([(s, e) for _, s, e in rows], w0, w1)
        if c:
            lanes[f"OS runtime · {names[(rows[0][0], tid)]} ({tid})"] = c
    for key in sorted({(p, t) for p, t, *_ in api}):
        c = _cut([(s, e) for p, t, n, s, e in api if (p, t) == key], w0, w1)
        if c:
            lanes[f"CUDA API · {names.get(key, '?')} ({key[1]})"] = c
    for kind, rows in gpu.items():
        for stream in sorted({r[0] for r in rows}):
            c = _cut([(s, e) for st, s, e in rows if st == stream], w0, w1)
            if c:
                lanes[f"GPU stream {stream} · {kind}s"] = c
    return lanes, steps, main


def _raw_gaps(steps, min_gap):
    """Idle periods of the GPU of at least ``min_gap`` ns inside each step: the step's
    window minus the union of the kernels, copies and sets that overlap it."""
    *_, gpu = _sql_timeline()
    work = sorted((s, e) for rows in gpu.values() for _, s, e in rows)
    gaps = []
    for *_, s0, s1 in steps:
        t = s0
        for s, e in _cut(work, s0, s1):
            if s - t >= min_gap:
                gaps.append((t, s))
            t = max(t, e)
        if s1 - t >= min_gap:
            gaps.append((t, s1))
    return gaps


@pytest.mark.parametrize("lesson", ["04", "09"])
def test_timeline_lanes_and_gaps_from_the_sqlite_export(scale, lesson):
    """Lesson 04 (nsys_8step, steps 0-1, the GPU's idle gaps shaded, OS-runtime lanes of the
    main and pin threads) and lesson 09 (step 2 from its start): every lane the picture
    names holds exactly the SQLite rows its name says (the NVTX ranges of the main thread
    by nesting level, a thread's CUDA runtime or OS runtime calls, a stream's kernels,
    copies or sets), cut to the window, at ms since the origin the x label names; bars
    thinner than 1/2000 of the window drawn at that width; lanes in the kit's order. Each
    shaded span is an idle period of ≥ 50 ms that the test finds in the kernels, copies and
    sets of each step, and the legend's "GPU idle" is their colour."""
    from kitlib.analyses import steps as S
    from kitlib.plots.timeline import plot_timeline
    rep = _nsys_report()
    names, nvtx, *_ = _sql_timeline()
    steps = sorted((r for r in nvtx if r[2] == "torch_step"), key=lambda r: r[3])
    main = steps[0][1]
    if lesson == "04":
        w0, w1 = steps[0][3], steps[1][4]
        pin = [t for (p, t), n in names.items() if n == "pt_data_pin"]
        osrt, origin = [main] + pin, w0
        gaps = S.step_gaps(rep, min_gap_ns=50_000_000)
        fig = plot_timeline(rep, w0, w1, gaps=gaps, osrt_threads=osrt, title="nsys_8step: steps 0 and 1")
    else:
        w0, w1 = steps[2][3], steps[2][4]
        osrt, origin, gaps = [main], w0, None
        fig = plot_timeline(rep, w0, w1, osrt_threads=osrt, origin_label="step 2 started", title="step 2")
    lanes, _, _ = _expected_lanes(w0, w1, osrt)
    ax = fig.axes[0]
    kind, unit = unit_of(ax.get_xlabel())
    assert kind == "time"
    assert ax.get_xlabel() == ("time since the window started (ms)" if lesson == "04" else "time since step 2 started (ms)")
    rows = {round(y, 6): lab.get_text() for y, lab in zip(ax.get_yticks(), ax.get_yticklabels())}
    drawn = {}
    boxes = [(sp, face(c) if sp else None) for c in ax.collections for sp in [spans(c)]]   # read once per collection
    for sp, _ in boxes:
        for x, w, y, h in sp:
            drawn.setdefault(rows[round(y + h / 2, 6)], []).append((x, w))
    assert set(drawn) == set(lanes)
    least = (w1 - w0) / unit / 2000
    for lane, want in lanes.items():
        close(sorted(drawn[lane]), sorted(((s - origin) / unit, max((e - s) / unit, least)) for s, e in want))
    kinds = {}
    for sp, fc in boxes:
        for _, _, y, h in sp:
            lane = rows[round(y + h / 2, 6)]
            kinds.setdefault(lane.split()[-1] if lane.startswith("GPU") else lane.split(" · ")[0].split(",")[0],
                             set()).add(fc)
    assert all(len(v) == 1 for v in kinds.values()) and len({next(iter(v)) for v in kinds.values()}) == len(kinds)
    assert rgba("gray") not in {next(iter(v)) for v in kinds.values()}      # no lane of a kind without its colour
    top_down = [t.get_text() for t in sorted(ax.get_yticklabels(), key=lambda t: -t.get_position()[1])]
    levels = sorted((k for k in lanes if k.startswith("labels")), key=lambda k: int(k.split()[2]))
    api = [k for k in lanes if k.startswith("CUDA API")]
    api = [k for k in api if k.endswith(f"({main})")] + [k for k in api if not k.endswith(f"({main})")]
    os_lanes = [k for t in osrt for k in lanes if k.startswith("OS runtime") and k.endswith(f"({t})")]
    gpu = sorted((k for k in lanes if k.startswith("GPU")),
                 key=lambda k: (int(k.split()[2]), ["memcpys", "kernels", "memsets"].index(k.split()[-1])))
    assert top_down == levels + api + os_lanes + gpu
    assert ax.get_xlim() == pytest.approx(((w0 - origin) / unit, (w1 - origin) / unit))
    # each NVTX range longer than 1/40 of the window has its name written at its middle, on its lane
    lab = [(n, *c) for p, t, n, s0, e0 in nvtx if t == main for c in _cut([(s0, e0)], w0, w1)]
    want_names = sorted((n, round(((a - origin) + (b - a) / 2) / unit, 6)) for n, a, b in lab if b - a > (w1 - w0) / 40)
    assert len(want_names) >= 2
    names_drawn = [t for t in ax.texts if t.get_text() in {n for n, *_ in lab}]
    assert len(names_drawn) == len(ax.texts)          # nothing else is written on the lanes
    assert sorted((t.get_text(), round(t.get_position()[0], 6)) for t in names_drawn) == want_names
    for t in names_drawn:
        assert rows[round(t.get_position()[1], 6)].startswith("labels, level")
    if gaps is not None:
        want = _raw_gaps(steps, 50_000_000)
        assert len(want) == len(gaps) >= 2
        shaded = [p for p in ax.patches if type(p).__name__ == "Rectangle" and p.get_alpha() == 0.25]
        got = sorted((p.get_x(), p.get_x() + p.get_width()) for p in shaded)
        close(got, sorted(((s - origin) / unit, (e - origin) / unit) for s, e in want))
        entries = legend_entries(ax)
        assert list(entries) == ["GPU idle"]
        assert {face(p) for p in shaded} == {face(entries["GPU idle"])}
    else:
        assert ax.get_legend() is None


@pytest.mark.parametrize("origin", ["window", "first step"])
def test_timeline_of_a_profiler_trace_from_raw_json(scale, origin):
    """plot_timeline on a torch.profiler trace (the explorer of lesson 00 draws one): the
    second step of profiler_5step; labels by nesting level, the CUDA runtime calls per
    thread and the kernels, copies and sets per stream, each lane the raw JSON's events
    cut to the window, at ms since the window started, or since the first step started
    when that origin is given. Each kind of event has the colour the step timeline of the
    same step gives it (its legend for kernels, copies and sets; its label rows)."""
    from kitlib.plots.timeline import plot_timeline
    ev = raw("profiler_5step")
    s = p5_steps()[1]
    w0, w1 = ns(s["ts"]), ns(s["ts"]) + ns(s["dur"])
    if origin == "window":
        fig, t0 = plot_timeline(p5().trace, w0, w1), w0
    else:
        t0 = ns(p5_steps()[0]["ts"])
        fig = plot_timeline(p5().trace, w0, w1, origin_ns=t0, origin_label="step 2 started")
    ax = fig.axes[0]
    kind, unit = unit_of(ax.get_xlabel())
    assert ax.get_xlabel() == ("time since the window started (ms)" if origin == "window"
                               else "time since step 2 started (ms)")
    rows = {round(y, 6): lab.get_text() for y, lab in zip(ax.get_yticks(), ax.get_yticklabels())}
    drawn, colour = {}, {}
    for c in ax.collections:
        sp = spans(c)
        fc = face(c) if sp else None          # one colour per collection: read once, not per rectangle
        for x, w, y, h in sp:
            drawn.setdefault(rows[round(y + h / 2, 6)], []).append((x, w))
            colour.setdefault(rows[round(y + h / 2, 6)], set()).add(fc)
    other = plots.plot_step_timeline(p5().trace, int(s["name"].split("#")[1])).axes[0]
    entries = legend_entries(other)
    rows2 = {round(y, 6): lab.get_text() for y, lab in zip(other.get_yticks(), other.get_yticklabels())}
    label_colour = {face(c) for c in other.collections for _, _, y, h in spans(c)
                    if rows2[round(y + h / 2, 6)] == "forward (host)"}
    for lane, cs in colour.items():
        if lane.startswith("GPU"):
            assert cs == {face(entries[lane.split()[-1][:-1]])}, lane
        elif lane.startswith("labels"):
            assert cs == label_colour, lane
    iv = lambda es: [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in es]  # noqa: E731
    least = (w1 - w0) / unit / 2000
    want = {}
    for e in ev:
        if e.get("cat") in GPU_CATS:
            key = f"GPU stream {e['args']['stream']} · {GPU_CATS[e['cat']]}s"
            want.setdefault(key, []).extend(_cut(iv([e]), w0, w1))
    lab = _cut(iv([e for e in ev if e.get("cat") == "user_annotation" and e["tid"] == s["tid"]]), w0, w1)
    for a, b in lab:
        want.setdefault(f"labels, level {sum(1 for c, d in lab if c <= a and d >= b) - 1} (host)", []).append((a, b))
    for e in ev:
        if e.get("cat") in ("cuda_runtime", "cuda_driver"):
            key = f"CUDA API · {'main' if e['tid'] == s['tid'] else 'thread'} ({e['tid']})"
            want.setdefault(key, []).extend(_cut(iv([e]), w0, w1))
    want = {k: v for k, v in want.items() if v}
    assert set(drawn) == set(want)
    for lane, rows_ in want.items():
        close(sorted(drawn[lane]), sorted(((a - t0) / unit, max((b - a) / unit, least)) for a, b in rows_))
    assert ax.get_xlim() == pytest.approx(((w0 - t0) / unit, (w1 - t0) / unit))


# == plot_attribution (lesson 09) ============================================================

def _sql_kernel_sums(rule):
    """{label: {step: ns}}: the kernel time Nsight's export credits to each NVTX range of
    each step (steps: the ``torch_step`` ranges in time order, from 0), read here from the
    SQLite rows. ``time``: kernels whose CUDA runtime launch (same correlation id) starts
    inside the range, on any thread; ``thread``: the same, on the range's own thread only
    (Nsight's projection)."""
    nvtx = sql_rows(NSYS, "SELECT text, start, end, globalTid FROM NVTX_EVENTS WHERE eventType = 59")
    steps = sorted((r for r in nvtx if r[0] == "torch_step"), key=lambda r: r[1])
    launch = {c: (s, g) for c, s, g in sql_rows(NSYS, "SELECT correlationId, start, globalTid "
                                                      "FROM CUPTI_ACTIVITY_KIND_RUNTIME")}
    kernels = [(launch[c], e - s) for c, s, e in sql_rows(NSYS, "SELECT correlationId, start, end "
                                                                 "FROM CUPTI_ACTIVITY_KIND_KERNEL") if c in launch]
    out = {}
    for name, s, e, g in sorted(nvtx, key=lambda r: r[1]):
        if name == "torch_step":
            continue
        k = next(i for i, st in enumerate(steps) if st[1] <= s < st[2])
        out.setdefault(name, {})[k] = sum(d for (ls, lg), d in kernels if s <= ls < e and (rule == "time" or lg == g))
    return out


def _aligned():
    """cold_start_8step aligned with nsys_8step by thread and by time, computed once for the
    module (both scales of the test below and the text-size test draw the same pair)."""
    from kitlib.analyses.align import align

    def make():
        prof, nsys = kitlib.open_capture("cold_start_8step"), kitlib.open_capture("nsys_8step")
        return align(prof, nsys, attribution="thread"), align(prof, nsys, attribution="time")
    return memo("align", make)


def test_attribution_bars_are_medians_of_the_sqlite_kernel_sums(scale):
    """Lesson 09: per phase, two bars, the kernel time credited to it under Nsight's
    thread rule and under the time rule, each the median over the warm steps (step > 0)
    of the sums the test reads from the SQLite export, in the x label's unit (ms); each
    legend entry has the colour of its own rule's bars (``backward`` shows which is which:
    0.7 µs by thread, 26 ms by time); phases top to bottom in the order they run."""
    from kitlib.plots.system import plot_attribution
    by_thread, by_time = _aligned()
    fig = plot_attribution(by_thread, by_time)
    ax = fig.axes[0]
    kind, unit = unit_of(ax.get_xlabel())
    assert kind == "time"
    assert ax.get_xlabel() == "kernel time credited (ms; kernels only, copies not counted)"
    want = {rule: {lab: statistics.median(v for k, v in per.items() if k > 0)
                   for lab, per in _sql_kernel_sums(rule).items()} for rule in ("thread", "time")}
    assert want["thread"]["backward"] < 1_000 < 20_000_000 < want["time"]["backward"]
    labels = [t.get_text() for t in sorted(ax.get_yticklabels(), key=lambda t: t.get_position()[1],
                                           reverse=not ax.yaxis_inverted())]
    assert labels == list(want["time"])             # data_load, forward, backward, optimizer: as they run
    entries = legend_entries(ax)
    assert len(entries) == 2
    (thread_label,) = [k for k in entries if k.startswith("thread")]
    (time_label,) = [k for k in entries if k.startswith("time")]
    ticks = {round(y, 6): lab.get_text() for y, lab in zip(ax.get_yticks(), ax.get_yticklabels())}
    for cont in ax.containers:
        (colour,) = {face(p) for p in cont.patches}
        rule = "thread" if colour == face(entries[thread_label]) else "time"
        assert colour == face(entries[thread_label if rule == "thread" else time_label])
        got = {}
        for p in cont.patches:
            centre = p.get_y() + p.get_height() / 2
            tick = min(ticks, key=lambda t: abs(t - centre))
            assert tick - 0.45 <= p.get_y() and p.get_y() + p.get_height() <= tick + 0.45
            got[ticks[tick]] = p.get_width()
        close([got[k] for k in labels], [want[rule][k] / unit for k in labels], 1e-9)
    assert face(entries[thread_label]) != face(entries[time_label])
    for i in range(2):
        bars_in_view(ax, i)
    no_overlap(ax)
    assert ax.get_title() == "GPU work credited to each phase (median over warm steps)"


# == plot_routes (lesson 11) =================================================================

def test_routes_dots_where_each_tool_answers(scale):
    """Lesson 11's map: a big dot at (tool, question) exactly where ``l11.ROUTES`` lists
    the tool for the question, a small grey one elsewhere; questions top to bottom in the
    table's order, tools left to right in the order given. And on a hand-made table whose
    columns come in another order than the tools asked for."""
    import pandas as pd
    from kitlib.course.exercises import l11
    from kitlib.plots.routes import plot_routes
    tools = list(l11.TOOLS)
    for table, order in ((l11.route_table(), tools),
                         (pd.DataFrame({"key": ["a", "b", "c"], "y": [True, False, True], "x": [False, False, True]}),
                          ["x", "y"])):
        fig = plot_routes(table, order)
        ax = fig.axes[0]
        assert [t.get_text() for t in ax.get_xticklabels()] == order
        keys = [t.get_text() for t in sorted(ax.get_yticklabels(), key=lambda t: t.get_position()[1],
                                             reverse=not ax.yaxis_inverted())]
        assert keys == list(table["key"])
        ytick = {lab.get_text(): y for y, lab in zip(ax.get_yticks(), ax.get_yticklabels())}
        big = {(order[int(round(ln.get_xdata()[0]))], keys[[ytick[k] for k in keys].index(round(ln.get_ydata()[0]))])
               for ln in ax.lines if ln.get_marker() == "o"}
        small = {(order[int(round(ln.get_xdata()[0]))], keys[[ytick[k] for k in keys].index(round(ln.get_ydata()[0]))])
                 for ln in ax.lines if ln.get_marker() == "."}
        want = {(t, r["key"]) for _, r in table.iterrows() for t in order if r[t]}
        assert big == want
        assert small == {(t, k) for t in order for k in table["key"]} - want
        if order is tools:
            assert want == {(t, key) for key, _, answer, *_ in l11.ROUTES for t in answer}
        sizes = {ln.get_marker(): ln.get_markersize() for ln in ax.lines}
        assert sizes["o"] > sizes["."]
        # every dot inside the view, with room for its marker on each side (half a column or row)
        xs = [ln.get_xdata()[0] for ln in ax.lines]
        ys = [ln.get_ydata()[0] for ln in ax.lines]
        in_view(ax, [min(xs) - 0.4, max(xs) + 0.4], [min(ys) - 0.4, max(ys) + 0.4])
        assert ax.get_xlabel().startswith("tool") and ax.get_title() == "which tool answers which question"


# == plot_rank_timeline (lesson 12) ==========================================================

def _raw_rank_run(folder):
    """Per rank of a two-rank Gloo run, from each rank's raw JSON (times: the trace's µs in
    ns plus its baseTimeNanoseconds, i.e. ns since the Unix epoch): its ProfilerStep
    intervals, its injected ``straggler_delay`` ranges, and its ``gloo:*`` ranges (the
    collectives as Gloo's worker thread ran them). Read once per folder for the module
    (both scales compare with the same figures); each file decompressed and parsed once."""
    return memo(("raw_rank_run", folder), lambda: _read_raw_rank_run(folder))


def _read_raw_rank_run(folder):
    import orjson
    out = {}
    for rank_dir in sorted((REF / folder).glob("rank*")):
        doc = orjson.loads(gzip.decompress((rank_dir / "trace.json.gz").read_bytes()))   # as raw_trace_events
        base = int(doc.get("baseTimeNanoseconds", 0))
        ev = doc["traceEvents"]
        iv = lambda e: (ns(e["ts"]) + base, ns(e["ts"]) + base + ns(e["dur"]))  # noqa: E731
        r = int(rank_dir.name[4:])
        out[r] = {"steps": {int(e["name"].split("#")[1]): iv(e) for e in raw_steps(ev)},
                  "delay": [iv(e) for e in ev if e.get("ph") == "X" and e.get("name") == "straggler_delay"],
                  "gloo": sorted((iv(e) + (e["name"],) for e in ev if e.get("ph") == "X"
                                  and e["name"].startswith("gloo:")), key=lambda c: c[0])}
    return out


def _rank_run(run):
    """The rank traces lesson 12 reads in replay (``course.ranks.recordings()``): the two
    Gloo folders, and the public NCCL pair by its two files."""
    if run == "nccl":
        return memo("nccl", lambda: kitlib.load_traces(
            [REF / "public-traces" / f"hta_2024-03_nccl_sampled_rank{r}.json.gz" for r in (0, 1)], partial=True))
    return memo(run, lambda: kitlib.load_traces(REF / f"ranks_{run}"))


@pytest.mark.parametrize("run", ["balanced", "straggler"])
def test_rank_timeline_from_each_ranks_raw_json(scale, run):
    """Lesson 12: one row per rank; its steps (grey), the injected delay (orange), and each
    collective split at the moment the last rank joined it: waiting before (red), transfer
    after (blue), all at ms since the earliest step start; the k-th call of a name on one
    rank meets the k-th on the other. Computed here from the raw JSON of both ranks; each
    legend entry has the colour of the bars the test finds for it."""
    from kitlib.plots.ranks import plot_rank_timeline
    data = _raw_rank_run(f"ranks_{run}")
    traces = _rank_run(run)
    ax = plot_rank_timeline(traces)
    kind, unit = unit_of(ax.get_xlabel())
    assert kind == "time"
    assert ax.get_xlabel() == "time since the first step's start (ms; one host, one clock)"
    assert ax.get_title() == "2 ranks, gloo: collectives measured on host"
    origin = min(s for d in data.values() for s, _ in d["steps"].values())
    end = max(e for d in data.values() for _, e in d["steps"].values())
    ms = lambda a, b: ((a - origin) / unit, (b - a) / unit)  # noqa: E731
    calls = {}
    for r, d in data.items():
        seen = {}
        for s, e, name in d["gloo"]:
            k = seen[name] = seen.get(name, -1) + 1
            step = next((n for n, (a, b) in d["steps"].items() if a <= s < b), None)
            calls.setdefault((name, k), {})[r] = (s, e, step)
    want = {(r, c): [] for r in data for c in ("step", "wait", "transfer", "delay")}
    for (name, k), per in calls.items():
        last = max(s for s, _, _ in per.values())
        for r, (s, e, step) in per.items():
            if step is None:
                continue
            cut = min(max(last, s), e)
            want[(r, "wait")].append(ms(s, cut))
            want[(r, "transfer")].append(ms(cut, e))
    for r, d in data.items():
        want[(r, "step")] = [ms(a, b) for a, b in d["steps"].values()]
        want[(r, "delay")] = [ms(a, b) for a, b in d["delay"] if origin <= a <= end]
    ticks = {round(y, 6): lab.get_text() for y, lab in zip(ax.get_yticks(), ax.get_yticklabels())}
    assert sorted(ticks.values()) == [f"rank {r}" for r in sorted(data)]
    entries = legend_entries(ax)
    colour = {"step": face(entries["step (host)"]), "delay": face(entries["injected delay"]),
              "wait": face(next(h for k, h in entries.items() if k.startswith("collective: waiting"))),
              "transfer": face(next(h for k, h in entries.items() if k.startswith("collective: transfer")))}
    assert len(set(colour.values())) == 4
    of_colour = {v: k for k, v in colour.items()}
    got = {k: [] for k in want}
    for c in ax.collections:
        what = of_colour[face(c)]
        for x, w, y, h in spans(c):
            row = min(ticks, key=lambda t: abs(t - (y + h / 2)))
            assert row - 0.45 <= y and y + h <= row + 0.45        # inside its own row
            got[(int(ticks[row].split()[1]), what)].append((x, w))
    if run == "straggler":
        assert want[(1, "delay")] or want[(0, "delay")]
    # rank 0 on top, every bar whole inside the view; "step N" written at the middle of each step's bar
    assert [t.get_text() for t in sorted(ax.get_yticklabels(), key=lambda t: -t.get_position()[1])] == \
        [f"rank {r}" for r in sorted(data)]
    for c in ax.collections:
        for x, w, y, h in spans(c):
            in_view(ax, [x, x + w], [y, y + h])
    row_y = {lab.get_text(): y for y, lab in zip(ax.get_yticks(), ax.get_yticklabels())}
    step_texts = sorted((t.get_text(), round(t.get_position()[0], 6), t.get_position()[1]) for t in ax.texts
                        if t.get_text().startswith("step "))
    want_texts = sorted((f"step {n}", round((a - origin + (b - a) / 2) / unit, 6), r) for r, d in data.items()
                        for n, (a, b) in d["steps"].items())
    assert [(t, x) for t, x, _ in step_texts] == [(t, x) for t, x, _ in want_texts]
    for (_, _, y), (_, _, r) in zip(step_texts, want_texts):
        assert row_y[f"rank {r}"] < y < row_y[f"rank {r}"] + 0.42
    assert {k: len(v) for k, v in got.items()} == {k: len(v) for k, v in want.items()}
    for k in want:
        close(sorted(got[k]), sorted(want[k]))
    assert ax.get_xlim() == pytest.approx((0, (end - origin) / unit))


def test_rank_timeline_of_the_public_nccl_pair_draws_the_tables(scale):
    """The public NCCL pair of lesson 12 (device-side collectives, found through the kernel →
    operator chain): its wait and transfer bars are those of ``collective_waits`` (the
    analysis, pinned from the raw JSON in tests/analyses/test_distributed.py), its steps those of the
    raw JSON, in ms since the earliest step."""
    from kitlib.analyses.collectives import collective_waits, collectives
    from kitlib.plots.ranks import plot_rank_timeline
    traces = _rank_run("nccl")
    ax = plot_rank_timeline(traces, title="public NCCL pair")
    kind, unit = unit_of(ax.get_xlabel())
    assert ax.get_xlabel() == "time since the first step's start (ms; hosts unknown: clocks compared as written)"
    assert ax.get_title() == "public NCCL pair"
    steps = {}
    for r in (0, 1):
        ev = raw_trace_events(REF / "public-traces" / f"hta_2024-03_nccl_sampled_rank{r}.json.gz")
        steps[r] = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in raw_steps(ev)]
    origin = min(a for v in steps.values() for a, _ in v)
    w = collective_waits(traces, collectives(traces))
    entries = legend_entries(ax)
    by_colour = {}
    ticks = {round(y, 6): lab.get_text() for y, lab in zip(ax.get_yticks(), ax.get_yticklabels())}
    for c in ax.collections:
        for x, wd, y, h in spans(c):
            row = min(ticks, key=lambda t: abs(t - (y + h / 2)))
            by_colour.setdefault((face(c), ticks[row]), []).append((x, wd))
    for r in (0, 1):
        close(sorted(by_colour[(face(entries["step (host)"]), f"rank {r}")]),
              sorted(((a - origin) / unit, (b - a) / unit) for a, b in steps[r]))
        mine = w[w["rank"] == r]
        wait = next(h for k, h in entries.items() if k.startswith("collective: waiting"))
        transfer = next(h for k, h in entries.items() if k.startswith("collective: transfer"))
        close(sorted(by_colour[(face(wait), f"rank {r}")]),
              sorted(zip((mine["start_ns"] - origin) / unit, mine["wait_ns"] / unit)))
        close(sorted(by_colour[(face(transfer), f"rank {r}")]),
              sorted(zip((mine["start_ns"] + mine["wait_ns"] - origin) / unit, mine["transfer_ns"] / unit)))


# == text size, every picture ================================================================

def _pictures(tmp_path) -> dict:
    """Each of the plot functions, drawn as its lesson draws it: {name: () -> Figure}."""
    from kitlib.analyses import flops, four_measures, grouping, memory
    from kitlib.analyses import steps as S
    from kitlib.analyses.callsites import callsites, group_by_callsite
    from kitlib.analyses.chain import first_op
    from kitlib.analyses.flop_rates import matched_rates
    from kitlib.course import step_flop_counts
    from kitlib.course.exercises import l11
    from kitlib.plots import flops as PF, grouping as PG, memory as PM, ranks as PR, routes as PRo, system as PS
    from kitlib.plots import timeline as PT
    from kitlib.readers.ncu import load_ncu_csv
    tr, ftr = p5().trace, fixed().trace
    fig = lambda a: a.figure if hasattr(a, "figure") else a  # noqa: E731

    def timeline():
        rep = _nsys_report()
        st = S.steps_of(rep)
        return PT.plot_timeline(rep, int(st["start_ns"].iloc[0]), int(st["end_ns"].iloc[1]),
                                gaps=S.step_gaps(rep, min_gap_ns=50_000_000), osrt_threads=[int(st["tid"].iloc[0])])

    def memory_over_time():
        tl = memo("memory_timeline", lambda: memory.memory_timeline(tr))
        return fig(PM.plot_memory_over_time(tl, tr.steps, memory.memory_peak(tl)))

    def attribution():
        return PS.plot_attribution(*_aligned())

    def achieved():
        rates = memo("rates", lambda: matched_rates(ftr, step_flop_counts(fixed())))
        return fig(PF.plot_achieved_vs_peak(rates["tflops_estimate"].to_dict(),
                                            flops.peak_table(fixed().provenance.get("gpu")), "TF32"))

    return {
        "plot_chain": lambda: plots.plot_chain(tr, first_op(tr, "aten::cudnn_convolution", step=2)),
        "plot_step_timeline": lambda: plots.plot_step_timeline(tr, 3),
        "plot_step_times": lambda: plots.plot_step_times(p5().step_times()),
        "plot_device_time_counted": lambda: fig(PF.plot_device_time_counted(flops.device_time_covered(ftr), n=12)),
        "plot_achieved_vs_peak": achieved,
        "plot_ncu_speed_of_light": lambda: fig(PF.plot_ncu_speed_of_light(
            load_ncu_csv(REF / "ncu" / "conv_kernels_speed_of_light.csv"))[0]),
        "plot_shapes": lambda: PG.plot_shapes(grouping.shape_table(ftr, "aten::cudnn_convolution",
                                                                   events=fixed_events()), "aten::cudnn_convolution"),
        "plot_callsites": lambda: PG.plot_callsites(memo("by_line", lambda: group_by_callsite(
            ftr, table=callsites(ftr, fixed_events())))),
        "plot_attribution_cost": lambda: PG.plot_attribution_cost(_attribution_sizes(), p5().step_times()),
        "plot_memory_over_time": memory_over_time,
        "plot_memory_categories": lambda: fig(_memory_categories_figure(tmp_path)[1]),
        "plot_rank_timeline": lambda: fig(PR.plot_rank_timeline(_rank_run("straggler"))),
        "plot_routes": lambda: PRo.plot_routes(l11.route_table(), list(l11.TOOLS)),
        "plot_attribution": attribution,
        "plot_timeline": timeline,
        "plot_four_measures": lambda: PT.plot_four_measures(four_measures.four_measures(tr)),
    }


def _plot_functions() -> set:
    """The names of the ``plot_*`` functions defined in kitlib/plots."""
    names = set()
    for f in (Path(plots.__file__).parent).glob("*.py"):
        names |= set(re.findall(r"^def (plot_\w+)\(", f.read_text(), flags=re.M))
    return names


def _text_sizes(fig) -> list:
    """(text, size in px) of every visible, non-empty text of a drawn figure: titles, axis
    labels, tick labels, legend texts, annotations. The figure is laid out and its ticks
    and texts placed as by a draw, without rasterising it: nothing here reads pixels."""
    fig.draw_without_rendering()
    out = []
    for t in fig.findobj(matplotlib.text.Text):
        if t.get_visible() and t.get_text().strip() and t.get_figure() is not None:
            if isinstance(t, matplotlib.text.Text) and t.axes is not None and t in t.axes.get_xticklabels() + t.axes.get_yticklabels():
                lo, hi = t.axes.get_xlim() if t in t.axes.get_xticklabels() else t.axes.get_ylim()
                pos = t.get_position()[0 if t in t.axes.get_xticklabels() else 1]
                if not (min(lo, hi) - 1e-9 <= pos <= max(lo, hi) + 1e-9):
                    continue          # a tick outside the view is not drawn
            out.append((t.get_text()[:40], t.get_fontsize() * fig.dpi / 72))
    return out


def _tick_lies(fig) -> list:
    """Numeric tick labels that do not say their tick's value: (axis, position, text)."""
    out = []
    for ax in fig.axes:
        for name, ticks, labels, lim in (("x", ax.get_xticks(), ax.get_xticklabels(), ax.get_xlim()),
                                         ("y", ax.get_yticks(), ax.get_yticklabels(), ax.get_ylim())):
            lo, hi = sorted(lim)
            for pos, lab in zip(ticks, labels):
                text = lab.get_text().replace("−", "-").replace(",", "")
                if not re.fullmatch(r"-?\d+(\.\d+)?", text) or not lo <= pos <= hi:
                    continue        # a name (categorical axis), an empty minor label, or out of view
                digits = len(text.split(".")[1]) if "." in text else 0
                if abs(float(text) - pos) > 0.5 * 10 ** -digits + 1e-9 * abs(pos):
                    out.append((name, pos, lab.get_text()))
    return out


def test_every_picture_text_is_at_least_9_px_and_follows_the_scale(tmp_path):
    """Issue 27: text in the pictures was 5-7 px. Every text of every plot function's
    picture is at least 9 px at scale 1 (font size in points × dpi / 72), and at the
    projector scale every one of them is that size times the scale. And every numeric tick
    label of every picture says the value of its tick (a formatter that printed µs for
    ms, or a log axis' minor labels, would not)."""
    pictures = _pictures(tmp_path)
    # the 16 functions of issue 31 (pictures added later, such as plots.nsys_gui, carry tests of their own)
    assert len(pictures) == 16 and set(pictures) <= _plot_functions()
    try:
        small, unscaled, lies = [], [], []
        for name, draw in pictures.items():
            plots.set_scale(1.0)
            f = draw()
            one = _text_sizes(f)
            lies += [(name, *x) for x in _tick_lies(f)]
            plt.close("all")
            small += [(name, t, round(px, 1)) for t, px in one if px < 9]
            plots.set_scale(PROJECTOR)
            big = _text_sizes(draw())
            plt.close("all")
            # the same texts (tick labels may thin out with a larger font: those both have)
            a, b = {}, {}
            for t, px in one:
                a.setdefault(t, []).append(px)
            for t, px in big:
                b.setdefault(t, []).append(px)
            assert len(set(a) & set(b)) >= 0.6 * len(a), name
            unscaled += [(name, t) for t in set(a) & set(b) if len(a[t]) == len(b[t])
                         and sorted(b[t]) != pytest.approx([v * PROJECTOR for v in sorted(a[t])])]
        assert small == []
        assert unscaled == []
        assert lies == []           # every numeric tick label says its tick's value
    finally:
        plots.set_scale(1.0)
        plt.close("all")


def test_a_long_data_note_wraps_to_the_figure_and_many_recordings_are_said_once():
    """Lesson 13's note named 16 recordings on one line: with bbox_inches="tight" the PNG grew to
    3,889 px wide and the plot was shown at 0.22×. The note now names them once and wraps to the
    figure's width, so the saved PNG is no wider than the figure."""
    import io

    from PIL import Image

    from kitlib.course import labels
    kinds = [f"case_{c}_{w}: kit's CPU clinic case, 2026-12-02" for c in "abcdefgh" for w in ("before", "after")]
    assert labels._grouped(kinds) == ["16 recordings (case_a_before … case_h_after): kit's CPU clinic case, 2026-12-02"]
    assert labels._grouped(kinds[:8] + ["x: yours"]) == kinds[:8] + ["x: yours"]     # eight are each named
    long_note = "data: " + "; ".join(kinds)       # what any note longer than its figure would be
    widths = {}
    for note in (None, long_note):
        fig, ax = plt.subplots(figsize=(6, 3), dpi=100)
        ax.plot([0, 1], [0, 1])
        if note:
            labels.stamp_figure(fig, note)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight")
        plt.close(fig)
        widths[bool(note)] = Image.open(buf).size[0]
    print("PNG width without note / with a 1,000-character note:", widths)
    assert widths[True] <= 6 * 100           # no wider than the 6-inch figure at 100 dpi
