"""Timeline pictures of the first steps, and the four measures of one step as bars.

Sources: docs/SOURCES.md#timeline-module

``source`` is a Trace or NsysReport; ``start_ns``, ``end_ns`` the window on its clock (events
are cut to it); ``osrt_threads`` the thread ids whose OS-runtime calls get a lane (NsysReport)."""
from __future__ import annotations

from matplotlib.transforms import ScaledTranslation
import numpy as np
import pandas as pd

from ..analyses.intervals import clip
from ..analyses.steps import check_source, device_work, labelled_ranges, steps_of
from . import new_axes, COLORS as _KIT_COLORS, font
from ..units import ns_to_ms

__all__ = ["timeline_rows", "plot_timeline", "plot_four_measures"]

#: One colour per kind of event, as in every kitlib picture (``plots.COLORS``).
_COLORS = {"range": _KIT_COLORS["annotation"], "CUDA API": _KIT_COLORS["launch"], "memcpy": _KIT_COLORS["memcpy"],
           "kernel": _KIT_COLORS["kernel"], "memset": _KIT_COLORS["memset"], "OS runtime": "#64B5CD"}


def timeline_rows(source, start_ns: int, end_ns: int, osrt_threads=()) -> pd.DataFrame:
    """The events of a window, one lane per thread/stream and kind.

    Returns ``lane`` (e.g. ``"CUDA API · pt_data_pin (1258)"``), ``order`` (top to bottom:
    labels by level, CUDA API, OS runtime, GPU streams), ``kind`` (``range``, ``CUDA API``,
    ``OS runtime``, ``memcpy``, ``kernel``, ``memset``), ``name``, ``start_ns``, ``dur_ns``."""
    check_source(source)
    main = int(steps_of(source)["tid"].iloc[0])
    parts = []
    lab = labelled_ranges(source)
    lab = clip(lab[lab["tid"] == main], start_ns, end_ns)
    if len(lab):
        depth = [int(((lab["start_ns"] <= r.start_ns) & (lab["end_ns"] >= r.end_ns)).sum()) - 1
                 for r in lab.itertuples()]
        lab = lab.assign(depth=depth)
        for d, g in lab.groupby("depth"):
            parts.append(g.assign(lane=f"labels, level {d} (host)", order=d, kind="range"))
    osrt = source.os_runtime_calls()     # None: the recording has none (a torch.profiler trace)
    if osrt is not None:
        names = source.thread_names()
        tname = lambda p, t: names.get((p, t), "?")  # noqa: E731
        # OS-runtime lanes between the CUDA API lanes (10, 11) and the GPU's (100 +), in the order given
        for i, tid in enumerate(osrt_threads):
            o = clip(osrt[osrt["tid"] == tid][["name", "pid", "tid", "start_ns", "dur_ns"]], start_ns, end_ns)
            if len(o):
                p = int(o["pid"].iloc[0])
                parts.append(o.assign(lane=f"OS runtime · {tname(p, tid)} ({tid})", order=20 + i,
                                      kind="OS runtime"))
    else:
        tname = lambda p, t: "main" if t == main else "thread"  # noqa: E731
    api = source.launches
    a = clip(api[["name", "pid", "tid", "start_ns", "dur_ns"]].dropna(), start_ns, end_ns)
    for (p, t), g in a.groupby(["pid", "tid"]):
        parts.append(g.assign(lane=f"CUDA API · {tname(p, t)} ({t})", order=10 + (0 if t == main else 1),
                              kind="CUDA API"))
    w = clip(device_work(source), start_ns, end_ns)
    for (s, k), g in w.groupby(["stream", "kind"]):
        parts.append(g.assign(lane=f"GPU stream {s} · {k}s", order=100 + int(s) * 3
                              + {"memcpy": 0, "kernel": 1, "memset": 2}[k], kind=k))
    cols = ["lane", "order", "kind", "name", "start_ns", "dur_ns"]
    if not parts:
        return pd.DataFrame(columns=cols)
    return pd.concat([p[cols] for p in parts], ignore_index=True)


