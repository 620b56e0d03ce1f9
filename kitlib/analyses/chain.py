"""Operator → launch → GPU event: which operation asked for this kernel?

Sources: docs/SOURCES.md#chain-module

``trace`` is a Trace (:func:`kitlib.load_trace`); ``chain_df`` a :func:`chain` result to
reuse (worked out when absent); ``op_row`` an operator's row label in ``trace.ops``. Times
are integer ns on the trace's clock."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..model import Trace, handed_out
from ..model.window import containing, label_at
from ..units import ns_to_us

#: The values of ``chain(...)["link"]`` and what each means.
LINKS = {
    "external_id": "operator found through the launch's external id",
    "time_nesting": "operator found as the innermost CPU event on the launching thread "
                    "whose interval contains the launch (the trace's external ids are not trustworthy)",
    "no_operator": "the launch ran outside every recorded operator and annotation",
    "launched_before_recording": "no launch in the trace: its correlation id is older than every "
                                 "recorded launch, so the launch happened before the profiler's window opened",
    "no_launch": "no launch with this correlation id in the trace",
}

CHAIN_COLUMNS = ["op_name", "op_start_ns", "op_dur_ns", "launch_name", "launch_start_ns", "launch_dur_ns",
                 "gpu_name", "gpu_start_ns", "gpu_dur_ns", "link", "gpu_kind", "device", "stream",
                 "correlation", "external_id", "op_row", "launch_row", "gpu_row", "launch_tid"]


def external_ids_trustworthy(trace: Trace, min_fraction: float = 0.9) -> tuple[bool, float]:
    """Whether the launches' external ids point at the operators that made them.

    Sources: docs/SOURCES.md#chain-external-ids-trustworthy

    Returns (verdict, fraction): the fraction of launches inside the operator their id names;
    the verdict is True when it is ≥ ``min_fraction`` with at least one match.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> external_ids_trustworthy(tiny_trace())
    (True, 1.0)
    """
    L = trace.launches.dropna(subset=["external_id"])
    ops = _linkable_ops(trace)
    if L.empty or ops.empty:
        return False, 0.0
    if (L["external_id"] == L["correlation"]).fillna(False).astype(bool).mean() > 0.5:
        return False, 0.0
    m = L[["external_id", "start_ns", "pid", "tid"]].merge(
        ops[["external_id", "start_ns", "end_ns", "pid", "tid"]], on="external_id", suffixes=("", "_op"))
    if m.empty:
        return False, 0.0
    inside = ((m["start_ns"] >= m["start_ns_op"]) & (m["start_ns"] < m["end_ns"])
              & (m["tid"] == m["tid_op"]) & (m["pid"] == m["pid_op"]))
    frac = float(inside.mean())
    return frac >= min_fraction, frac


def _linkable_ops(trace: Trace) -> pd.DataFrame:
    """Operators and annotations (not Python frames), with the columns a link reads."""
    ops = trace.ops
    return ops[["external_id", "start_ns", "end_ns", "pid", "tid"]][(ops["kind"] != "python").to_numpy()]


def innermost_op_at(trace: Trace, pid, tid, times_ns) -> np.ndarray:
    """Row labels (in ``trace.ops``) of the innermost operator/annotation containing each of
    ``times_ns`` on thread ``(pid, tid)``; -1 where none does.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> innermost_op_at(tiny_trace(), 1, 1, [150, 400, 1000]).tolist()
    [1, 0, -1]
    """
    ops = _linkable_ops(trace)
    ops = ops[(ops["pid"] == pid) & (ops["tid"] == tid)]
    # -1, not <NA>: chain's op_row column is int64 with -1 for "no operator"
    return label_at(times_ns, ops).to_numpy(dtype=np.int64, na_value=-1)


def chain(trace: Trace, method: str = "auto") -> pd.DataFrame:
    """One row per GPU event (kernel, copy, set) with the launch and operator behind it.

    ``method``: ``"external_id"``, ``"time_nesting"``, or ``"auto"`` (external ids where
    :func:`external_ids_trustworthy`); a launch outside the operator its id names falls back to
    time nesting, or gets ``"no_operator"``. Returns :data:`CHAIN_COLUMNS`, by GPU start:
    ``op_name, op_start_ns, op_dur_ns`` (the operator or ``record_function`` range);
    ``launch_name, launch_start_ns, launch_dur_ns`` (the CUDA API call); ``gpu_name, gpu_start_ns,
    gpu_dur_ns`` (not ``gpu_user_annotation`` labels); ``link`` (:data:`LINKS`); ``gpu_kind, device,
    stream, correlation, external_id``; ``op_row, launch_row, gpu_row`` (-1 where absent);
    ``launch_tid``. Host durations are never device time: do not add them.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> tr = tiny_trace()
    >>> chain(tr)[["op_name", "launch_name", "gpu_name", "link"]]
          op_name       launch_name     gpu_name         link
    0  aten::relu  cudaLaunchKernel  relu_kernel  external_id
    """
    if method not in ("auto", "external_id", "time_nesting"):
        raise ValueError(f"method must be 'auto', 'external_id' or 'time_nesting', not {method!r}")
    # worked out once per set of tables the trace keeps (Trace.derived); each caller gets a copy
    if hasattr(trace, "derived"):     # a Trace; not a learner's tables
        out = trace.derived(("chain", method), ("ops", "launches", "gpu"), lambda: _chain(trace, method))
        return handed_out(out)
    return _chain(trace, method)


def join_ids(gpu: pd.DataFrame, launches: pd.DataFrame, ops: pd.DataFrame) -> pd.DataFrame:
    """Lesson 02's two joins, for every GPU event at once: the launch with the same
    correlation id, then the operator with the launch's external id.

    Sources: docs/SOURCES.md#chain-join-ids

    Takes rows of ``Trace.kernels``, ``Trace.launches`` and ``Trace.ops``; returns, per row of
    ``gpu`` in its order, ``gpu_row, launch_row, op_row`` (int64 row labels; -1 where none).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> tr = tiny_trace()
    >>> join_ids(tr.kernels, tr.launches, tr.ops)
       gpu_row  launch_row  op_row
    0        0           0       1
    """
    g = pd.DataFrame({"gpu_row": gpu.index.to_numpy(), "correlation": gpu["correlation"].to_numpy()})
    lk = launches[["correlation", "external_id", "start_ns", "pid", "tid"]].dropna(subset=["correlation"])
    lk = lk[~lk["correlation"].duplicated()].rename_axis("launch_row").reset_index()
    op = ops[["external_id", "start_ns", "end_ns", "pid", "tid"]].dropna(subset=["external_id"])
    op = op[~op["external_id"].duplicated()].rename_axis("op_row").reset_index()
    m = g.merge(lk, on="correlation", how="left")
    m = m.merge(op, on="external_id", how="left", suffixes=("", "_op"))
    inside = ((m["start_ns"] >= m["start_ns_op"]) & (m["start_ns"] < m["end_ns"])
              & (m["pid"] == m["pid_op"]) & (m["tid"] == m["tid_op"])).fillna(False).astype(bool)
    return pd.DataFrame({
        "gpu_row": m["gpu_row"].to_numpy(),
        "launch_row": m["launch_row"].fillna(-1).astype(np.int64).to_numpy(),
        "op_row": m["op_row"].where(inside).fillna(-1).astype(np.int64).to_numpy(),
    })


def _chain(trace: Trace, method: str) -> pd.DataFrame:
    """:func:`chain` without the memo: :func:`join_ids`, the fallback to time nesting, the links."""
    gpu, L, ops = trace.kernels, trace.launches, trace.ops
    if method == "auto":
        method = "external_id" if external_ids_trustworthy(trace)[0] else "time_nesting"
    lops = _linkable_ops(trace)
    j = join_ids(gpu, L, lops if method == "external_id" else lops.iloc[:0])
    launch_row, op_row = j["launch_row"].to_numpy(), j["op_row"].to_numpy().copy()
    launch_pos = L.index.get_indexer(launch_row)  # -1 where no launch
    # time nesting for every launch whose external id names no operator containing it
    fell_back = np.zeros(len(j), dtype=bool)
    redo = np.flatnonzero((launch_pos >= 0) & (op_row < 0))
    if len(redo):
        sub = L[["start_ns", "pid", "tid"]].iloc[launch_pos[redo]].set_axis(redo)
        for (pid, tid), grp in sub.groupby(["pid", "tid"], sort=False):
            found = innermost_op_at(trace, pid, tid, grp["start_ns"].to_numpy())
            op_row[grp.index.to_numpy()] = found
            fell_back[grp.index.to_numpy()] = found >= 0
    # CUPTI's correlation ids only grow: one older than every launch was launched before recording
    corr = gpu["correlation"].to_numpy(dtype="float64", na_value=np.nan)
    oldest = float(L["correlation"].min()) if L["correlation"].notna().any() else np.inf
    no_launch = np.where(corr < oldest, "launched_before_recording", "no_launch")
    link = np.where(launch_pos < 0, no_launch,
                    np.where(op_row >= 0, np.where(fell_back, "time_nesting", method), "no_operator"))
    # times stay Int64 through the reindex: a float64's spacing at 1.7e18 ns is 256 ns
    G = gpu[["name", "start_ns", "dur_ns", "kind", "device", "stream", "correlation"]]
    ints = {"start_ns": "Int64", "dur_ns": "Int64"}
    Lr = L[["name", "start_ns", "dur_ns", "external_id", "tid"]].astype(ints).reset_index(drop=True).reindex(launch_pos)
    Or = ops[["name", "start_ns", "dur_ns"]].astype(ints).reindex(np.where(op_row >= 0, op_row, -1))
    out = pd.DataFrame({
        "op_name": Or["name"].to_numpy(),
        "op_start_ns": Or["start_ns"].array,
        "op_dur_ns": Or["dur_ns"].array,
        "launch_name": Lr["name"].to_numpy(),
        "launch_start_ns": Lr["start_ns"].array,
        "launch_dur_ns": Lr["dur_ns"].array,
        "gpu_name": G["name"].to_numpy(),
        "gpu_start_ns": G["start_ns"].to_numpy(),
        "gpu_dur_ns": G["dur_ns"].to_numpy(),
        "link": link,
        "gpu_kind": G["kind"].to_numpy(),
        "device": G["device"].to_numpy(),
        "stream": G["stream"].to_numpy(),
        "correlation": G["correlation"].to_numpy(),
        "external_id": Lr["external_id"].array,
        "op_row": op_row,
        "launch_row": np.where(launch_pos >= 0, launch_row, -1),
        "gpu_row": j["gpu_row"].to_numpy(),
        "launch_tid": Lr["tid"].to_numpy(),
    })
    return out.sort_values("gpu_start_ns", kind="stable").reset_index(drop=True)[CHAIN_COLUMNS]


def impossible_gpu_events(trace: Trace, chain_df: pd.DataFrame | None = None) -> pd.DataFrame:
    """GPU events whose times cannot be real: damaged or mis-clocked data, not work.

    Sources: docs/SOURCES.md#chain-impossible-gpu-events

    Returns ``gpu_row`` (label in ``trace.gpu``), ``name``, ``kind``, ``start_ns``, ``dur_ns``,
    ``reason`` (the first that applies); empty when all is well.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> len(impossible_gpu_events(tiny_trace()))
    0
    """
    k = trace.kernels
    c = chain(trace) if chain_df is None else chain_df
    reason = pd.Series(pd.NA, index=k.index, dtype=object)
    if len(c):
        early = c[(c["gpu_start_ns"] < c["launch_start_ns"]).fillna(False).to_numpy(dtype=bool)]
        reason.loc[early["gpu_row"].to_numpy()] = "before_launch"
    if trace.meta.get("time_resolution_ns", 1) == 1:
        reason[(k["kind"] == "kernel") & (k["dur_ns"] == 0)] = "zero_duration"
    reason[k["start_ns"] <= 0] = "start_at_zero"
    bad = k[reason.notna()]
    return pd.DataFrame({"gpu_row": bad.index.to_numpy(), "name": bad["name"].to_numpy(),
                         "kind": bad["kind"].to_numpy(), "start_ns": bad["start_ns"].to_numpy(),
                         "dur_ns": bad["dur_ns"].to_numpy(), "reason": reason[reason.notna()].to_numpy()})


def launches_of(trace: Trace, op_row: int, chain_df: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every launch made inside the operator ``op_row`` that produced GPU work: its :func:`chain`
    rows by launch start, with ``launch_index`` (1 = first).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> tr = tiny_trace()
    >>> launches_of(tr, 1)[["launch_name", "gpu_name"]]
            launch_name     gpu_name
    0  cudaLaunchKernel  relu_kernel
    """
    c = chain(trace) if chain_df is None else chain_df
    rows = c[c["op_row"] == op_row].sort_values("launch_start_ns").reset_index(drop=True)
    rows.insert(0, "launch_index", np.arange(1, len(rows) + 1))
    return rows


