"""Is the GPU waiting for the CPU? One step's timeline with each stream's launch queue drawn
under it (lesson 09). Drawing only: the numbers come from :mod:`kitlib.analyses.gpu_idle`."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..analyses.gpu_idle import device_events, queue_length, step_verdicts
from ..analyses.steps import steps_of
from ..errors import KitError
from ..units import ns_to_ms
from . import fig_size, font

__all__ = ["plot_queue_timeline", "EMPTY_COLOR"]

#: The shade of the times when nothing was launched and unfinished on the device.
EMPTY_COLOR = "#E15759"


def plot_queue_timeline(source, step: int, osrt_threads=(), title: str | None = None):
    """One step of a Trace or NsysReport: the lanes of :func:`kitlib.plots.timeline.plot_timeline`
    on top (``osrt_threads``: threads given an OS-runtime lane) and, below on the same axis,
    each stream's launch queue (:func:`kitlib.analyses.gpu_idle.queue_length`) with the times
    the device's queue stood empty shaded; the title gives the step's verdict and evidence
    (:func:`kitlib.analyses.gpu_idle.step_verdicts`).

    Returns the Figure: ``axes[0]`` the timeline; ``axes[1]`` a ``where="post"`` step line per
    stream that queued anything (``label`` "stream S", x ms since the step started) and the
    empty spans (``label`` "queue empty: the GPU waits for the host"). Raises :class:`KitError`
    for a missing step, or as the analyses."""
    from .timeline import plot_timeline
    st = steps_of(source)
    hit = st[st["step"] == step]
    if hit.empty:
        raise KitError(f"{getattr(source, 'path', '')}: no step {step} (steps: {st['step'].tolist()})")
    a, b = int(hit["start_ns"].iloc[0]), int(hit["end_ns"].iloc[0])
    verdict = step_verdicts(source)
    v = verdict[verdict["step"] == step].iloc[0]
    ev = device_events(source)
    q = queue_length(source, events=ev)
    whole = queue_length(source, events=ev.assign(stream=0))     # the device's queue: all streams
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=fig_size(12, 6.4),
                                      gridspec_kw={"height_ratios": [3, 1.6]})
    plot_timeline(source, a, b, origin_ns=a, osrt_threads=osrt_threads, ax=top, label_ranges=True)
    top.set_xlabel("")
    for s, g in q.groupby("stream", sort=True):
        t, n = g["time_ns"].to_numpy(), g["queue_length"].to_numpy()
        i = np.searchsorted(t, a, "right") - 1
        at_a = n[i] if i >= 0 else 0
        inside = (t > a) & (t < b)
        if at_a == 0 and not (n[inside] != 0).any():
            continue                       # nothing queued on this stream during the step
        x = ns_to_ms(np.r_[a, t[inside], b] - a)
        y = np.r_[at_a, n[inside], n[inside][-1] if inside.any() else at_a]
        bottom.step(x, y, where="post", linewidth=1.0, label=f"stream {s}")
    # the device's queue empty: shaded spans
    t, n = whole["time_ns"].to_numpy(), whole["queue_length"].to_numpy()
    bounds = np.r_[a, t[(t > a) & (t < b)], b]
    first = True
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        i = np.searchsorted(t, lo, "right") - 1
        if (n[i] if i >= 0 else 0) == 0 and hi > lo:
            bottom.axvspan(ns_to_ms(lo - a), ns_to_ms(hi - a), color=EMPTY_COLOR, alpha=0.3, linewidth=0,
                           label="queue empty: the GPU waits for the host" if first else None)
            first = False
    bottom.set_ylabel("launched, unfinished\n(count)", fontsize=font(9))
    bottom.set_xlabel(f"time since step {step} started (ms)")
    bottom.set_xlim(0, ns_to_ms(b - a))
    bottom.set_ylim(bottom=0)
    bottom.grid(axis="both", alpha=0.3)
    bottom.legend(loc="upper left", fontsize=font(8))
    fig.suptitle(title if title is not None else f"step {step}: {v['verdict']}\n{v['evidence']}", fontsize=font(10))
    fig.tight_layout()
    return fig
