"""Plots: matplotlib pictures of the analyses.

What belongs here: drawing only — every number a picture shows comes from an
analysis (``kitlib.analyses``) or a reader's table. This module holds the shared
helpers and the chain/step pictures; ``timeline`` (step timelines for a trace or an
Nsight report), ``grouping`` (device time by shape or call site), ``memory``
(memory over time), ``flops`` (FLOPs, rates beside peaks, Nsight Compute) and
``system`` (Nsight lanes) the rest. Each function returns its Figure or Axes.
May import: analyses, readers and the base modules; not capture or course.

Times are drawn in µs or ms, relative to a stated origin, and every axis says which.
"""
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

#: The one setting behind every kitlib picture's text and height: 1.0 on a laptop screen,
#: 1.4-2 on a projector. Set it with :func:`set_scale` or ``KITLIB_PLOT_SCALE``.
SCALE = 1.0
#: matplotlib's default text size (points) at scale 1; titles and labels follow it.
BASE_FONT_PT = 10.0


def set_scale(scale: float | None = None) -> float:
    """Scale the text and height of every kitlib picture drawn from now on.

    Font sizes (matplotlib's ``font.size``, which titles, axis labels and ticks follow,
    and every size kitlib sets itself) and figure heights are multiplied by ``scale``;
    widths stay as they are, because a notebook shrinks a picture wider than its cell,
    which would make its text small again. For a projector, ``set_scale(1.5)`` at the top
    of a lesson, or ``KITLIB_PLOT_SCALE=1.5`` in the environment before starting Jupyter.

    Parameters
    ----------
    scale : float, optional
        A positive factor; by default ``$KITLIB_PLOT_SCALE``, else 1.

    Returns
    -------
    float
        The scale now in force.

    Raises
    ------
    KitError
        ``scale`` (or the environment variable) is not a positive number.
    """
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


#: The widest a kitlib figure is drawn (inches; 820 px at matplotlib's 100 dpi, which the
#: inline backend keeps): JupyterLab at a laptop's 1280 x 800 with its file browser open
#: gives an output 848 px wide, and shrinks a wider picture (a 12 inch one to 0.71x, its 7 pt
#: lane labels to 7 px). At 1x the smallest text, 7 pt, is 9.7 px (tests/lessons/test_browser.py).
MAX_WIDTH_IN = 8.2


def fig_size(width_in: float, height_in: float) -> tuple[float, float]:
    """A figure size in inches at the current :data:`SCALE`: the width as given but at most
    :data:`MAX_WIDTH_IN` (so the notebook shows it at 1x), the height scaled."""
    return (min(width_in, MAX_WIDTH_IN), height_in * SCALE)


#: The PNG text chunk in which a notebook picture carries :func:`smallest_text_px` (written
#: by kitlib.course.labels' PNG formatter and the explorers; read by tests/support/browser.py).
SMALLEST_TEXT_KEY = "kitlib smallest text px"


def smallest_text_px(fig, dpi: float | None = None) -> float | None:
    """The font size of the smallest text ``fig`` draws, in pixels of a picture saved at
    ``dpi`` (default the figure's own, which the inline backend uses).

    Every visible, non-empty matplotlib Text counts (titles, tick and axis labels, legends,
    notes, labels on bars), found by walking the figure's artists after a layout pass
    (``draw_without_rendering``, so tick labels are the ones drawn). Shown at a scale s
    (displayed width / PNG width), the text is ``s`` times this tall on screen.

    Returns
    -------
    float or None
        Pixels (points x dpi / 72); None when the figure draws no text.
    """
    from matplotlib.axes import Axes
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


#: The widest picture a notebook shows at 1x (px): JupyterLab's output is 848 px wide at
#: 1280 x 800 with the file browser open; a little room kept.
MAX_PNG_PX = 840


def fit_width(fig, max_px: int = MAX_PNG_PX):
    """Narrow ``fig`` until its picture, cropped to what it draws (``bbox_inches="tight"``, as
    the inline backend and the explorers save it), is at most ``max_px`` wide at its dpi.

    Text drawn outside the axes (a note beside a bar, a legend beside the lanes, a long
    title) widens the cropped picture past the figure; at a projector's scale more so. The
    text keeps its size: a title (or x label) wider than the cell goes on more lines, and the
    axes get narrower (laid out again with ``tight_layout`` where the figure
    has no layout engine of its own), the figure's own texts (the source note under it)
    re-wrapped to the new width. Where narrowing does not help (a legend wider than the
    cell), the figure is left as drawn. Called on every picture a notebook
    shows (kitlib.course.labels) and on the explorers'.

    Returns
    -------
    matplotlib.figure.Figure
        ``fig``, narrowed where it had to be.
    """
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
    """``ax.legend(*args, ncol=ncol, **kw)``, with fewer columns where ``ncol`` of them would
    be wider than the figure; with ``below``, centred under the x axis's tick labels and
    label, whatever their height.

    A legend below the axes in several columns fits a laptop's figure; at a projector's
    scale (:func:`set_scale`) its text is larger, and a legend wider than the figure defeats
    the layout (``tight_layout`` gives up) and :func:`fit_width` (it cannot narrow a legend):
    the notebook then shows the picture shrunk. matplotlib lays a legend out once, when it
    is made, so it is made again with one column fewer until it fits (one column at least).
    A legend placed ``below`` keeps its distance from the axes in points, not as a share of
    the axes' height, so it clears the x label at any scale; :func:`fit_width` places it again
    when it wraps the label onto more lines.

    Returns
    -------
    matplotlib.legend.Legend
    """
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
    """Put ``ax``'s legend made by :func:`legend_within` with ``below`` just under its x
    axis's tick labels and label (as now drawn); any other legend is left alone."""
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
    """``ax`` itself, or the Axes of a new figure of ``size`` (inches, at scale 1) when ``ax`` is None."""
    if ax is None:
        _, ax = plt.subplots(figsize=fig_size(*size))
    return ax