def first_op(trace: Trace, name: str, step: int | None = None) -> int:
    """Row label of the first operator called ``name`` (optionally inside ``ProfilerStep#step``);
    KeyError names the missing step or operator.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> tr = tiny_trace()
    >>> first_op(tr, "aten::relu")
    1
    """
    ops = trace.ops
    cand = ops[ops["name"] == name]
    if step is not None:
        steps = trace.steps
        s = steps[steps["step"] == step]
        if s.empty:
            raise KeyError(f"no ProfilerStep#{step} in this trace (steps: {steps['step'].tolist()})")
        s = s.iloc[0]
        cand = cand[containing([s["start_ns"]], [s["end_ns"]], cand["start_ns"].to_numpy()) == 0]   # [start, end)
    if cand.empty:
        raise KeyError(f"no operator named {name!r}" + (f" in ProfilerStep#{step}" if step is not None else ""))
    return int(cand.sort_values("start_ns").index[0])


def op_summary(trace: Trace, op_row: int) -> dict:
    """The figures lesson 02 reads off one operator's chain, as a dict.

    ``op_name``, ``op_host_us``, ``input_dims``, ``launch_count``, ``launches`` (``(name, host
    µs)`` each), ``longest_kernel``, ``longest_kernel_us`` (device), ``longest_kernel_launch_index``
    (1-based), ``longest_kernel_launch_us`` (host), ``kernel_sum_us`` (device, all its GPU events).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> tr = tiny_trace()
    >>> s = op_summary(tr, 1)
    >>> s["op_name"], s["launch_count"], s["longest_kernel"], float(s["kernel_sum_us"])
    ('aten::relu', 1, 'relu_kernel', 0.4)
    """
    ls = launches_of(trace, op_row)
    op = trace.ops.loc[op_row]
    i = ls["gpu_dur_ns"].idxmax() if len(ls) else None
    return {
        "op_name": op["name"], "op_host_us": ns_to_us(op["dur_ns"]), "input_dims": op["input_dims"],
        "launch_count": len(ls),
        "launches": [(r.launch_name, ns_to_us(r.launch_dur_ns)) for r in ls.itertuples()],
        "longest_kernel": ls.loc[i, "gpu_name"] if i is not None else None,
        "longest_kernel_us": ns_to_us(ls.loc[i, "gpu_dur_ns"]) if i is not None else None,
        "longest_kernel_launch_index": int(ls.loc[i, "launch_index"]) if i is not None else None,
        "longest_kernel_launch_us": ns_to_us(ls.loc[i, "launch_dur_ns"]) if i is not None else None,
        "kernel_sum_us": ns_to_us(ls["gpu_dur_ns"].sum()),
    }
