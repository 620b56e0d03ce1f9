"""An Nsight Systems report drawn as the Nsight Systems GUI lays out its timeline: ``CUDA HW``
rows (one per stream), then per thread its ``OS runtime libraries``, ``CUDA API`` and
``NVTX`` rows (one per nesting level). Every bar is one row of the report's tables, cut to
the window; ``tests/plots/test_nsys_gui.py`` compares them with the SQLite export's rows."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from . import fig_size, font
from ..units import ns_to_ms

#: One colour per kind of bar (the legend names each kind drawn).
COLORS = {"kernel": "#4C72B0", "memcpy HtoD": "#55A868", "memcpy DtoH": "#C44E52", "memcpy DtoD": "#8172B2",
          "memcpy other": "#937860", "memset": "#DA8BC3", "CUDA API": "#64B5CD", "OS runtime": "#8C8C8C",
          "NVTX": "#DD8452"}

_COPY = {"Host-to-Device": "memcpy HtoD", "Device-to-Host": "memcpy DtoH", "Device-to-Device": "memcpy DtoD"}


def gui_rows(report, start_ns: int, end_ns: int, threads=None) -> pd.DataFrame:
    """The bars of :func:`plot_nsys_gui`: one per report row overlapping ``[start_ns, end_ns)``.
    ``threads``: thread ids to draw, in order (default: those with a CUDA call or NVTX range in
    the window, the NVTX thread first).

    Returns ``row`` (the GUI's label: ``"CUDA HW · Stream 7"``, ``"[1213] python3 · CUDA API"``,
    ``"… · NVTX"``, ``"… · NVTX (level 1)"``, ``"… · OS runtime libraries"``), ``order`` (top to
    bottom), ``kind`` (a key of :data:`COLORS`), ``name``, ``start_ns``, ``end_ns`` (cut)."""
    out = []

    def cut(df):
        if df is None or not len(df):
            return df.iloc[0:0] if df is not None else pd.DataFrame(columns=["start_ns", "end_ns"])
        keep = (df["end_ns"] > start_ns) & (df["start_ns"] < end_ns) | \
               ((df["end_ns"] == df["start_ns"]) & (df["start_ns"] >= start_ns) & (df["start_ns"] < end_ns))
        d = df[keep].copy()
        d["start_ns"] = d["start_ns"].clip(lower=start_ns)
        d["end_ns"] = d["end_ns"].clip(upper=end_ns)
        return d

    k, c, s = cut(report.kernels), cut(report.copies), cut(report.sets)
    streams = sorted(set(k["stream"]) | set(c["stream"]) | set(s["stream"]))
    for i, st in enumerate(streams):
        row = f"CUDA HW · Stream {int(st)}"
        for d, kind in ((k, "kernel"), (s, "memset")):
            g = d[d["stream"] == st]
            out += [(row, i, kind, n, a, b) for n, a, b in zip(g.get("short_name", g["name"]), g["start_ns"], g["end_ns"])]
        g = c[c["stream"] == st]
        out += [(row, i, _COPY.get(ck, "memcpy other"), n, a, b)
                for n, ck, a, b in zip(g["name"], g["copy_kind"], g["start_ns"], g["end_ns"])]
    nvtx = report.nvtx[report.nvtx["end_ns"].notna()] if len(report.nvtx) else report.nvtx
    pid = int(nvtx["pid"].iloc[0]) if len(nvtx) else None
    api, osrt, nv = cut(report.launches), cut(report.osrt), cut(nvtx)
    if threads is None:
        main = int(nvtx["tid"].iloc[0]) if len(nvtx) else None
        seen = set(api["tid"]) | set(nv["tid"])
        threads = ([main] if main in seen else []) + sorted(int(t) for t in seen if t != main)
    names = {int(t): n for t, n in zip(report.threads["tid"], report.threads["name"])}
    order = len(streams)
    for tid in threads:
        who = f"[{tid}] {names.get(tid, '?')}"
        g = osrt[osrt["tid"] == tid]
        if len(g):
            out += [(f"{who} · OS runtime libraries", order, "OS runtime", n, a, b)
                    for n, a, b in zip(g["name"], g["start_ns"], g["end_ns"])]
            order += 1
        g = api[api["tid"] == tid]
        if len(g):
            out += [(f"{who} · CUDA API", order, "CUDA API", n, a, b)
                    for n, a, b in zip(g["name"], g["start_ns"], g["end_ns"])]
            order += 1
        g = nv[nv["tid"] == tid]
        for depth in sorted(set(g["depth"])):
            h = g[g["depth"] == depth]
            label = f"{who} · NVTX" + (f" (level {int(depth)})" if depth else "")
            out += [(label, order, "NVTX", n, a, b) for n, a, b in zip(h["name"], h["start_ns"], h["end_ns"])]
            order += 1
    rows = pd.DataFrame(out, columns=["row", "order", "kind", "name", "start_ns", "end_ns"])
    rows["start_ns"], rows["end_ns"] = rows["start_ns"].astype("int64"), rows["end_ns"].astype("int64")
    rows.attrs["pid"] = pid
    return rows


def plot_nsys_gui(report, start_ns: int, end_ns: int, threads=None, origin_ns: int | None = None,
                  origin_label: str | None = None, title: str | None = None, flows=()):
    """Draw ``[start_ns, end_ns)`` of a report as the GUI lays it out (:func:`gui_rows`), at ms
    since ``origin_ns`` (default ``start_ns``; ``origin_label`` names it). ``flows``:
    correlation ids drawn as arrows from the launch's CUDA API bar to its GPU operation.

    Returns the Figure: one row per GUI row, CUDA HW on top; bars at least 1/2000 of the window
    wide; wide NVTX bars carry their names; a legend of the kinds drawn; each flow an
    annotation with ``gid`` ``"flow|<correlation>"``."""
    rows = gui_rows(report, start_ns, end_ns, threads)
    t0 = start_ns if origin_ns is None else origin_ns
    labels = list(dict.fromkeys(rows.sort_values("order", kind="stable")["row"]))
    fig, ax = plt.subplots(figsize=fig_size(12, 0.42 * max(4, len(labels)) + 1.4))
    ypos = {lab: len(labels) - 1 - i for i, lab in enumerate(labels)}
    least = ns_to_ms(end_ns - start_ns) / 2000
    drawn = []
    for (lab, kind), g in rows.groupby(["row", "kind"], sort=False):
        y = ypos[lab]
        bars = list(zip(ns_to_ms(g["start_ns"] - t0), np.maximum(ns_to_ms(g["end_ns"] - g["start_ns"]), least)))
        long_calls = kind in ("NVTX", "OS runtime")     # back-to-back long bars: a white seam between them
        ax.broken_barh(bars, (y - 0.35, 0.7), facecolors=COLORS[kind], edgecolor="white" if long_calls else "none",
                       linewidth=0.6 if long_calls else 0, gid=f"{lab}|{kind}")
        drawn.append(kind)
        if kind == "NVTX":
            for r in g.itertuples():
                if r.end_ns - r.start_ns > (end_ns - start_ns) / 25:
                    ax.text(ns_to_ms((r.start_ns + r.end_ns) / 2 - t0), y, r.name, ha="center", va="center",
                            fontsize=font(7), color="white", clip_on=True)
    names = {int(t): n for t, n in zip(report.threads["tid"], report.threads["name"])}
    gpu = pd.concat([t[["correlation", "stream", "start_ns"]] for t in (report.kernels, report.copies, report.sets)])
    for corr in flows:
        la = report.launches[report.launches["correlation"] == corr]
        g = gpu[gpu["correlation"] == corr]
        if not len(la) or not len(g):
            continue
        tid = int(la["tid"].iloc[0])
        api_row, hw_row = f"[{tid}] {names.get(tid, '?')} · CUDA API", f"CUDA HW · Stream {int(g['stream'].iloc[0])}"
        if api_row not in ypos or hw_row not in ypos:
            continue
        ax.annotate("", xy=(ns_to_ms(int(g["start_ns"].iloc[0]) - t0), ypos[hw_row]),
                    xytext=(ns_to_ms(int(la["start_ns"].iloc[0]) - t0), ypos[api_row]),
                    arrowprops=dict(arrowstyle="->", color="black", lw=1.0), gid=f"flow|{int(corr)}")
    ax.set_yticks(list(ypos.values()))
    ax.set_yticklabels(list(ypos.keys()), fontsize=font(8))
    ax.set_ylim(-0.6, len(labels) - 0.4)
    ax.set_xlim(ns_to_ms(start_ns - t0), ns_to_ms(end_ns - t0))
    ax.set_xlabel(f"time since {origin_label or 'the window started'} (ms)")
    kinds = [kd for kd in COLORS if kd in drawn]
    ax.legend(handles=[Patch(color=COLORS[kd], label=kd) for kd in kinds], loc="upper left",
              bbox_to_anchor=(1.0, 1.0), fontsize=font(8))
    ax.grid(axis="x", alpha=0.3)
    hw = [y for lab, y in ypos.items() if lab.startswith("CUDA HW")]
    if hw:
        ax.axhline(min(hw) - 0.5, color="black", linewidth=0.8)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig
