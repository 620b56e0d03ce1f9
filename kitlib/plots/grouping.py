"""Pictures for lessons 05 and 06: device time per input shape, per call site, and
what attribution options cost. Each function returns the matplotlib Figure."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from . import new_axes, fig_size, font
from ..units import ns_to_ms, ns_to_us


def _short_shapes(s: str, width: int = 44) -> str:
    return s if len(s) <= width else s[: width - 1] + "…"


def plot_shapes(table: pd.DataFrame, name: str, top: int = 12, ax=None):
    """Device time per input shape of operator ``name`` (:func:`kitlib.analyses.grouping.shape_table`),
    the ``top`` shapes: bars of total ms, each noted with calls × µs per call. Returns the Figure."""
    t = table.head(top).iloc[::-1]
    fig, ax, ms = _bars(t, t["device_total_ns"], [_short_shapes(s, 60) for s in t["tensors"]],
                        [f"{n} calls × {pc:,.1f} µs" for n, pc in zip(t["count"], ns_to_us(t["device_per_call_ns"]))],
                        "#55A868", ax)
    ax.set_xlabel("total device time (ms)")
    ax.set_ylabel("input shapes (first two tensors)")
    ax.set_xlim(0, ms.max() * 1.35 if len(ms) else 1)
    ax.set_title(f"{name}: device time per input shape ({len(table)} shapes, top {len(t)})")
    fig.tight_layout()
    return fig


def _bars(t, device_ns, labels, notes, color, ax):
    ax = new_axes(ax, (9, 0.38 * len(t) + 1.4))
    fig = ax.figure
    y = np.arange(len(t))
    ms = ns_to_ms(np.asarray(device_ns, dtype="float64"))
    ax.barh(y, ms, color=color)
    ax.set_yticks(y, labels, fontsize=font(8))
    for yi, v, note in zip(y, ms, notes):
        ax.text(v, yi, f"  {note}", va="center", fontsize=font(8))
    return fig, ax, ms


def plot_callsites(table: pd.DataFrame, label: str = "user_frame", top: int = 10, ax=None):
    """Device time (ms) of the GPU events launched per call site or module
    (:func:`kitlib.analyses.callsites.group_by_callsite`). Returns the Figure."""
    t = table.head(top).iloc[::-1]
    fig, ax, ms = _bars(t, t["device_self_ns"], [_short_shapes(str(s), 52) for s in t[label]],
                        [f"{n} GPU events" for n in t["gpu_events"]], "#4C72B0", ax)
    ax.set_xlabel("device time of the GPU events launched from there (ms)")
    ax.set_xlim(0, ms.max() * 1.3 if len(ms) else 1)
    ax.set_title(f"device time by {label.replace('_', ' ')}")
    fig.tight_layout()
    return fig


def plot_attribution_cost(sizes: pd.DataFrame, step_ms: dict | None = None):
    """Trace size (gzip MB) without each attribution option
    (:func:`kitlib.analyses.grouping.attribution_bytes`), and step times (ms) per label when
    ``step_ms`` is given. Returns the Figure."""
    n = 2 if step_ms else 1
    fig, axes = plt.subplots(1, n, figsize=fig_size(6 * n, 3.6), squeeze=False)
    ax = axes[0, 0]
    y = np.arange(len(sizes))[::-1]
    ax.barh(y, sizes["gzip_bytes"].to_numpy() / 1e6, color="#8172B3")
    ax.set_yticks(y, list(sizes.index), fontsize=font(8))
    ax.set_xlabel("trace size, gzip (MB)")
    ax.set_title("the same steps, written without each option")
    if step_ms:
        ax2 = axes[0, 1]
        for i, (k, v) in enumerate(step_ms.items()):
            v = np.asarray(v, dtype=float)
            ax2.plot(np.full(len(v), i) + np.linspace(-0.15, 0.15, len(v)), v, "o", alpha=0.7)
            ax2.plot([i - 0.25, i + 0.25], [np.median(v)] * 2, "k-")
        ax2.set_xticks(range(len(step_ms)), list(step_ms), fontsize=font(8), rotation=10)
        ax2.set_ylabel("wall time of a step (ms)")
        ax2.set_yscale("log")
        ax2.set_title("step times (black line: median)")
    fig.tight_layout()
    return fig