def plot_timeline(source, start_ns: int, end_ns: int, gaps: pd.DataFrame | None = None, origin_ns: int | None = None,
                  osrt_threads=(), ax=None, title: str | None = None, label_ranges: bool = True,
                  origin_label: str | None = None):
    """Draw :func:`timeline_rows` for a window, with ``gaps`` (``start_ns, dur_ns``) shaded.

    ``origin_ns`` is shown as 0 (default ``start_ns``); the x axis reads "time since
    <origin_label> (ms)", else "time since the window started (ms)" (no ``origin_ns``) or
    "time (ms)". ``label_ranges`` writes the ranges' names on their bars. Returns the figure."""
    rows = timeline_rows(source, start_ns, end_ns, osrt_threads)
    t0 = start_ns if origin_ns is None else origin_ns
    ax = new_axes(ax, (12, 0.45 * max(4, rows["lane"].nunique()) + 1.2))
    fig = ax.figure
    lanes = rows.drop_duplicates("lane").sort_values("order")["lane"].tolist()
    ypos = {ln: len(lanes) - 1 - i for i, ln in enumerate(lanes)}
    for ln, g in rows.groupby("lane"):
        y = ypos[ln]
        kind = g["kind"].iloc[0]
        bars = list(zip(ns_to_ms(g["start_ns"] - t0), np.maximum(ns_to_ms(g["dur_ns"]), ns_to_ms(end_ns - start_ns) / 2000)))
        ax.broken_barh(bars, (y - 0.35, 0.7), color=_COLORS.get(kind, "gray"), edgecolor="white", linewidth=0.3)
        if kind == "range" and label_ranges:
            for r in g.itertuples():
                if r.dur_ns > (end_ns - start_ns) / 40:
                    ax.text(ns_to_ms(r.start_ns - t0) + (r.dur_ns / 2e6), y, r.name, ha="center", va="center",
                            fontsize=font(7), color="white", clip_on=True)
    if gaps is not None:
        for i, gp in enumerate(gaps.itertuples()):
            ax.axvspan(ns_to_ms(gp.start_ns - t0), ns_to_ms(gp.start_ns + gp.dur_ns - t0), color="gold", alpha=0.25,
                       label="GPU idle" if i == 0 else None, zorder=0)
    ax.set_yticks(list(ypos.values()))
    ax.set_yticklabels(list(ypos.keys()), fontsize=font(8))
    ax.set_xlim(ns_to_ms(start_ns - t0), ns_to_ms(end_ns - t0))
    if origin_label is not None:
        ax.set_xlabel(f"time since {origin_label} (ms)")
    else:
        ax.set_xlabel("time since the window started (ms)" if origin_ns is None else "time (ms)")
    if gaps is not None and len(gaps):
        # under the x axis' label (about 3 lines of 10 pt): never over a bar (issue 40)
        below = ax.transAxes + ScaledTranslation(0, -font(10) * 3.0 / 72, fig.dpi_scale_trans)
        ax.legend(loc="upper right", bbox_to_anchor=(1.0, 0.0), bbox_transform=below, borderaxespad=0,
                  fontsize=font(8), frameon=False)
    ax.grid(axis="x", alpha=0.3)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def plot_four_measures(measures: pd.DataFrame, ax=None, title: str = "one step, measured four ways"):
    """Horizontal bars of :func:`kitlib.analyses.four_measures.four_measures` (ms, written beside
    each), coloured by clock (host / device). Returns the figure."""
    ax = new_axes(ax, (9, 3.2))
    fig = ax.figure
    m = measures.iloc[::-1]
    colors = ["#4C72B0" if c == "host" else "#55A868" for c in m["clock"]]
    ax.barh(m["measure"], ns_to_ms(m["value_ns"]), color=colors)
    for y, v in enumerate(ns_to_ms(m["value_ns"])):
        ax.text(v, y, f" {v:,.2f} ms", va="center", fontsize=font(8))
    ax.set_xlabel("time (ms)")
    ax.set_title(title)
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(color="#4C72B0", label="host clock"), Patch(color="#55A868", label="device clock")],
              loc="lower right", fontsize=font(8))
    ax.set_xlim(0, ns_to_ms(m["value_ns"].max()) * 1.25)
    fig.tight_layout()
    return fig
