"""Explorers: a table and a picture that follow a selection (ipywidgets).

:func:`chain_explorer` (lesson 02), :func:`timeline_explorer` (00, 04, 09),
:func:`grouping_explorer` (05–06), :func:`memory_explorer` (07): controls over the lessons'
analyses and pictures; a change draws both again. Displayed, an explorer carries its widget
and a static ``text/html`` copy of the view (table and PNG) for exports; outside a kernel the
view is only kept (:attr:`Explorer.table`, :attr:`Explorer.figure_png`).
"""
from __future__ import annotations

import base64
import html
import io

import ipywidgets as widgets
import numpy as np
import pandas as pd

from ..errors import KitError
from ..units import ns_to_ms, ns_to_us
from .widgets import in_kernel, readable

__all__ = ["Explorer", "chain_table", "chain_explorer", "timeline_explorer", "lane_table", "grouping_explorer",
           "memory_explorer"]

#: CSS class of every explorer (the browser test finds them by it).
EXPLORER_CLASS = "kitlib-explorer"


class Explorer(widgets.VBox):
    """A ``title``, ``controls`` (by name) above a table and a picture drawn by
    ``render(**values) -> (DataFrame, Figure or None)``; a KitError it raises shows in place
    of the table. ``max_width_em``: the widest a table column grows (:func:`~kitlib.course.widgets.readable`).

    Attributes: ``table`` (None after an error), ``figure_png`` (bytes or None), ``message``
    (the error, else ``""``), ``held_note`` (views waiting for a prediction, else ``""``).
    """

    def __init__(self, title: str, controls: dict, render, max_width_em: float = 8):
        self.title, self.controls, self._render = title, controls, render
        self.max_width_em = max_width_em
        self.table, self.figure_png, self.message = None, None, ""
        self.held_note = ""
        # spans the output, not what it held first; no side margin (2 px each side passed the cell)
        self.table_out = widgets.Output(layout=widgets.Layout(width="100%", margin="2px 0"))
        self.figure_out = widgets.Output()
        from .labels import sources_note
        self.note = sources_note()        # for redraws, which run outside any cell
        for w in controls.values():
            w.observe(lambda _change: self.refresh(), names="value")
        head = widgets.HTML(f"<b>{html.escape(title)}</b>")
        super().__init__([head, widgets.HBox(list(controls.values()), layout=widgets.Layout(flex_flow="row wrap")),
                          self.table_out, self.figure_out], layout=widgets.Layout(width="100%"))
        self.add_class(EXPLORER_CLASS)
        self.refresh()

    def values(self) -> dict:
        """The controls' values, by name."""
        return {k: w.value for k, w in self.controls.items()}

    def refresh(self):
        """Draw the table and the picture for the controls' current values."""
        from .labels import fixed_note
        with fixed_note(self.note):
            self._refresh()

    def _refresh(self):
        import matplotlib.pyplot as plt
        try:
            table, fig = self._render(**self.values())
            self.message = ""
        except KitError as e:
            table, fig, self.message = None, None, str(e)
        self.table = table
        self.figure_png = None
        if fig is not None:
            # one PNG, as the inline backend draws it, shown live and in the static view
            buf = io.BytesIO()
            from ..plots import fit_width, png_metadata
            fit_width(fig)
            fig.savefig(buf, format="png", bbox_inches="tight", metadata=png_metadata(fig))
            self.figure_png = buf.getvalue()
        if in_kernel():
            from IPython.display import HTML, Image, display
            with self.table_out:
                self.table_out.clear_output(wait=True)
                display(HTML(f"<p>{html.escape(self.message)}</p>") if table is None
                        else readable(table, max_width_em=self.max_width_em))
            with self.figure_out:
                self.figure_out.clear_output(wait=True)
                if self.figure_png is not None:
                    display(Image(data=self.figure_png, format="png"))
        if fig is not None:
            plt.close(fig)

    def static_html(self) -> str:
        """The view now shown as HTML: the title, the table and the picture (PNG inline)."""
        parts = [f"<p><b>{html.escape(self.title)}</b> ({html.escape(_describe(self.values()))})</p>"]
        if self.held_note:
            parts.append(f"<p><i>{html.escape(self.held_note)}</i></p>")
        parts.append(f"<p>{html.escape(self.message)}</p>" if self.table is None
                     else self.table.to_html(max_rows=30, border=0))
        if self.figure_png:
            parts.append(f'<img alt="{html.escape(self.title)}" style="max-width: 100%" '
                         f'src="data:image/png;base64,{base64.b64encode(self.figure_png).decode()}"/>')
        from .labels import fixed_note, note_html
        with fixed_note(self.note):
            parts.append(note_html())
        return f'<div class="{EXPLORER_CLASS}-static">' + "\n".join(parts) + "</div>"

    def _repr_mimebundle_(self, **kwargs):
        bundle = dict(super()._repr_mimebundle_(**kwargs) or {})
        bundle["text/html"] = self.static_html()
        bundle["text/plain"] = f"{self.title} ({_describe(self.values())})"
        return bundle


