"""Where each rank's step went: operators, time outside operators and exposed collective
time (:func:`kitlib.analyses.stragglers.step_budget`); the straggler's extra time shows in
the first two, the others' as exposed time."""
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
    """Stacked bars, one per (step, rank): operators, outside operators, exposed collectives (ms),
    from ``budget`` or ``step_budget(traces)``; the default title is
    :func:`~kitlib.analyses.stragglers.straggler_estimate`. Returns the Axes (each bar's three
    patches left to right); raises :class:`KitError` as ``step_budget``."""
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
