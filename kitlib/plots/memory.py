"""Lesson 07's pictures: memory over time, drawn from :mod:`kitlib.analyses.memory`'s tables."""
from __future__ import annotations

import pandas as pd

from . import font, new_axes as _ax
from ..units import bytes_to_gb, ns_to_ms

def plot_memory_over_time(timeline: pd.DataFrame, steps: pd.DataFrame | None = None, peak=None, ax=None,
                          title="CUDA memory over time"):
    """Allocated and reserved GB after every allocator event of
    :func:`kitlib.analyses.memory.memory_timeline`, a dashed line where each of ``steps``
    begins, and ``peak`` (:func:`kitlib.analyses.memory.memory_peak`) marked. Returns the Axes."""
    ax = _ax(ax)
    t0 = int(timeline["start_ns"].iloc[0])
    t_ms = ns_to_ms(timeline["start_ns"] - t0)
    ax.step(t_ms, bytes_to_gb(timeline["reserved_bytes"]), where="post", color="tab:gray", lw=1.5,
            label="reserved (held by the caching allocator)")
    ax.step(t_ms, bytes_to_gb(timeline["allocated_bytes"]), where="post", color="tab:blue", lw=1,
            label="allocated (live tensors)")
    if steps is not None:
        for r in steps.itertuples():
            x = ns_to_ms(r.start_ns - t0)
            if x >= t_ms.iloc[0] - 1:
                ax.axvline(x, color="k", ls="--", lw=0.7)
                ax.text(x, ax.get_ylim()[1] * 0.02, f" step {r.step}", fontsize=font(8), va="bottom")
    if peak is not None:
        x = ns_to_ms(int(peak["start_ns"]) - t0)
        ax.plot([x], [bytes_to_gb(peak["allocated_bytes"])], "v", color="tab:red")
        # the note points inward, never over the y axis's labels (issue 40)
        left, right = ax.get_xlim()
        inward = "left" if x - left < (right - left) / 2 else "right"
        ax.annotate(f"peak {bytes_to_gb(peak['allocated_bytes']):.2f} GB: {peak['op']} ({peak['phase']})",
                    (x, bytes_to_gb(peak["allocated_bytes"])), xytext=(0, 30),
                    textcoords="offset points", fontsize=font(8), color="tab:red", ha=inward, va="bottom",
                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "tab:red", "lw": 0.5},
                    arrowprops={"arrowstyle": "-", "color": "tab:red", "lw": 0.5,
                                "relpos": (0, 0) if inward == "left" else (1, 0)})
    ax.set_xlabel("time since the first allocator event (ms)")
    ax.set_ylabel("memory (GB, 10⁹ bytes)")
    top = bytes_to_gb(max(timeline["reserved_bytes"].max(), timeline["allocated_bytes"].max()))
    ax.set_ylim(0, top * 1.45)
    ax.set_title(title)
    ax.legend(loc="upper right", fontsize=font(8), ncol=2)
    ax.figure.tight_layout()
    return ax


def plot_memory_categories(timeline, ax=None, title="memory held, by what it holds"):
    """MiB held over time, stacked by category, from
    :func:`kitlib.readers.memory_timeline.load_memory_timeline`. Returns the Axes; x: ms since
    the first change."""
    from ..readers.memory_timeline import CATEGORIES
    from ..units import bytes_to_mib
    ax = _ax(ax, (10, 3.4))
    t0 = int(timeline["time_ns"].iloc[0]) if len(timeline) else 0
    x = ns_to_ms(timeline["time_ns"] - t0)
    cats = [c for c in CATEGORIES if timeline[f"{c}_bytes"].abs().sum() > 0]
    ax.stackplot(x, *[bytes_to_mib(timeline[f"{c}_bytes"]) for c in cats], labels=cats, step="post", alpha=0.85)
    ax.set_xlabel("time since the first recorded change (ms)")
    ax.set_ylabel("memory held (MiB)")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=font(8))
    ax.figure.tight_layout()
    return ax