def _describe(values: dict) -> str:
    return ", ".join(f"{k}: {v}" for k, v in values.items())


def _dropdown(options, value, description, width="16em"):
    options = list(options)
    return widgets.Dropdown(options=options, value=value if value in options else options[0],
                            description=description, style={"description_width": "initial"},
                            layout=widgets.Layout(width=width))


# -- operator → launch → kernel ------------------------------------------------------------

def chain_table(trace, op_row: int, chain_df: pd.DataFrame | None = None) -> pd.DataFrame:
    """The launches of operator ``op_row`` (a ``trace.ops`` label) and their GPU events
    (:func:`kitlib.analyses.chain.launches_of`; ``chain_df`` a chain to reuse).

    Returns
    -------
    DataFrame indexed by ``launch`` (1, 2, …)
        ``api``, ``launch_at_us``, ``launch_us`` (host duration), ``correlation``,
        ``external_id``, ``kernel`` (shortened), ``gpu_at_us``, ``gpu_us``; times in µs since
        the operator started.
    """
    from ..analyses.chain import launches_of
    from ..plots import short_name
    rows = launches_of(trace, op_row, chain_df)
    t0 = int(trace.ops.loc[op_row, "start_ns"])
    us = lambda col: np.round(ns_to_us(rows[col].astype("float64") - t0), 3)  # noqa: E731
    out = pd.DataFrame({"launch": rows["launch_index"].to_numpy(), "api": rows["launch_name"].to_numpy(),
                        "launch_at_us": us("launch_start_ns"), "launch_us": np.round(ns_to_us(rows["launch_dur_ns"]), 3),
                        "correlation": rows["correlation"].to_numpy(), "external_id": rows["external_id"].to_numpy(),
                        "kernel": [short_name(n, 24) for n in rows["gpu_name"]],
                        "gpu_at_us": us("gpu_start_ns"), "gpu_us": np.round(ns_to_us(rows["gpu_dur_ns"]), 3)})
    return out.set_index("launch")


def chain_explorer(trace, name: str = "aten::cudnn_convolution", step: int | None = None, top: int = 25):
    """Explorer (controls ``step``, ``operator``) of an operator's first call in a step:
    :func:`chain_table` and :func:`kitlib.plots.plot_chain`. Opens on ``name`` and ``step``
    (default the first); offers ``name`` and the ``top`` operators by device time."""
    from ..analyses.chain import chain, first_op
    from ..plots import plot_chain
    c = chain(trace)
    names = c[c["op_name"].notna()].groupby("op_name")["gpu_dur_ns"].sum().sort_values(ascending=False)
    offered = list(dict.fromkeys([name] + [n for n in names.index[:top] if str(n).startswith("aten::")]))
    steps = [int(s) for s in trace.steps["step"]]
    controls = {"step": _dropdown(steps, steps[0] if step is None else int(step), "step", "9em"),
                "operator": _dropdown(offered, name, "operator", "24em")}

    def render(step, operator):
        row = first_op(trace, operator, step=step)
        return chain_table(trace, row, c), plot_chain(trace, row, title=f"{operator}, first call in step {step}")
    return Explorer("operator → launch → GPU event", controls, render)


