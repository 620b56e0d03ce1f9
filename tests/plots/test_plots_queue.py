"""kitlib.plots.queue.plot_queue_timeline (lesson 09, "Is the GPU waiting for the CPU?"),
checked on what it draws: the queue line and the empty-queue shading are read back from the
figure and compared with the launch queue worked out here from the Nsight Systems export's
own tables (plain SQL, no kitlib): +1 when a CUDA call that launched GPU work began, -1
when that work ended, per stream; the device's queue is all streams together."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from conftest import REF, sql_rows  # noqa: E402

from kitlib import plots  # noqa: E402
from kitlib.plots.queue import EMPTY_COLOR, plot_queue_timeline  # noqa: E402

DB = REF / "nsys_8step" / "report.sqlite"


def _raw_queue():
    """(time, change, stream) for every GPU operation with its launch, from the SQLite tables."""
    launch = dict((c, s) for s, c in sql_rows(DB, "SELECT start, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME"))
    changes = []
    for t in ("KERNEL", "MEMCPY", "MEMSET"):
        for end, stream, corr in sql_rows(DB, f"SELECT end, streamId, correlationId FROM CUPTI_ACTIVITY_KIND_{t}"):
            if corr in launch:
                changes += [(launch[corr], 1, stream), (end, -1, stream)]
    return sorted(changes)


def _series(changes, a, b, stream=None):
    """The queue's value at a and after each change inside (a, b), as (time, value) pairs."""
    v, out = 0, []
    for t, d, s in changes:
        if stream is not None and s != stream:
            continue
        if t > a and (not out):
            out.append((a, v))
        if t >= b:
            break
        v += d
        if t > a:
            if out and out[-1][0] == t:
                out[-1] = (t, v)
            else:
                out.append((t, v))
    return out or [(a, v)]


@pytest.mark.parametrize("scale", [1.0, 1.5])
@pytest.mark.parametrize("step", [1, 6])
def test_queue_under_the_timeline(nsys_8step_report, step, scale):
    plots.set_scale(scale)
    try:
        fig = plot_queue_timeline(nsys_8step_report, step)
    finally:
        plots.set_scale(1.0)
    steps = sql_rows(DB, "SELECT start, end FROM NVTX_EVENTS WHERE text = 'torch_step' ORDER BY start")
    a, b = steps[step]
    top, bottom = fig.axes[:2]
    assert "GPU stream 7 · kernels" in [t.get_text() for t in top.get_yticklabels()]
    assert bottom.get_xlabel() == f"time since step {step} started (ms)"
    changes = _raw_queue()
    # one line, stream 7: the other two streams queue nothing in these steps
    lines = [ln for ln in bottom.get_lines() if ln.get_label().startswith("stream")]
    assert [ln.get_label() for ln in lines] == ["stream 7"]
    x, y = lines[0].get_xdata(), lines[0].get_ydata()
    expect = _series(changes, a, b, stream=7)
    # drawn: the value at the step's start, each change inside, and the last value again at the end
    assert list(y[:-1]) == [v for _, v in expect] and y[-1] == expect[-1][1]
    assert list(x[:-1]) == pytest.approx([(t - a) / 1e6 for t, _ in expect], abs=1e-9)
    assert x[-1] == pytest.approx((b - a) / 1e6)
    # the shading: every span where the device's queue (all streams) stood at 0
    whole = _series(changes, a, b)
    empty_ms = sum((t1 - t0) / 1e6 for (t0, v), (t1, _) in zip(whole, whole[1:] + [(b, None)]) if v == 0)
    spans = [p for p in bottom.patches if p.get_facecolor()[:3] == pytest.approx(matplotlib.colors.to_rgb(EMPTY_COLOR))]
    drawn = sum(p.get_bbox().width for p in spans)
    assert drawn == pytest.approx(empty_ms, abs=1e-6)
    title = fig._suptitle.get_text()
    verdict = {1: "mixed", 6: "GPU-bound"}[step]
    assert title.startswith(f"step {step}: {verdict}\nqueue empty {100 * empty_ms * 1e6 / (b - a):.1f} % of the step")
    assert (step == 6) == (not spans)                      # step 6: never empty, nothing shaded
    if spans:
        assert [t.get_text() for t in bottom.get_legend().get_texts()][-1] == "queue empty: the GPU waits for the host"
    assert fig._suptitle.get_fontsize() == pytest.approx(10 * scale)
    plt.close(fig)


def test_no_such_step(nsys_8step_report):
    from kitlib.errors import KitError
    with pytest.raises(KitError, match="no step 99"):
        plot_queue_timeline(nsys_8step_report, 99)


def test_text_is_at_least_9_px_and_follows_the_scale(nsys_8step_report):
    """As every kitlib picture (tests/plots/test_plots_drawn.py): no text under 9 px at scale 1, and
    each text grows with the projector scale."""
    def sizes(scale):
        plots.set_scale(scale)
        try:
            fig = plot_queue_timeline(nsys_8step_report, 1)
            fig.canvas.draw()
            out = {}
            for t in fig.findobj(matplotlib.text.Text):
                if t.get_visible() and t.get_text().strip():
                    out.setdefault(t.get_text()[:40], []).append(t.get_fontsize() * fig.dpi / 72)
            plt.close(fig)
            return out
        finally:
            plots.set_scale(1.0)
    one, big = sizes(1.0), sizes(1.5)
    assert min(px for v in one.values() for px in v) >= 9
    common = [t for t in set(one) & set(big) if len(one[t]) == len(big[t])]
    assert len(common) >= 0.6 * len(one)
    for t in common:
        assert sorted(big[t]) == pytest.approx([1.5 * x for x in sorted(one[t])]), t
