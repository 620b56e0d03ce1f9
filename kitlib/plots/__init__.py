"""Plots: matplotlib pictures of the analyses, and the helpers every picture shares.

Drawing only: every number comes from an analysis or a reader's table. Times are drawn in
µs or ms from a stated origin. Submodules: ``timeline``, ``grouping``, ``memory``,
``flops``, ``system``, ``queue``, ``ranks``, ``stragglers``, ``nsys_gui``,
``gui_timeline``, ``routes``. May import analyses, readers and the base modules."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyArrowPatch

from ..analyses.chain import chain, launches_of
from ..readers.trace import Trace
from ..errors import KitError
from ..settings import is_set
from ..settings import value as setting
from ..units import ns_to_ms, ns_to_us

#: Every picture's text and height factor (:func:`set_scale`): 1 on a laptop, 1.4-2 on a projector.
SCALE = 1.0
BASE_FONT_PT = 10.0


def set_scale(scale: float | None = None) -> float:
    """Scale the text and height of every kitlib picture drawn from now on (widths stay: a
    notebook shrinks a picture wider than its cell). ``scale``: a positive factor, default
    ``$KITLIB_PLOT_SCALE`` or 1 (1.5 for a projector). Returns the scale in force; raises
    :class:`KitError` for one that is not a positive number."""
    global SCALE
    if scale is None:
        scale = setting("KITLIB_PLOT_SCALE") or 1.0
    try:
        value = float(scale)
    except (TypeError, ValueError):
        value = float("nan")
    if not value > 0:
        raise KitError(f"the plot scale must be a positive number (KITLIB_PLOT_SCALE or set_scale), not {scale!r}")
    SCALE = value
    plt.rcParams["font.size"] = BASE_FONT_PT * SCALE
    return SCALE


#: The widest figure, inches (820 px at 100 dpi; Sources: docs/SOURCES.md#plot-width).
MAX_WIDTH_IN = 8.2


def fig_size(width_in: float, height_in: float) -> tuple[float, float]:
    """``(min(width_in, MAX_WIDTH_IN), height_in * SCALE)``."""
    return (min(width_in, MAX_WIDTH_IN), height_in * SCALE)


#: The PNG text chunk carrying :func:`smallest_text_px` (read by tests/support/browser.py).
SMALLEST_TEXT_KEY = "kitlib smallest text px"


def smallest_text_px(fig, dpi: float | None = None) -> float | None:
    """The size in pixels (at ``dpi``, default the figure's) of the smallest visible text ``fig``
    draws after a layout pass; ``None`` when it draws none."""
    from matplotlib.axis import Axis
    from matplotlib.text import Text
    fig.draw_without_rendering()
    sizes, todo = [], [fig]
    while todo:
        a = todo.pop()
        if not a.get_visible() or (isinstance(a, Axis) and not a.axes.axison):
            continue
        if isinstance(a, Text) and a.get_text().strip():
            sizes.append(a.get_fontsize())
        todo.extend(a.get_children())
    return min(sizes) * (dpi or fig.dpi) / 72 if sizes else None


#: The widest picture a notebook shows at 1x (px).
MAX_PNG_PX = 840


def fit_width(fig, max_px: int = MAX_PNG_PX):
    """Narrow ``fig`` until its tight-cropped picture is at most ``max_px`` wide: titles, x
    labels and the figure's notes are re-wrapped, the axes laid out again; where narrowing
    does not help (a legend wider than the cell) it is left as drawn. Returns ``fig``.

    Sources: docs/SOURCES.md#plot-width"""
    import textwrap
    import warnings
    from matplotlib.layout_engine import PlaceHolderLayoutEngine

    def rewrap(t, room_px):        # text on more lines, each at most room_px wide
        text, width_px = t.get_text(), t.get_window_extent().width
        if not text or width_px <= room_px:
            return False
        words = " ".join(text.split())
        chars = max(20, int(max(len(ln) for ln in text.splitlines()) * room_px / width_px * 0.95))
        t.set_text(textwrap.fill(words, chars) if t in fig.texts else
                   "\n".join(textwrap.fill(ln, chars) for ln in text.splitlines()))
        return True

    titles = [t for ax in fig.axes for t in (ax.title, ax._left_title, ax._right_title, ax.xaxis.label)]
    titles += [fig._suptitle] if fig._suptitle is not None else []

    def resize(width_in):
        fig.set_figwidth(width_in)
        fig.draw_without_rendering()
        for t in titles + fig.texts:      # titles and notes no wider than the new figure
            rewrap(t, width_in * fig.dpi * 0.98)
        # laid out once (fig.tight_layout() leaves a place-holder engine) or never: lay out again;
        # a figure with a layout engine of its own (constrained) lays itself out when drawn
        relayout = fig.get_layout_engine() is None or isinstance(fig.get_layout_engine(), PlaceHolderLayoutEngine)
        for _ in range(2 if relayout else 1):
            if relayout:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")    # "not compatible with tight_layout": as drawn
                    fig.tight_layout()
            for ax in fig.axes:                        # legends under an x label now wrapped
                place_below_xaxis(ax)
    pad_in = plt.rcParams["savefig.pad_inches"]   # the margin a "tight" save adds on each side
    room_px = max_px - 2 * pad_in * fig.dpi
    fig.draw_without_rendering()
    changed = any([rewrap(t, room_px) for t in titles])
    if changed:
        resize(fig.get_figwidth())
    first = fig.get_figwidth()
    for _ in range(4):
        width_in = fig.get_tightbbox().width + 2 * pad_in
        excess = width_in - max_px / fig.dpi
        if excess <= 0:
            break
        target = fig.get_figwidth() - excess - 0.05
        if target < first / 2:        # the plot would be squeezed to less than half: as drawn
            resize(first)
            break
        resize(target)
        if fig.get_tightbbox().width + 2 * pad_in > width_in - excess / 2:
            # text of a fixed width wider than the cell: narrowing would only squeeze the
            # plot; left as drawn (the notebook shows it shrunk)
            resize(first)
            break
    return fig


def png_metadata(fig) -> dict:
    """``savefig(..., metadata=...)`` for a PNG of ``fig``: :data:`SMALLEST_TEXT_KEY`."""
    px = smallest_text_px(fig)
    return {} if px is None else {SMALLEST_TEXT_KEY: f"{px:.2f}"}


def font(points: float) -> float:
    """A font size in points at the current :data:`SCALE`."""
    return points * SCALE


def legend_within(ax, *args, ncol: int = 2, below: bool = False, **kw):
    """``ax.legend(*args, ncol=ncol, **kw)`` with fewer columns while it is wider than the
    figure; with ``below``, centred under the x axis's labels at a fixed distance in points
    (:func:`place_below_xaxis`). Returns the legend."""
    fig = ax.figure
    room = fig.get_figwidth() * fig.dpi * 0.98
    if below:
        kw.update(loc="upper center", bbox_to_anchor=(0.5, 0), bbox_transform=ax.transAxes)
    for n in range(max(int(ncol), 1), 0, -1):
        legend = ax.legend(*args, ncol=n, **kw)
        if n == 1 or legend.get_window_extent().width <= room:
            break
        legend.remove()
    if below:
        legend._kitlib_below = True
        place_below_xaxis(ax)
    return legend


def place_below_xaxis(ax) -> None:
    """Put a ``below`` legend of :func:`legend_within` just under ``ax``'s x tick labels and label."""
    from matplotlib.transforms import ScaledTranslation
    legend = ax.get_legend()
    if legend is None or not getattr(legend, "_kitlib_below", False):
        return
    fig = ax.figure
    fig.draw_without_rendering()
    axis = ax.xaxis.get_tightbbox()
    gap_in = (ax.get_window_extent().y0 - (axis.y0 if axis is not None else ax.get_window_extent().y0)) / fig.dpi
    gap_in += 4 / 72                    # 4 points of air
    legend.set_bbox_to_anchor((0.5, 0), transform=ax.transAxes + ScaledTranslation(0, -gap_in, fig.dpi_scale_trans))


def new_axes(ax=None, size=(10, 3.6)):
    """``ax``, or the Axes of a new figure of ``size`` (inches at scale 1)."""
    if ax is None:
        _, ax = plt.subplots(figsize=fig_size(*size))
    return ax


#: One colour per kind of event in every kitlib picture.
COLORS = {"op": "#4C72B0", "launch": "#DD8452", "kernel": "#55A868", "memcpy": "#C44E52",
           "memset": "#8172B3", "annotation": "#937860", "step": "#BBBBBB"}


def short_name(name: str, width: int = 48) -> str:
    """A kernel or operator name without template arguments, cut to ``width`` characters."""
    if not isinstance(name, str):
        return str(name)
    s = name
    if s.startswith("void "):
        s = s[5:]
    depth, out = 0, []
    for ch in s:
        if ch == "<":
            depth += 1
            if depth == 1:
                out.append("<…>")
            continue
        if ch == ">":
            depth = max(0, depth - 1)
            continue
        if depth == 0:
            out.append(ch)
    s = "".join(out)
    s = s.split("(")[0] if "(" in s and not s.startswith("(") else s
    return s if len(s) <= width else s[: width - 1] + "…"


def _label_levels(xs, min_dx: float) -> list:
    """For sorted positions ``xs``, the lowest level on which each label is ``min_dx`` clear of
    the last one there."""
    last, out = [], []
    for x in xs:
        level = next((i for i, lx in enumerate(last) if x - lx >= min_dx), len(last))
        if level == len(last):
            last.append(x)
        last[level] = x
        out.append(level)
    return out


def plot_chain(trace: Trace, op_row: int, ax=None, title: str | None = None):
    """An operator (``op_row`` of ``trace.ops``), its CUDA launches and the GPU events they
    produced, on three rows, with arrows operator → launch (external id) → GPU event
    (correlation id). Returns the Figure; x: µs since the operator started."""
    rows = launches_of(trace, op_row)
    op = trace.ops.loc[op_row]
    t0 = op["start_ns"]
    us = lambda ns: ns_to_us(np.asarray(ns, dtype="float64") - t0)  # noqa: E731
    ax = new_axes(ax, (11, 3.6))
    fig = ax.figure
    y_op, y_l, y_g = 2.6, 1, 0      # room above the launches for stacked labels
    h = 0.5
    ax.broken_barh([(0, ns_to_us(op["dur_ns"]))], (y_op - h / 2, h), color=COLORS["op"])
    ax.text(0, y_op + h / 2 + 0.05, f"{op['name']}  {ns_to_us(op['dur_ns']):,.3f} µs (host)", fontsize=font(9), va="bottom")
    ends = [ns_to_us(op["dur_ns"])]
    for _, r in rows.iterrows():
        ls, ld = us(r["launch_start_ns"]), ns_to_us(r["launch_dur_ns"])
        gs, gd = us(r["gpu_start_ns"]), ns_to_us(r["gpu_dur_ns"])
        ends.append(gs + gd)
        ax.broken_barh([(ls, ld)], (y_l - h / 2, h), color=COLORS["launch"])
        ax.broken_barh([(gs, gd)], (y_g - h / 2, h), color=COLORS.get(r["gpu_kind"], COLORS["kernel"]),
                       edgecolor="black", linewidth=0.3)
        ax.add_patch(FancyArrowPatch((ls, y_op - h / 2), (ls, y_l + h / 2), arrowstyle="-|>", mutation_scale=9,
                                     color="gray"))
        ax.add_patch(FancyArrowPatch((ls + ld / 2, y_l - h / 2), (gs, y_g + h / 2), arrowstyle="-|>",
                                     mutation_scale=9, color="black", linewidth=0.8))
    # numbers beside the bars, one level further out wherever a neighbour's number would overlap
    span_us = max(ends) * 1.07 or 1.0
    min_dx = span_us * 24 * SCALE / (0.75 * 11 * 72)     # ~24 pt of an ~11 inch wide axis, in µs
    for col, y, sign, va in (("launch", y_l + h / 2, 1, "bottom"), ("gpu", y_g - h / 2, -1, "top")):
        xs = [(us(r[f"{col}_start_ns"]) + ns_to_us(r[f"{col}_dur_ns"]) / 2, r["launch_index"]) for _, r in rows.iterrows()]
        for (x, index), level in zip(sorted(xs), _label_levels(sorted(x for x, _ in xs), min_dx)):
            # a level is 0.27 y units (~14 px at 100 dpi, at any scale: font and height grow together), a
            # label's height with its box; at 0.2 two stacked boxes overlapped (tests/course/test_widgets.py)
            ax.text(x, y + sign * (0.03 + 0.27 * level), f"#{index}", fontsize=font(8), ha="center", va=va,
                    bbox=dict(boxstyle="round,pad=0.1", facecolor="white", edgecolor="none", alpha=0.8))
    legend = "\n".join(f"#{r['launch_index']}  {r['launch_name']} {ns_to_us(r['launch_dur_ns']):,.3f} µs (host)  →  "
                       f"{short_name(r['gpu_name'], 38)} {ns_to_us(r['gpu_dur_ns']):,.3f} µs (device)"
                       for _, r in rows.iterrows())
    ax.text(0.99, 0.03, legend, transform=ax.transAxes, fontsize=font(7.5), ha="right", va="bottom", family="monospace", multialignment="left",
            bbox=dict(boxstyle="round", facecolor="white", alpha=0.9, edgecolor="0.8"))
    ax.set_yticks([y_g, y_l, y_op])
    ax.set_yticklabels([f"GPU (stream {rows['stream'].iloc[0] if len(rows) else '?'})",
                        "CUDA launches (CPU thread)", "operator (CPU thread)"])
    ax.set_ylim(-1.9, 3.3)
    ax.set_xlim(-0.02 * max(ends), max(ends) * 1.05)
    ax.set_xlabel("time since the operator started (µs)")
    ax.set_title(title or "operator → launch (external id) → GPU event (correlation id)")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def plot_step_timeline(trace: Trace, step: int, ax=None, labels=("data_load", "h2d", "forward", "backward", "optimizer"),
                       chain_df=None):
    """``ProfilerStep#step``: its ``labels`` (host rows) above the GPU events launched during it,
    per stream (``chain_df``: a :func:`kitlib.analyses.chain.chain` result to reuse). Returns
    the Figure; x: ms since the step started. Raises ``KeyError`` for a missing step."""
    steps = trace.steps
    s = steps[steps["step"] == step]
    if s.empty:
        raise KeyError(f"no ProfilerStep#{step} in this trace (steps: {steps['step'].tolist()})")
    s = s.iloc[0]
    t0, t1 = s["start_ns"], s["end_ns"]
    ms = lambda ns: ns_to_ms(np.asarray(ns, dtype="float64") - t0)  # noqa: E731
    ann = trace.ops[(trace.ops["kind"] == "annotation") & trace.ops["name"].isin(labels)
                    & (trace.ops["start_ns"] >= t0) & (trace.ops["start_ns"] <= t1)]
    c = chain(trace) if chain_df is None else chain_df
    mine = c[(c["launch_start_ns"] >= t0) & (c["launch_start_ns"] <= t1)]
    g = trace.gpu.loc[mine["gpu_row"].to_numpy()]
    ax = new_axes(ax, (11, 3.2))
    fig = ax.figure
    yt, yl = [], []
    y = 0
    for stream, grp in sorted(g.groupby("stream"), key=lambda kv: kv[0]):
        for kind, kg in grp.groupby("kind"):
            ax.broken_barh(list(zip(ms(kg["start_ns"]), ns_to_ms(kg["dur_ns"]))), (y - 0.35, 0.7),
                           color=COLORS.get(kind, "gray"), label=kind)
        yt.append(y)
        yl.append(f"GPU stream {stream}")
        y += 1
    ax.broken_barh([(0, ns_to_ms(t1 - t0))], (y - 0.35, 0.7), color=COLORS["step"])
    ax.text(0, y, f"ProfilerStep#{step}", va="center", fontsize=font(8))
    yt.append(y)
    yl.append("step (host)")
    y += 1
    for lab in labels:
        a = ann[ann["name"] == lab]
        if a.empty:
            continue
        ax.broken_barh(list(zip(ms(a["start_ns"]), ns_to_ms(a["dur_ns"]))), (y - 0.35, 0.7), color=COLORS["annotation"])
        yt.append(y)
        yl.append(f"{lab} (host)")
        y += 1
    ax.set_yticks(yt)
    ax.set_yticklabels(yl)
    ax.set_xlabel(f"time since ProfilerStep#{step} started (ms)")
    handles, names = ax.get_legend_handles_labels()
    uniq = dict(zip(names, handles))
    if uniq:
        ax.legend(uniq.values(), uniq.keys(), loc="upper right", fontsize=font(8))
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def plot_step_times(series: dict, ax=None, title="wall time of each step"):
    """Step wall times per series (``{label: [ms, ...]}``), a marker per step and a black median
    bar. Returns the Figure; y: ms, log scale."""
    ax = new_axes(ax, (8, 3.2))
    fig = ax.figure
    for i, (lab, vals) in enumerate(series.items()):
        v = np.asarray(vals, dtype=float)
        ax.plot(np.full(len(v), i) + np.linspace(-0.15, 0.15, len(v)), v, "o", alpha=0.7)
        ax.hlines(np.median(v), i - 0.3, i + 0.3, color="black", label="median" if i == 0 else None)
    ax.set_xticks(range(len(series)))
    ax.set_xticklabels([_series_label(k) for k in series], fontsize=font(8))
    ax.set_ylabel("step wall time (ms, log scale)")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda y, _: f"{y:,.0f}"))
    ax.yaxis.set_minor_formatter(plt.FuncFormatter(lambda y, _: f"{y:,.0f}" if str(int(y))[0] in "25" else ""))
    ax.legend(loc="upper right", fontsize=font(8))
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def _series_label(key: str) -> str:
    s = key.removeprefix("step_ms_").replace("_", " ")
    return s.replace("profiled ", "profiled,\n").replace("fixed batch", "fixed batch\n(no loader)")


if is_set("KITLIB_PLOT_SCALE"):
    set_scale()   # an instructor's projector setting, read once when the plots are first imported