#: One colour per kind of event in every kitlib picture (hex strings, by kind: ``op``, ``launch``,
#: ``kernel``, ``memcpy``, ``memset``, ``annotation``, ``step``); :mod:`kitlib.plots.timeline` takes its own from these.
COLORS = {"op": "#4C72B0", "launch": "#DD8452", "kernel": "#55A868", "memcpy": "#C44E52",
           "memset": "#8172B3", "annotation": "#937860", "step": "#BBBBBB"}


def short_name(name: str, width: int = 48) -> str:
    """A kernel or operator name cut to ``width`` characters (templates dropped first)."""
    if not isinstance(name, str):
        return str(name)
    s = name
    if s.startswith("void "):
        s = s[5:]
    depth, out = 0, []
    for ch in s:  # drop template arguments: kernel names are mostly templates
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
    """For sorted label positions ``xs``: the lowest level (0, 1, 2, …) at which each label is at
    least ``min_dx`` from the last label placed on that level (so that no two labels overlap)."""
    last, out = [], []
    for x in xs:
        level = next((i for i, lx in enumerate(last) if x - lx >= min_dx), len(last))
        if level == len(last):
            last.append(x)
        last[level] = x
        out.append(level)
    return out


def plot_chain(trace: Trace, op_row: int, ax=None, title: str | None = None):
    """The operator, its launches and the GPU events they produced, on one time axis.

    Three rows: the operator's host interval (CPU thread), each CUDA launch (CPU
    thread, inside the operator), each GPU event (its stream). Arrows: operator →
    launch (external id) and launch → GPU event (correlation id). The x axis is µs
    since the operator started.

    Parameters
    ----------
    trace : Trace
    op_row : int
        Row label of the operator in ``trace.ops`` (e.g. from :func:`kitlib.analyses.chain.first_op`).

    Returns
    -------
    matplotlib.figure.Figure
    """
    rows = launches_of(trace, op_row)
    op = trace.ops.loc[op_row]
    t0 = op["start_ns"]
    us = lambda ns: ns_to_us(np.asarray(ns, dtype="float64") - t0)  # noqa: E731
    if ax is None:
        fig, ax = plt.subplots(figsize=fig_size(11, 3.6))
    else:
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
    """One profiler step: its labelled phases (host) above the GPU events of each stream.

    Parameters
    ----------
    trace : Trace
    step : int
        The N of ``ProfilerStep#N``.
    labels : sequence of str
        The ``record_function`` labels to draw as host rows.
    chain_df : DataFrame, optional
        A :func:`kitlib.analyses.chain.chain` result to reuse. The GPU rows show the events
        *launched* during the step, which run on after its host interval ends.

    Returns
    -------
    matplotlib.figure.Figure
        x axis: ms since the step started.
    """
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
    if ax is None:
        fig, ax = plt.subplots(figsize=fig_size(11, 3.2))
    else:
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
    """Step wall times (ms) per series, one marker per step, with the median marked.

    Parameters
    ----------
    series : dict
        ``{label: [step time in ms, ...]}``, e.g. a bundle's ``step_times.json``
        (keys such as ``step_ms_uninstrumented`` are shown as "uninstrumented").

    Returns
    -------
    matplotlib.figure.Figure
        Log-scaled y axis in ms; a black bar per series marks its median.
    """
    if ax is None:
        fig, ax = plt.subplots(figsize=fig_size(8, 3.2))
    else:
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
    """``step_ms_profiled_all_attribution`` -> ``profiled, all attribution`` (for axis labels)."""
    s = key.removeprefix("step_ms_").replace("_", " ")
    return s.replace("profiled ", "profiled,\n").replace("fixed batch", "fixed batch\n(no loader)")


if is_set("KITLIB_PLOT_SCALE"):
    set_scale()   # an instructor's projector setting, read once when the plots are first imported
