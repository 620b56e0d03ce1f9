"""Lessons 09–11: GPU work credited to each NVTX range under the two attributions
(:func:`kitlib.analyses.align.align`)."""
from __future__ import annotations

import numpy as np
import pandas as pd
from . import new_axes, font
from ..units import ns_to_ms

__all__ = ["plot_attribution"]


def plot_attribution(by_thread: pd.DataFrame, by_time: pd.DataFrame, tool: str = "nsys", ax=None,
                     title: str = "GPU work credited to each phase (median over warm steps)"):
    """Per phase, the median kernel ms (warm steps) credited by the thread rule and by the time
    rule, for ``tool`` (``"nsys"`` or ``"prof"``); copies and memsets are not drawn. Returns
    the Figure."""
    ax = new_axes(ax, (8, 3))
    fig = ax.figure
    col = f"{tool}_kernel_sum_ns"
    def med(t):
        t = t[(t["step"] > 0) & (t["label"] != "step")]
        return ns_to_ms(t.groupby("label", sort=False)[col].median().dropna())
    a, b = med(by_thread), med(by_time)
    labels = list(dict.fromkeys(list(a.index) + list(b.index)))
    y = np.arange(len(labels))
    ax.barh(y + 0.2, [a.get(l, 0) for l in labels], 0.4, label="thread (Nsight's projection)", color="#8172B3")
    ax.barh(y - 0.2, [b.get(l, 0) for l in labels], 0.4, label="time (launch inside the range, any thread)",
            color="#55A868")
    ax.set_yticks(y)
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    ax.set_xlabel("kernel time credited (ms; kernels only, copies not counted)")
    ax.set_title(title)
    ax.legend(fontsize=font(8), loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig
