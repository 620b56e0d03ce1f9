"""kitlib.plots.nsys_gui read back from what it draws (issue 26: the Nsight Systems GUI's
layout; issue 31: a picture tested on its drawn data). Every row the picture names must hold
exactly the SQLite export's rows its name says — a stream's kernels, copies (by copyKind)
and sets; a thread's CUDA runtime calls, OS runtime calls and NVTX ranges by nesting level —
cut to the window, at ms since the origin the x label names, in the GUI's order (CUDA HW
first, then each thread's OS runtime, CUDA API and NVTX rows), each kind in its legend
colour. The expected rows come from SQL here, without kitlib's reader."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from conftest import REF, sql_rows  # noqa: E402

DB = REF / "nsys_8step" / "report.sqlite"
COPY = {1: "memcpy HtoD", 2: "memcpy DtoH", 8: "memcpy DtoD"}


@pytest.fixture(params=[1.0, 1.6], ids=["default", "projector"])
def scale(request):
    from kitlib import plots
    plots.set_scale(request.param)
    yield request.param
    plots.set_scale(1.0)
    plt.close("all")


def _tid(g):
    return g & 0xFFFFFF


def _sql():
    names = {_tid(g): n for g, n in sql_rows(DB, "SELECT t.globalTid, s.value FROM ThreadNames t "
                                                 "JOIN StringIds s ON s.id = t.nameId")}
    gpu = [("kernel", st, s, e) for st, s, e in sql_rows(DB, "SELECT streamId, start, end FROM CUPTI_ACTIVITY_KIND_KERNEL")]
    gpu += [(COPY.get(k, "memcpy other"), st, s, e) for st, k, s, e in
            sql_rows(DB, "SELECT streamId, copyKind, start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY")]
    gpu += [("memset", st, s, e) for st, s, e in sql_rows(DB, "SELECT streamId, start, end FROM CUPTI_ACTIVITY_KIND_MEMSET")]
    api = [(_tid(g), s, e) for g, s, e in sql_rows(DB, "SELECT globalTid, start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME")]
    osrt = [(_tid(g), s, e) for g, s, e in sql_rows(DB, "SELECT globalTid, start, end FROM OSRT_API")]
    nvtx = [(_tid(g), t, s, e) for g, t, s, e in sql_rows(
        DB, "SELECT globalTid, text, start, end FROM NVTX_EVENTS WHERE eventType = 59 AND end IS NOT NULL")]
    return names, gpu, api, osrt, nvtx


def _cut(rows, w0, w1):
    out = []
    for s, e in rows:
        cs, ce = max(s, w0), min(e, w1)
        if ce > cs or (s == e and w0 <= s < w1):
            out.append((cs, ce))
    return sorted(out)


def _expected(w0, w1, threads):
    """{(row label, kind): [(start, end)]} and the rows' order, from SQL."""
    names, gpu, api, osrt, nvtx = _sql()
    want, order = {}, []
    for st in sorted({r[1] for r in gpu if _cut([(r[2], r[3])], w0, w1)}):
        lab = f"CUDA HW · Stream {st}"
        order.append(lab)
        for kind in {r[0] for r in gpu}:
            c = _cut([(s, e) for k, t, s, e in gpu if t == st and k == kind], w0, w1)
            if c:
                want[(lab, kind)] = c
    for tid in threads:
        who = f"[{tid}] {names[tid]}"
        for lab, kind, rows in ((f"{who} · OS runtime libraries", "OS runtime", [(s, e) for t, s, e in osrt if t == tid]),
                                (f"{who} · CUDA API", "CUDA API", [(s, e) for t, s, e in api if t == tid])):
            c = _cut(rows, w0, w1)
            if c:
                want[(lab, kind)] = c
                order.append(lab)
        mine = [(s, e) for t, _, s, e in nvtx if t == tid]
        by_depth = {}
        for s, e in mine:
            depth = sum(1 for a, b in mine if a <= s and b >= e) - 1     # ranges enclosing it
            by_depth.setdefault(depth, []).append((s, e))
        for depth in sorted(by_depth):
            c = _cut(by_depth[depth], w0, w1)
            if c:
                lab = f"{who} · NVTX" + (f" (level {depth})" if depth else "")
                want[(lab, "NVTX")] = c
                order.append(lab)
    return want, order


def _drawn(fig):
    ax = fig.axes[0]
    rows = {round(y, 6): t.get_text() for y, t in zip(ax.get_yticks(), ax.get_yticklabels())}
    got, colours = {}, {}
    for coll in ax.collections:
        lab, kind = coll.get_gid().split("|")
        for p in coll.get_paths():
            v = p.vertices
            y = (v[:, 1].min() + v[:, 1].max()) / 2
            assert rows[round(y, 6)] == lab                    # the bar sits on the row its gid names
            got.setdefault((lab, kind), []).append((v[:, 0].min(), v[:, 0].max() - v[:, 0].min()))
        colours[kind] = tuple(np.round(coll.get_facecolor()[0], 4))
    top_down = [t.get_text() for t in sorted(ax.get_yticklabels(), key=lambda t: -t.get_position()[1])]
    return ax, got, colours, top_down


def _nvtx_steps():
    return sorted(sql_rows(DB, "SELECT start, end, globalTid FROM NVTX_EVENTS WHERE text = 'torch_step'"))


@pytest.mark.parametrize("window", ["step 2", "first data_load"])
def test_every_bar_is_a_sql_row_in_the_guis_order(scale, window):
    from kitlib.plots.nsys_gui import COLORS, plot_nsys_gui
    from kitlib.readers.nsys import load_nsys
    rep = load_nsys(DB)
    names, *_ = _sql()
    steps = _nvtx_steps()
    main = _tid(steps[0][2])
    if window == "step 2":
        w0, w1 = steps[2][0], steps[2][1]
        autograd = [t for t, n in names.items() if n == "pt_autograd_0"]
        threads, origin = [main] + autograd, w0
        fig = plot_nsys_gui(rep, w0, w1, origin_label="step 2 started", title=window)
        assert fig.axes[0].get_xlabel() == "time since step 2 started (ms)"
    else:
        (w0, w1), = sql_rows(DB, "SELECT start, end FROM NVTX_EVENTS WHERE text = 'data_load' ORDER BY start LIMIT 1")
        pin = [t for t, n in names.items() if n == "pt_data_pin"]
        threads, origin = [main] + pin, steps[0][0]
        fig = plot_nsys_gui(rep, w0, w1, threads=threads, origin_ns=origin, origin_label="step 0 started")
    want, order = _expected(w0, w1, threads)
    ax, got, colours, top_down = _drawn(fig)
    assert set(got) == set(want)
    least = (w1 - w0) / 1e6 / 2000
    for key, rows in want.items():
        drawn = sorted(got[key])
        expect = sorted(((s - origin) / 1e6, max((e - s) / 1e6, least)) for s, e in rows)
        np.testing.assert_allclose(np.asarray(drawn), np.asarray(expect), rtol=1e-9, atol=1e-6, err_msg=str(key))
    assert top_down == order                                    # CUDA HW, then each thread's rows
    assert ax.get_xlim() == pytest.approx(((w0 - origin) / 1e6, (w1 - origin) / 1e6))
    # the legend names each kind drawn, in its bars' colour
    leg = {t.get_text(): h for t, h in zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles)}
    assert set(leg) == set(colours)
    for kind, c in colours.items():
        assert c == tuple(np.round(to_rgba(COLORS[kind]), 4)) == tuple(np.round(leg[kind].get_facecolor(), 4))


def test_nvtx_names_are_written_on_wide_ranges(scale):
    from kitlib.plots.nsys_gui import plot_nsys_gui
    from kitlib.readers.nsys import load_nsys
    steps = _nvtx_steps()
    w0, w1 = steps[2][0], steps[2][1]
    fig = plot_nsys_gui(load_nsys(DB), w0, w1)
    written = sorted(t.get_text() for t in fig.axes[0].texts)
    main = steps[0][2]
    wide = sorted(t for t, s, e in sql_rows(DB, "SELECT text, start, end FROM NVTX_EVENTS WHERE eventType = 59 "
                                                "AND globalTid = ?", main)
                  if min(e, w1) - max(s, w0) > (w1 - w0) / 25)
    assert written == wide and "torch_step" in written and "backward" in written


def _texts(fig):
    """(text, px) of every visible, non-empty text of a figure (ticks outside the view left out)."""
    from matplotlib.text import Text
    fig.canvas.draw()
    out = []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip():
            continue
        ax = t.axes
        if ax is not None and (t in ax.get_xticklabels() or t in ax.get_yticklabels()):
            lo, hi = ax.get_xlim() if t in ax.get_xticklabels() else ax.get_ylim()
            pos = t.get_position()[0 if t in ax.get_xticklabels() else 1]
            if not min(lo, hi) - 1e-9 <= pos <= max(lo, hi) + 1e-9:
                continue
        out.append((t.get_text(), t.get_fontsize() * fig.dpi / 72))
    return out


def test_every_text_is_at_least_9_px_and_follows_the_scale():
    """As test_plots_drawn's rule for the other pictures (issue 27): at scale 1 no text is
    under 9 px; at the projector scale each is that size times the scale."""
    from kitlib import plots
    from kitlib.plots.nsys_gui import plot_nsys_gui
    from kitlib.readers.nsys import load_nsys
    rep = load_nsys(DB)
    w0, w1 = _nvtx_steps()[2][:2]
    try:
        plots.set_scale(1.0)
        one = _texts(plot_nsys_gui(rep, w0, w1, title="step 2"))
        plt.close("all")
        plots.set_scale(1.6)
        big = _texts(plot_nsys_gui(rep, w0, w1, title="step 2"))
    finally:
        plots.set_scale(1.0)
        plt.close("all")
    assert one and min(px for _, px in one) >= 9, sorted(one, key=lambda x: x[1])[:3]
    a, b = dict(one), dict(big)
    common = set(a) & set(b)
    assert len(common) >= 0.6 * len(a)
    assert all(b[t] == pytest.approx(a[t] * 1.6) for t in common)


def test_flows_join_a_launch_to_its_gpu_operation():
    """Arrows from the launch's CUDA API row (at the runtime call's start) to its stream's
    row (at the kernel's start), matched by correlationId in SQL: here the first kernel each
    thread launched inside step 2."""
    from kitlib.plots.nsys_gui import plot_nsys_gui
    from kitlib.readers.nsys import load_nsys
    names, *_ = _sql()
    w0, w1 = _nvtx_steps()[2][:2]
    first = {}
    for corr, g, ls, ks, st in sql_rows(DB, "SELECT k.correlationId, r.globalTid, r.start, k.start, k.streamId "
                                            "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
                                            "ON r.correlationId = k.correlationId WHERE r.start >= ? AND r.start < ? "
                                            "ORDER BY r.start", w0, w1):
        first.setdefault(_tid(g), (corr, ls, ks, st))
    assert len(first) == 2                                        # python3 and pt_autograd_0
    fig = plot_nsys_gui(load_nsys(DB), w0, w1, flows=[c for c, *_ in first.values()])
    ax = fig.axes[0]
    rows = {t.get_text(): y for y, t in zip(ax.get_yticks(), ax.get_yticklabels())}
    arrows = {a.get_gid(): a for a in ax.texts if (a.get_gid() or "").startswith("flow|")}
    assert set(arrows) == {f"flow|{c}" for c, *_ in first.values()}
    for tid, (corr, ls, ks, st) in first.items():
        a = arrows[f"flow|{corr}"]
        assert a.xyann == pytest.approx(((ls - w0) / 1e6, rows[f"[{tid}] {names[tid]} · CUDA API"]))
        assert a.xy == pytest.approx(((ks - w0) / 1e6, rows[f"CUDA HW · Stream {st}"]))
    plt.close("all")
