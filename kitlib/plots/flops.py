"""Lesson 08's pictures: FLOPs, achieved rates beside peaks, Nsight Compute. They draw the
tables of :mod:`kitlib.analyses.flops` and :mod:`kitlib.readers.ncu` and return the Axes."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from . import fig_size, font, new_axes as _ax, short_name
from ..units import ns_to_ms


def plot_device_time_counted(covered: pd.DataFrame, n: int = 10, ax=None,
                             title="GPU time under operators with_flops counts, and the rest"):
    """Device time (ms) per top-level operator of :func:`kitlib.analyses.flops.device_time_covered`,
    green where ``with_flops`` counts it."""
    ax = _ax(ax, (9, 0.32 * n + 1.2))
    top = covered.head(n).iloc[::-1]
    colors = ["tab:green" if c else "tab:gray" for c in top["counted"]]
    ax.barh([short_name(k, 46) for k in top.index], ns_to_ms(top["device_time_ns"]), color=colors)
    ax.set_xlabel("device time, summed over the recorded steps (ms)")
    ax.set_title(title + "\n(green: counted; grey: no FLOP estimate)")
    ax.figure.tight_layout()
    return ax


def _peak_label(gpu: str) -> str:
    """``"H200 = the capture's GPU (NVIDIA H200)"`` → ``"peak H200 (capture's GPU)"``."""
    key, _, who = gpu.partition(" = ")
    who = re.sub(r"\s*\(.*\)$", "", who)
    who = who[4:] if who.startswith("the ") else who
    return f"peak {key}" + (f" ({who})" if who else "")


def plot_achieved_vs_peak(achieved: dict, peaks: pd.DataFrame, precision: str = "TF32", ax=None):
    """Achieved-rate estimates (``{label: TFLOP/s}``) beside the dense ``precision`` peaks of
    :func:`kitlib.analyses.flops.peak_table`."""
    ax = _ax(ax, (9, 3.6))
    col = f"{precision}_tflops"
    p = peaks[col].dropna()
    labels = [_peak_label(k) for k in p.index] + [f"estimate: {k}" for k in achieved]
    vals = list(p.values) + list(achieved.values())
    colors = ["tab:gray"] * len(p) + ["tab:green"] * len(achieved)
    ax.barh(labels[::-1], vals[::-1], color=colors[::-1])
    for y, v in enumerate(vals[::-1]):
        ax.text(v, y, f" {v:,.0f}", va="center", fontsize=font(8))
    ax.set_xlabel("TFLOP/s (10¹² floating-point operations per second)")
    ax.set_title(f"achieved-rate estimates (from shape arithmetic)\nvs dense {precision} datasheet peaks — not utilization")
    ax.set_xlim(0, max(vals) * 1.12)
    ax.figure.tight_layout()
    return ax


def plot_ncu_speed_of_light(tidy: pd.DataFrame, ax=None):
    """Per kernel of :func:`kitlib.readers.ncu.load_ncu_csv`: compute and memory throughput (% of
    peak, "GPU Speed Of Light Throughput") on the left, achieved and theoretical occupancy (%
    of the warps an SM can hold) on the right. Returns the two Axes."""
    if ax is None:
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(1, 2, figsize=fig_size(11, 3.8), gridspec_kw={"width_ratios": [3, 2]})
    else:
        fig = ax[0].figure
    names = tidy.groupby("kernel_id")["kernel_name"].first()
    w = tidy.pivot_table(index="kernel_id", columns="metric", values="value", aggfunc="first")
    x = np.arange(len(w))
    labels = [f"#{k} {short_name(names[k], 24)}" for k in w.index]
    for a, metrics, ylabel, title in (
            (ax[0], ["Compute (SM) Throughput", "Memory Throughput"], "throughput (% of the device's peak)",
             "speed of light"),
            (ax[1], ["Theoretical Occupancy", "Achieved Occupancy"], "occupancy (% of max warps per SM)",
             "occupancy")):
        have = [m for m in metrics if m in w.columns]
        width = 0.8 / max(1, len(have))
        for i, m in enumerate(have):
            a.bar(x + (i - (len(have) - 1) / 2) * width, w[m], width, label=m)
        a.set_xticks(x, labels, fontsize=font(8), rotation=20, ha="right")
        a.set_ylabel(ylabel)
        a.set_ylim(0, 130)
        a.set_title(f"Nsight Compute: {title}", fontsize=font(10))
        a.legend(fontsize=font(8), loc="upper center", ncol=2)
    fig.tight_layout()
    return ax