# -- timeline ------------------------------------------------------------------------------

def lane_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per lane of :func:`kitlib.plots.timeline.timeline_rows` (index ``lane``, top to bottom):
    ``events``, ``busy_ms`` (durations summed), ``longest`` (name, shortened), ``longest_ms``."""
    from ..plots import short_name
    if rows.empty:
        return pd.DataFrame(columns=["events", "busy_ms", "longest", "longest_ms"]).rename_axis("lane")
    out = []
    for lane, g in rows.sort_values("order", kind="stable").groupby("lane", sort=False):
        i = g["dur_ns"].to_numpy().argmax()
        out.append({"lane": lane, "events": len(g), "busy_ms": round(float(ns_to_ms(g["dur_ns"].sum())), 3),
                    "longest": short_name(str(g["name"].iloc[i]), 32),
                    "longest_ms": round(float(ns_to_ms(g["dur_ns"].iloc[i])), 3)})
    return pd.DataFrame(out).set_index("lane")


def timeline_explorer(source, step: int | None = None, steps: int = 1, gaps: pd.DataFrame | None = None,
                      osrt_threads=(), title: str = "timeline"):
    """Explorer (controls ``step``, ``steps`` 1–3, ``window`` in % of their span) of a Trace's or
    NsysReport's lanes: :func:`lane_table` and :func:`kitlib.plots.timeline.plot_timeline` (ms
    since the first step shown), ``gaps`` (``start_ns, dur_ns``) shaded, ``osrt_threads`` given
    a lane each."""
    from ..analyses.steps import steps_of
    from ..plots.timeline import plot_timeline, timeline_rows
    st = steps_of(source).reset_index(drop=True)
    numbers = [int(s) for s in st["step"]]
    first = numbers[0] if step is None else int(step)
    controls = {"step": _dropdown(numbers, first, "step", "9em"),
                "steps": widgets.BoundedIntText(value=int(steps), min=1, max=3, description="steps shown",
                                                style={"description_width": "initial"},
                                                layout=widgets.Layout(width="10em")),
                "window": widgets.FloatRangeSlider(value=(0.0, 100.0), min=0.0, max=100.0, step=0.5,
                                                   description="window (% of the span)", readout_format=".1f",
                                                   style={"description_width": "initial"},
                                                   layout=widgets.Layout(width="32em"))}

    def render(step, steps, window):
        i = numbers.index(int(step))
        j = min(len(st) - 1, i + int(steps) - 1)
        t0, t1 = int(st["start_ns"].iloc[i]), int(st["end_ns"].iloc[j])
        lo, hi = sorted(window)
        if hi - lo < 0.5:
            raise KitError("the window is empty: widen it")
        w0, w1 = t0 + int((t1 - t0) * lo / 100), t0 + int((t1 - t0) * hi / 100)
        rows = timeline_rows(source, w0, w1, osrt_threads)
        shown = f"step {step}" if j == i else f"steps {step}–{numbers[j]}"
        fig = plot_timeline(source, w0, w1, gaps=gaps, origin_ns=t0, osrt_threads=osrt_threads,
                            origin_label=f"step {step} started",
                            title=f"{title}: {shown}, {ns_to_ms(w0 - t0):,.1f}–{ns_to_ms(w1 - t0):,.1f} ms")
        return lane_table(rows), fig
    return Explorer(title, controls, render)


# -- grouping ------------------------------------------------------------------------------

_SHAPE_COLS = {"tensors": "tensors", "count": "count", "device_total_ns": "device_total_us",
               "device_per_call_ns": "device_per_call_us", "device_share": "device_share"}
_SITE_COLS = {"ops": "ops", "gpu_events": "gpu_events", "device_self_ns": "device_self_us",
              "host_self_ns": "host_self_us"}


def _top(t: pd.DataFrame, label: str, cols: dict, sort_by: str, contains: str, top, empty: str):
    """``(rows, view)``: the ``top`` rows of ``t`` whose ``label`` holds ``contains``, by ``sort_by``
    (a name ``cols`` gives) descending, and their ``label`` and ``cols`` renamed, ns → µs (0.1).
    Raises KitError ``empty`` when none is left."""
    if contains.strip():
        t = t[t[label].astype(str).str.contains(contains.strip(), case=False, regex=False)]
    t = t.sort_values({v: k for k, v in cols.items()}[sort_by], ascending=False, kind="stable").head(int(top))
    if t.empty:
        raise KitError(empty)
    view = t[list(dict.fromkeys([label, *cols]))].rename(columns=cols)
    for c in [c for c in view.columns if c.endswith("_us")]:
        view[c] = np.round(ns_to_us(view[c].astype("float64")), 1)
    return t, view


def grouping_explorer(trace, events: pd.DataFrame | None = None, by: str = "input_shape",
                      name: str = "aten::cudnn_convolution", top: int = 8, table: pd.DataFrame | None = None,
                      hold: tuple | None = None, hold_none: tuple | None = None):
    """Explorer of one operator's device time by input shape (``by="input_shape"``, opening on
    ``name``: :func:`kitlib.analyses.grouping.shape_table`) or of device time by call site
    (``"callsite"``: :func:`kitlib.analyses.callsites.group_by_callsite`), sorted, filtered
    (``contains``, case-insensitive), ``top`` rows drawn; times in µs. ``events`` and ``table``
    are op_events and callsites results to reuse. ``hold = (exercises, key)``: a prediction the
    views by layer answer; until it is ready (:meth:`Question.outcome_ready`) ``group_by``
    offers ``user_frame`` alone, with a note. ``hold_none = (exercises, key)``: a prediction
    the ``(none)`` row (operators with no call site) answers; until it is ready that row is left
    out of the table and the picture, with a note. Raises KitError for another ``by``."""
    from ..analyses import callsites, grouping
    from ..analyses.events import op_events
    from ..plots import grouping as plots_grouping
    ev = op_events(trace) if events is None else events
    common = {"contains": widgets.Text(value="", description="contains", placeholder="filter",
                                       layout=widgets.Layout(width="16em")),
              "top": widgets.IntSlider(value=int(top), min=3, max=30, description="top",
                                       layout=widgets.Layout(width="20em"))}
    if by == "input_shape":
        cache = {}
        names = ev[ev["kind"] == "op"].groupby("name")["device_total_ns"].sum().sort_values(ascending=False)
        offered = list(dict.fromkeys([name] + [n for n in names.index[:20] if names[n] > 0]))
        controls = {"operator": _dropdown(offered, name, "operator", "24em"),
                    "sort_by": _dropdown(list(_SHAPE_COLS.values())[1:4], "device_total_us", "sort by", "16em"),
                    **common}

        def render(operator, sort_by, contains, top):
            if operator not in cache:
                cache[operator] = grouping.shape_table(trace, operator, events=ev)
            t, view = _top(cache[operator], "tensors", _SHAPE_COLS, sort_by, contains, top,
                           f"no shape of {operator} contains {contains!r}")
            return view.assign(device_share=view["device_share"].round(3)), \
                plots_grouping.plot_shapes(t, operator, top=int(top)).figure
        return Explorer("device time by input shape", controls, render)
    if by != "callsite":
        raise KitError(f"grouping_explorer groups by 'input_shape' or 'callsite', not {by!r}")
    sites = callsites.callsites(trace, ev) if table is None else table
    cache = {}
    views = ["user_frame", "module_type", "module"]
    held = hold is not None and not hold[0][hold[1]].outcome_ready()
    controls = {"group_by": _dropdown(views[:1] if held else views, "user_frame", "group by", "16em"),
                "sort_by": _dropdown(["device_self_us", "ops", "gpu_events", "host_self_us"], "device_self_us",
                                     "sort by", "16em"), **common}

    none_held = lambda: hold_none is not None and not hold_none[0][hold_none[1]].outcome_ready()  # noqa: E731

    def render(group_by, sort_by, contains, top):
        if group_by not in cache:
            cache[group_by] = callsites.group_by_callsite(trace, by=(group_by,), table=sites)
        grouped = cache[group_by]
        if none_held():
            grouped = grouped[grouped[group_by] != "(none)"]
        t, view = _top(grouped, group_by, _SITE_COLS, sort_by, contains, top,
                       f"no {group_by} contains {contains!r}")
        return view.set_index(group_by), plots_grouping.plot_callsites(t, group_by, top=int(top)).figure
    explorer = Explorer("device time by call site", controls, render, max_width_em=28)
    if held:
        waiting = [v for v in views if v not in controls["group_by"].options]

        def offer():
            controls["group_by"].options = views       # the value, user_frame or not, kept
        _hold(explorer, hold, f"group by {' and '.join(waiting)} waits for your prediction of {hold[1]} above "
                              "(or its reveal): by layer, this table would answer it.", offer)
    if none_held():
        _hold(explorer, hold_none, f"the row (none), the operators with no call site, waits for your prediction "
                                   f"of {hold_none[1]} above (or its reveal): it would answer it.", explorer.refresh)
    return explorer


#: CSS class of the note an explorer shows while views of it wait for a prediction.
HELD_VIEWS_CLASS = f"{EXPLORER_CLASS}-held"


def _hold(explorer: Explorer, hold: tuple, said: str, then):
    """Show the note ``said`` until ``hold = (exercises, key)`` is ready; then drop it and call
    ``then()`` (the view it held back, offered or drawn)."""
    ex, key = hold
    explorer.held_note = " ".join(n for n in (explorer.held_note, said) if n)
    note = widgets.HTML(f"<i>{html.escape(said)}</i>")
    note.add_class(HELD_VIEWS_CLASS)
    explorer.children = explorer.children[:2] + (note,) + explorer.children[2:]

    def opened():
        if note in explorer.children and ex[key].outcome_ready():
            explorer.held_note = explorer.held_note.replace(said, "").strip()
            explorer.children = tuple(c for c in explorer.children if c is not note)
            then()
    ex.followers.setdefault(key, []).append(opened)


# -- memory --------------------------------------------------------------------------------

def memory_explorer(trace, timeline: pd.DataFrame | None = None, step: int | None = None, top: int = 8):
    """Explorer (control ``step``, default the recording's peak step) of the ``top`` operators
    whose allocations are held at the step's peak (:func:`kitlib.analyses.memory.memory_held_at`,
    GB = 10⁹ bytes) and :func:`kitlib.plots.memory.plot_memory_over_time`; ``timeline`` a
    memory_timeline to reuse. Raises KitError when no allocator event lies inside a step."""
    from ..analyses import memory
    from ..plots import memory as plots_memory
    tl = memory.memory_timeline(trace) if timeline is None else timeline
    steps = [int(s) for s in tl["step"].dropna().unique()]
    if not steps:
        raise KitError("the memory timeline has no allocator event inside a step")
    first = int(memory.memory_peak(tl)["step"]) if step is None else int(step)
    controls = {"step": _dropdown(steps, first, "step", "9em")}

    def render(step):
        part = tl[tl["step"] == step]
        peak = memory.memory_peak(part)
        position = int(part.index[int(peak["position"])])
        held = memory.memory_held_at(trace, tl, position).head(top)
        view = held.assign(held_gb=(held["held_bytes"] / 1e9).round(3),
                           share=held["share_of_allocated"].round(3))[["op", "allocations", "held_gb", "share"]]
        ax = plots_memory.plot_memory_over_time(part, trace.steps[trace.steps["step"] == step], peak,
                                                title=f"CUDA memory in step {step}")
        return view.set_index("op"), ax.figure
    return Explorer("memory held at the step's peak, by the operator that allocated it", controls, render)
