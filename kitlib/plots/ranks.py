"""Ranks as rows on one time axis: steps, collectives (waiting and transfer) and an
injected delay, so the straggler and the ranks waiting for it can be seen.

Every number drawn comes from :mod:`kitlib.analyses.collectives`; times are ms
since the earliest step start of any rank, on the traces' own clocks (one host:
one clock; several hosts: not aligned, see that module).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from ..analyses.collectives import collective_waits, collectives, rank_step_times
from ..readers.ranks import RankTraces
from . import fig_size

#: Colours of the picture's parts.
COLOURS = {"step": "#d9d9d9", "wait": "#d62728", "transfer": "#1f77b4", "delay": "#ff7f0e"}


def plot_rank_timeline(traces: RankTraces, steps=None, ax=None, title: str | None = None,
                       delay_label: str = "straggler_delay"):
    """One row per rank: its steps (grey), each collective split into waiting for
    the last rank (red) and transfer (blue), and ``straggler_delay`` ranges
    (orange) where the workload injected a delay.

    Parameters
    ----------
    traces : RankTraces
    steps : iterable of int, optional
        The ``ProfilerStep`` numbers to draw (default: all).
    ax : matplotlib Axes, optional
    title : str, optional
    delay_label : str
        The host range drawn as the injected delay.

    Returns
    -------
    matplotlib.axes.Axes
        x: ms since the earliest drawn step start; y: one row per rank.

    Raises
    ------
    KitError
        As :func:`kitlib.analyses.collectives.collectives` and
        :func:`~kitlib.analyses.collectives.rank_step_times`.
    """
    st = rank_step_times(traces)
    if steps is not None:
        st = st[st["step"].isin(list(steps))]
    calls = collectives(traces)
    w = collective_waits(traces, calls)
    w = w[w["step"].isin(set(st["step"]))]
    origin = int(st["start_ns"].min())
    end = int((st["start_ns"] + st["dur_ns"]).max())
    ranks = traces.ranks
    if ax is None:
        _, ax = plt.subplots(figsize=fig_size(12, 0.7 * len(ranks) + 1.6))
    y = {r: len(ranks) - 1 - i for i, r in enumerate(ranks)}
    ms = lambda ns: (ns - origin) / 1e6   # noqa: E731
    for s in st.itertuples():
        ax.broken_barh([(ms(s.start_ns), s.dur_ns / 1e6)], (y[s.rank] - 0.42, 0.84), facecolors=COLOURS["step"],
                       edgecolors="white")
        ax.text(ms(s.start_ns) + s.dur_ns / 2e6, y[s.rank] + 0.3, f"step {s.step}", ha="center", va="center",
                fontsize="small", color="#555555")
    for r, t in traces.traces.items():
        d = t.ops[t.ops["name"] == delay_label]
        base = int(t.meta.get("base_time_ns") or 0)
        d = d[(d["start_ns"] + base >= origin) & (d["start_ns"] + base <= end)]
        if len(d):
            ax.broken_barh([(ms(a + base), b / 1e6) for a, b in zip(d["start_ns"], d["dur_ns"])],
                           (y[r] - 0.3, 0.35), facecolors=COLOURS["delay"])
    for c in w.itertuples():
        ax.broken_barh([(ms(c.start_ns), c.wait_ns / 1e6)], (y[c.rank] - 0.3, 0.35), facecolors=COLOURS["wait"])
        ax.broken_barh([(ms(c.start_ns + c.wait_ns), c.transfer_ns / 1e6)], (y[c.rank] - 0.3, 0.35),
                       facecolors=COLOURS["transfer"])
    ax.set_yticks([y[r] for r in ranks], [f"rank {r}" for r in ranks])
    ax.set_ylim(-0.6, len(ranks) - 0.4)
    ax.set_xlim(0, (end - origin) / 1e6)
    hosts = traces.info["host"]
    clock = ("hosts unknown: clocks compared as written" if hosts.isna().any() else
             "one host, one clock" if hosts.nunique() == 1 else "several hosts: clocks not aligned")
    ax.set_xlabel(f"time since the first step's start (ms; {clock})")
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLOURS[k]) for k in ("step", "wait", "transfer", "delay")]
    ax.legend(handles, ["step (host)", "collective: waiting for the last rank (estimate)",
                        "collective: transfer (estimate)", "injected delay"],
              loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=4, fontsize="small", frameon=False)
    on = set(w["measured_on"]) or {"?"}
    ax.set_title(title or f"{len(ranks)} ranks, {traces.backend}: collectives measured on {', '.join(sorted(on))}")
    ax.figure.tight_layout()
    return ax


__all__ = ["plot_rank_timeline", "COLOURS"]
