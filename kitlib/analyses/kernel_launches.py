"""Kernel launch statistics (overhead, queueing delay, outliers, short kernels) and Holistic
Trace Analysis' kernel breakdown (:func:`kernel_types`, :func:`top_kernels`).

Launch overhead is the CUDA call's duration, host time (never add it to device time);
queueing delay is GPU start − launch start; a launch's step is the one holding its start.
``source`` is a Trace or an NsysReport (a Trace or RankTraces for the breakdown); ``events``
and ``steps`` may pass a :func:`~kitlib.analyses.gpu_idle.device_events` table and a step
table to use. Times are ns.

Sources: docs/SOURCES.md#kernel-launches
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .collectives import COMM_KERNEL_PATTERN
from .gpu_idle import GpuIdleError, checked_events, require_launches, source_name
from .intervals import busy_ns
from ..model.window import step_of

__all__ = ["SHORT_KERNEL_NS", "OUTLIER_FACTOR", "KERNEL_TYPES", "TOP_KERNELS", "launch_stats", "launch_summary",
           "kernel_type", "kernel_types", "top_kernels"]

#: Kernels shorter than this (ns) are *short* (docs/SOURCES.md#kernel-launches).
SHORT_KERNEL_NS = 5_000
#: A launch call longer than this many times the median of its API's calls is an outlier.
OUTLIER_FACTOR = 10
#: HTA's kernel types, in its order (``hta/utils/utils.py``, ``KernelType``).
KERNEL_TYPES = ("COMMUNICATION", "MEMORY", "COMPUTATION")
#: Kernels named per rank and type by :func:`top_kernels` (HTA's ``num_kernels`` default).
TOP_KERNELS = 10


def launch_stats(source, short_kernel_ns: int = SHORT_KERNEL_NS, outlier_factor: float = OUTLIER_FACTOR,
                 events=None, steps=None) -> pd.DataFrame:
    """One row per GPU event with its launch: overhead, queueing delay, outlier and short flags.

    Returns, by launch start: ``step`` (Int64), ``op_name`` (<NA> in Nsight exports), ``link``,
    ``launch_name, kind, name, device, stream``; ns: ``launch_start_ns``, ``launch_dur_ns`` (the
    overhead), ``start_ns, dur_ns`` (GPU), ``queue_delay_ns``, ``api_median_launch_ns``;
    ``outlier`` (over :data:`OUTLIER_FACTOR` × the API's median), ``short_kernel`` (kernels under
    :data:`SHORT_KERNEL_NS`). Events without a launch: ``.attrs["left_out"]``.

    Raises GpuIdleError without GPU events or launches.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> launch_stats(tiny_trace())[["op_name", "launch_dur_ns", "queue_delay_ns", "outlier", "short_kernel"]]
          op_name  launch_dur_ns  queue_delay_ns  outlier  short_kernel
    0  aten::relu            100             150    False          True
    """
    ev = checked_events(source, events)
    require_launches(ev, source)
    known = ev["launch_start_ns"].notna()
    e = ev[known].copy()
    e["launch_start_ns"] = e["launch_start_ns"].astype("int64")
    e["launch_dur_ns"] = e["launch_dur_ns"].astype("int64")
    e["queue_delay_ns"] = e["start_ns"] - e["launch_start_ns"]
    med = e.groupby("launch_name", dropna=False)["launch_dur_ns"].transform("median")
    e["api_median_launch_ns"] = med.to_numpy(dtype="float64")
    e["outlier"] = e["launch_dur_ns"].to_numpy() > outlier_factor * e["api_median_launch_ns"].to_numpy()
    e["short_kernel"] = (e["kind"] == "kernel").to_numpy() & (e["dur_ns"].to_numpy() < short_kernel_ns)
    e["step"] = step_of(e["launch_start_ns"].to_numpy(), source.steps if steps is None else steps)
    cols = ["step", "op_name", "link", "launch_name", "kind", "name", "device", "stream", "launch_start_ns",
            "launch_dur_ns", "start_ns", "dur_ns", "queue_delay_ns", "api_median_launch_ns", "outlier",
            "short_kernel"]
    out = e[cols].sort_values("launch_start_ns", kind="stable").reset_index(drop=True)
    out.attrs["left_out"] = int((~known).sum())
    out.attrs["short_kernel_ns"] = int(short_kernel_ns)
    out.attrs["outlier_factor"] = outlier_factor
    return out


def launch_summary(source, by=("step", "op_name"), short_kernel_ns: int = SHORT_KERNEL_NS,
                   outlier_factor: float = OUTLIER_FACTOR, events=None, steps=None) -> pd.DataFrame:
    """:func:`launch_stats` grouped ``by`` its columns (default per step and operator; an Nsight
    export by ``("step", "launch_name")``).

    Returns, most overhead first: ``launches, kernels, launch_sum_ns, launch_median_ns,
    launch_max_ns, queue_delay_median_ns, queue_delay_max_ns, outliers, short_kernels,
    short_kernel_share`` (0-1, <NA> without kernels), ``gpu_sum_ns``, ``links``. Medians
    are the lower middle whole ns.

    Raises GpuIdleError as :func:`launch_stats`, or for a ``by`` column it lacks.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> launch_summary(tiny_trace())[["step", "op_name", "launches", "launch_sum_ns", "short_kernel_share"]]
       step     op_name  launches  launch_sum_ns  short_kernel_share
    0     1  aten::relu         1            100                 1.0
    """
    ls = launch_stats(source, short_kernel_ns, outlier_factor, events, steps)
    by = list(by)
    bad = [c for c in by if c not in ls.columns]
    if bad:
        raise GpuIdleError(f"{source_name(source)}: cannot group launches by {bad}; columns: {list(ls.columns)}")
    ls["is_kernel"] = ls["kind"] == "kernel"
    g = ls.groupby(by, dropna=False, sort=False)

    def lower_median(x):
        v = np.sort(x.to_numpy(dtype=np.int64))
        return int(v[(len(v) - 1) // 2]) if len(v) else 0
    out = pd.DataFrame({
        "launches": g.size(),
        "kernels": g["is_kernel"].sum().astype("int64"),
        "launch_sum_ns": g["launch_dur_ns"].sum().astype("int64"),
        "launch_median_ns": g["launch_dur_ns"].agg(lower_median).astype("int64"),
        "launch_max_ns": g["launch_dur_ns"].max().astype("int64"),
        "queue_delay_median_ns": g["queue_delay_ns"].agg(lower_median).astype("int64"),
        "queue_delay_max_ns": g["queue_delay_ns"].max().astype("int64"),
        "outliers": g["outlier"].sum().astype("int64"),
        "short_kernels": g["short_kernel"].sum().astype("int64"),
        "gpu_sum_ns": g["dur_ns"].sum().astype("int64"),
        "links": g["link"].agg(lambda x: ",".join(sorted(set(map(str, x))))),
    })
    out.insert(out.columns.get_loc("gpu_sum_ns"), "short_kernel_share",
               (out["short_kernels"] / out["kernels"].where(out["kernels"] > 0)).astype("Float64"))
    out = out.reset_index().sort_values(["launch_sum_ns"] + by, ascending=[False] + [True] * len(by),
                                        kind="stable", na_position="last").reset_index(drop=True)
    out.attrs.update(ls.attrs)
    return out


# --------------------------------------------------------------------------- kernel breakdown
def _rank_traces(source) -> dict:
    """``{rank: Trace}`` of a RankTraces, or of one Trace (its ``distributedInfo`` rank, else 0)."""
    if hasattr(source, "traces"):
        return dict(source.traces)
    if not hasattr(source, "kernels"):
        raise GpuIdleError(f"expected a kitlib Trace (load_trace) or RankTraces (load_traces), "
                           f"got {type(source).__name__}")
    return {int((source.meta.get("distributedInfo") or {}).get("rank", 0)): source}


def _gpu_events(trace) -> pd.DataFrame:
    k = trace.kernels
    if k.empty:
        raise GpuIdleError(f"{source_name(trace)}: no GPU events (no kernel, copy or set): a CPU-only "
                           "recording has no kernel breakdown")
    return k.assign(kernel_type=kernel_type(k))


def kernel_type(kernels: pd.DataFrame) -> np.ndarray:
    """HTA's type of each GPU event (``kind``, ``name``): ``COMMUNICATION`` (NCCL kernel),
    ``MEMORY`` (``memcpy``, ``memset``), ``COMPUTATION`` (every other kernel); an array of str.

    Sources: docs/SOURCES.md#kernel-type

    Examples
    --------
    >>> kernel_type(pd.DataFrame({"kind": ["kernel", "memset", "kernel"],
    ...                           "name": ["ncclDevKernel_AllGather", "Memset (Device)", "relu_kernel"]}))
    array(['COMMUNICATION', 'MEMORY', 'COMPUTATION'], dtype='<U13')
    """
    comm = kernels["name"].astype(str).str.contains(COMM_KERNEL_PATTERN, regex=True).to_numpy()
    memory = kernels["kind"].isin(["memcpy", "memset"]).to_numpy()
    return np.where(memory, "MEMORY", np.where(comm, "COMMUNICATION", "COMPUTATION"))


def kernel_types(source) -> pd.DataFrame:
    """Each rank's GPU time split into HTA's kernel types (:func:`kernel_type`).

    Returns per rank and type (:data:`KERNEL_TYPES` order): ``rank, kernel_type, events``,
    ``sum_ns`` (durations added), ``busy_ns`` (overlap once), ``share`` (of the rank's sum, 0-1).

    Raises GpuIdleError when a rank has no GPU events or ``source`` is not a Trace or RankTraces.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> kernel_types(tiny_trace())
       rank    kernel_type  events  sum_ns  busy_ns  share
    0     0  COMMUNICATION       0       0        0    0.0
    1     0         MEMORY       0       0        0    0.0
    2     0    COMPUTATION       1     400      400    1.0
    """
    rows = []
    for rank, trace in _rank_traces(source).items():
        k = _gpu_events(trace)
        total = int(k["dur_ns"].sum())
        for t in KERNEL_TYPES:
            sub = k[k["kernel_type"] == t]
            rows.append({"rank": rank, "kernel_type": t, "events": len(sub), "sum_ns": int(sub["dur_ns"].sum()),
                         "busy_ns": busy_ns(sub[["start_ns", "dur_ns"]]),
                         "share": int(sub["dur_ns"].sum()) / total if total else 0.0})
    return pd.DataFrame(rows).astype({"rank": "int64", "events": "int64", "sum_ns": "int64", "busy_ns": "int64"})


def top_kernels(source, top: int = TOP_KERNELS) -> pd.DataFrame:
    """Each rank's ``top`` GPU event names of each type by time (ties by name), the rest in one
    ``others`` row: HTA's per-rank kernel table.

    Returns, by rank, type, time (``others`` last): ``rank, kernel_type, name, calls, sum_ns,
    mean_ns`` (rounded down), ``min_ns, max_ns``, ``share`` (of the type's time on the rank).

    Raises GpuIdleError as :func:`kernel_types`, or for ``top`` below 1.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> top_kernels(tiny_trace())[["rank", "kernel_type", "name", "calls", "sum_ns", "share"]]
       rank  kernel_type         name  calls  sum_ns  share
    0     0  COMPUTATION  relu_kernel      1     400    1.0
    """
    if top < 1:
        raise GpuIdleError(f"top must be 1 or more, got {top}")
    parts = []
    for rank, trace in _rank_traces(source).items():
        k = _gpu_events(trace)
        for t in KERNEL_TYPES:
            sub = k[k["kernel_type"] == t]
            if sub.empty:
                continue
            by_sum = sub.groupby("name")["dur_ns"].sum().sort_values(ascending=False, kind="stable")
            name = sub["name"].where(sub["name"].isin(by_sum.index[:top]), "others")
            g = sub.groupby(name)["dur_ns"].agg(calls="size", sum_ns="sum", min_ns="min", max_ns="max")
            g["others"] = g.index == "others"
            g = g.sort_values(["others", "sum_ns"], ascending=[True, False], kind="stable")
            parts.append(g.drop(columns="others").reset_index(names="name").assign(rank=rank, kernel_type=t))
    out = pd.concat(parts, ignore_index=True)
    out["mean_ns"] = out["sum_ns"] // out["calls"]
    out["share"] = out["sum_ns"] / out.groupby(["rank", "kernel_type"])["sum_ns"].transform("sum")
    cols = ["rank", "kernel_type", "name", "calls", "sum_ns", "mean_ns", "min_ns", "max_ns", "share"]
    return out[cols].astype({c: "int64" for c in cols[3:8]} | {"rank": "int64"})
