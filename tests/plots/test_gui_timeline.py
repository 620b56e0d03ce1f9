"""kitlib.plots.gui_timeline tested on what it draws (issue 31): every rectangle read back
from the figure is one raw ``X`` event at its own ``ts`` and ``dur``, on its own track; every
arrow one ``s``/``f`` flow pair; the tracks carry the file's own thread names; the axis says
µs. The figures come from the raw JSON (conftest.raw_trace_events), not from kitlib."""
from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.text import Annotation  # noqa: E402

from conftest import raw_trace_events  # noqa: E402

REF = Path(__file__).resolve().parents[2] / "data" / "reference"


@pytest.fixture(scope="module")
def window():
    """Lesson 02's window: the first aten::cudnn_convolution of ProfilerStep#2 and 30 µs
    either side of its events, as the lesson draws it, and the raw events it comes from."""
    from kitlib.course import raw_views
    ev = raw_trace_events(REF / "profiler_5step" / "trace.json.gz")
    op = raw_views.first_op(ev, "aten::cudnn_convolution", after_ts=raw_views.steps_in(ev)[0]["ts"])
    mine = raw_views.op_excerpt(ev, op)
    end = max(e["ts"] + e["dur"] for e in mine)
    shown = raw_views.window(ev, op["ts"] - 30, end + 30)
    corr = {e["args"]["correlation"] for e in mine if "correlation" in e["args"]}
    return ev, op, mine, shown, corr, (-30, end - op["ts"] + 30)


@pytest.mark.parametrize("scale", [1.0, 1.5])
def test_every_slice_is_a_raw_event_at_its_ts_and_dur(window, scale):
    from kitlib import plots
    from kitlib.plots.gui_timeline import plot_gui_timeline
    ev, op, mine, shown, corr, view = window
    old = plots.SCALE
    plots.set_scale(scale)
    try:
        fig = plot_gui_timeline(shown, t0_us=op["ts"], selected=corr, view_us=view)
    finally:
        plots.set_scale(old)
    ax = fig.axes[0]
    rects = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_gid()]
    xs = [e for e in shown if e.get("ph") == "X"]
    assert len(rects) == len(xs)
    # the raw events inside the window, from the file without kitlib: same set of (cat|name, x, width)
    lo, hi = op["ts"] - 30, max(e["ts"] + e["dur"] for e in mine) + 30
    want = sorted((f"{e['cat']}|{e['name']}", round(e["ts"] - op["ts"], 3), e["dur"]) for e in ev
                  if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver",
                                                             "kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
                  and e["ts"] < hi and e["ts"] + e["dur"] > lo)
    got = sorted((r.get_gid(), round(r.get_x(), 3), round(r.get_width(), 3)) for r in rects)
    assert got == want
    # the operator's three kernels on the stream track, the convolution's own at 1,006.027 µs for 732.513 µs
    gpu_rows = {round(r.get_y(), 3) for r in rects if r.get_gid().startswith("kernel|")}
    assert len(gpu_rows) == 1
    conv = [r for r in rects if r.get_gid().startswith("kernel|sm80_xmma_fprop")]
    assert [(round(r.get_x(), 3), r.get_width()) for r in conv] == [(1006.027, 732.513)]
    # the stream track lies below every thread track (y grows downwards, as in Perfetto)
    cpu_y = [r.get_y() for r in rects if not r.get_gid().split("|")[0] in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert max(cpu_y) < min(gpu_rows) and ax.yaxis_inverted()
    # nesting: ProfilerStep#2 on top, forward below it, the operator deeper, its launches deeper still
    y = {r.get_gid(): r.get_y() for r in rects}
    assert y["user_annotation|ProfilerStep#2"] < y["user_annotation|forward"] < y["cpu_op|aten::cudnn_convolution"] \
        < y["cuda_runtime|cudaLaunchKernelExC"]
    plt.close(fig)


def test_arrows_are_the_flow_events_of_the_selected_launches(window):
    from kitlib.plots.gui_timeline import plot_gui_timeline
    ev, op, mine, shown, corr, view = window
    fig = plot_gui_timeline(shown, t0_us=op["ts"], selected=corr, view_us=view)
    ax = fig.axes[0]
    arrows = sorted((round(a.xyann[0], 3), round(a.xy[0], 3)) for a in ax.texts if isinstance(a, Annotation))
    flows = {}
    for e in ev:
        if e.get("cat") == "ac2g" and e.get("id") in corr:
            flows.setdefault(e["id"], {})[e["ph"]] = e
    want = sorted((round(f["s"]["ts"] - op["ts"], 3), round(f["f"]["ts"] - op["ts"], 3))
                  for f in flows.values() if "s" in f and "f" in f)
    # three launches, three arrows: from each launch's start to its kernel's start
    assert arrows == want and len(want) == 3
    assert want[-1] == (161.417, 1006.027)
    # each arrow ends at the top of its GPU event's own slice (the kernels' row, below the labels' GPU spans)
    kernel_y = {round(r.get_x(), 3): r.get_y() for r in ax.patches if isinstance(r, Rectangle)
                and str(r.get_gid()).startswith("kernel|")}
    assert all(abs(a.xy[1] - kernel_y[round(a.xy[0], 3)]) < 1e-9 for a in ax.texts if isinstance(a, Annotation))
    plt.close(fig)
    # without a selection every complete flow in the window is drawn
    fig = plot_gui_timeline(shown, t0_us=op["ts"], view_us=view)
    n = sum(isinstance(a, Annotation) for a in fig.axes[0].texts)
    starts = {e["id"] for e in shown if e.get("ph") == "s"}
    ends = {e["id"] for e in shown if e.get("ph") == "f" and e.get("pid") == 0}
    assert n == len(starts & ends) >= 3
    plt.close(fig)


def test_tracks_carry_the_files_thread_names_and_the_axis_says_us(window):
    from kitlib.plots.gui_timeline import plot_gui_timeline
    ev, op, mine, shown, corr, view = window
    fig = plot_gui_timeline(shown, t0_us=op["ts"], selected=corr, view_us=view)
    ax = fig.axes[0]
    names = {(e["pid"], e["tid"]): e["args"]["name"].strip() for e in ev
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    used = sorted({(e["pid"], e["tid"]) for e in shown if e.get("ph") == "X"}, key=lambda k: (k[0] == 0, k))
    assert [t.get_text() for t in ax.get_yticklabels()] == [names[k] for k in used] == \
        ["thread 449 (python3)", "stream 7"]
    texts = [t.get_text() for t in ax.texts if not isinstance(t, Annotation)]
    assert "python3 449 · CPU" in texts and "python3 0 · GPU 0" in texts
    assert "(µs)" in ax.get_xlabel() and f"{op['ts']:,.3f} µs" in ax.get_xlabel()
    lo, hi = ax.get_xlim()
    assert lo < view[0] < view[1] < hi and hi - lo < 1.05 * (view[1] - view[0])
    plt.close(fig)


def test_an_empty_list_is_refused():
    from kitlib.plots.gui_timeline import plot_gui_timeline
    with pytest.raises(ValueError, match="no complete events"):
        plot_gui_timeline([{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}])
