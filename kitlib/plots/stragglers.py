"""Where each rank's step went: one bar per rank and step, split into operators, time
outside operators and exposed collective time (:func:`kitlib.analyses.stragglers.step_budget`).

The straggler's bar has its extra time outside operators (a sleep, Python, data
loading) or in operators (slower compute); the others' bars have the same extra time as
exposed collective time: they waited for it. Every number drawn comes from the budget.
"""
from __future__ import annotations

import pandas as pd

from ..analyses.stragglers import step_budget, straggler_estimate
from ..readers.ranks import RankTraces
from . import legend_within, new_axes

#: Colours of the three parts of a step.
COLOURS = {"ops_ns": "#2ca02c", "outside_ops_ns": "#ff7f0e", "exposed_ns": "#d62728"}
#: Their names in the legend.
LABELS = {"ops_ns": "operators (main thread)", "outside_ops_ns": "outside operators (Python, sleep, …)",
          "exposed_ns": "exposed collectives (blocked)"}


def _ms(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 10 else f"{x:.2g}"


def plot_step_budget(traces: RankTraces | None = None, budget: pd.DataFrame | None = None, ax=None,
                     title: str | None = None):
    """Horizontal stacked bars, one per (step, rank): operators, outside operators,
    exposed collectives, in ms; the title gives :func:`~kitlib.analyses.stragglers.straggler_estimate`.

    Parameters
    ----------
    traces : RankTraces, optional
        Read with :func:`~kitlib.analyses.stragglers.step_budget` when ``budget`` is not given.
    budget : DataFrame, optional
        :func:`~kitlib.analyses.stragglers.step_budget` rows.
    ax : matplotlib Axes, optional
    title : str, optional
        Default: the estimate (rank, delay in ms, where it is, its swing, whether it stands
        clear of it) and the operators' own swing.

    Returns
    -------
    matplotlib.axes.Axes
        x: ms since the step's start (bar lengths in ms); y: ``step N · rank r``, one bar
        each; each bar's three patches are, left to right, operators, outside operators,
        exposed collectives.

    Raises
    ------
    KitError
        As :func:`~kitlib.analyses.stragglers.step_budget`.
    """
    b = step_budget(traces) if budget is None else budget
    b = b.sort_values(["step", "rank"], ascending=[False, False]).reset_index(drop=True)
    ax = new_axes(ax, (9, 0.45 * len(b) + 1.6))
    y = list(range(len(b)))
    left = pd.Series(0.0, index=b.index)
    for col in ("ops_ns", "outside_ops_ns", "exposed_ns"):
        ms = b[col] / 1e6
        ax.barh(y, ms, left=left, color=COLOURS[col], label=LABELS[col], height=0.7)
        left = left + ms
    ax.set_yticks(y, [f"step {s} · rank {r}" for s, r in zip(b["step"], b["rank"])])
    ax.set_xlabel("time in the step (ms)")
    if title is None and b["rank"].nunique() > 1:
        e = straggler_estimate(budget=b)
        where = "outside operators" if e["delay_from"] == "outside operators" else "in compute"
        title = (f"rank {e['rank']}: {_ms(e['delay_ms'])} ms more per step {where} than the others (median, "
                 f"±{_ms(e['swing_ms'])}{'' if e['clear'] else ': not clear'});\noperators alone "
                 f"±{_ms(e['noise_ms'])} ms")
    if title:
        ax.set_title(title)
    legend_within(ax, ncol=3, below=True, fontsize="small", frameon=False)     # below the axis: never over a bar
    return ax


__all__ = ["plot_step_budget", "COLOURS", "LABELS"]
