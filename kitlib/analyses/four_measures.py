"""Which number answers my question? Four measures of one step, kept apart.

1. **wall time**: the step's host interval (``ProfilerStep#N``);
2. **host time of operators**: an operator's *total* includes what it called, so
   summing totals counts nested work again; *self* time (total minus its children,
   CUDA API calls included) counts each nanosecond once;
3. **device busy time**: the union of the GPU intervals, overlap counted once;
4. **summed kernel time**: the kernels' durations added up (``>=`` the busy time).

``step`` is the N of ``ProfilerStep#N``; ``chain_df`` a :func:`kitlib.analyses.chain.chain`
to reuse; times are ns.

Sources: docs/SOURCES.md#four-measures-annotations
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .chain import chain
from ..errors import KitError
from .intervals import busy_ns
from ..model import Trace

__all__ = ["four_measures", "operator_children", "self_total",
           "annotation_device_time", "annotation_summary"]


def _step_row(trace: Trace, step):
    st = trace.steps
    if st.empty:
        raise KitError(f"{trace.path}: no ProfilerStep#N or torch_step#N annotation: no step to measure")
    if step is None:
        return st.iloc[0]
    hit = st[st["step"] == step]
    if hit.empty:
        raise KitError(f"{trace.path}: no step {step} (steps: {st['step'].tolist()})")
    return hit.iloc[0]


# --------------------------------------------------------------------------- self vs total
def operator_children(trace: Trace) -> pd.DataFrame:
    """The direct parent of every host event: ``source, row, name, kind, tid, dur_ns``,
    ``children_ns`` (direct children's host time, ns), ``parent`` (row label in ``trace.ops``,
    -1 at the top), ``merged``.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> operator_children(tiny_trace())[["name", "dur_ns", "children_ns"]].head(2)
                 name  dur_ns  children_ns
    0  ProfilerStep#1    1000          300
    1      aten::relu     300          100
    """
    t = trace.host_events
    par = t["profiler_parent"].to_numpy()
    rows, src = t["row"].to_numpy(), t["source"].to_numpy()
    parent_row = np.where(par >= 0, rows[np.maximum(par, 0)], -1)
    parent_row = np.where((par >= 0) & (src[np.maximum(par, 0)] != "ops"), -1, parent_row)
    return pd.DataFrame({"source": src, "row": rows, "name": t["name"].to_numpy(), "kind": t["kind"].to_numpy(),
                         "tid": t["tid"].to_numpy(), "dur_ns": t["dur_ns"].to_numpy(),
                         "children_ns": t["children_ns"].to_numpy(), "parent": parent_row.astype("int64"),
                         "merged": t["merged"].to_numpy()})


def self_total(trace: Trace, step: int | None = None, kinds=("op", "annotation")) -> pd.DataFrame:
    """Self and total host time per operator name, as the profiler's "Self CPU" and "CPU
    total" columns compute them (``step``: events starting in that step only; ``kinds``:
    which ``trace.ops`` kinds).

    Returns, by ``total_ns`` descending (ties in order of appearance): ``name, kind, calls,
    total_ns, self_ns, children_ns`` (``total_ns - self_ns``).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> self_total(tiny_trace())
             name kind  calls  total_ns  self_ns  children_ns
    0  aten::relu   op      1       300      200          100
    1   aten::add   op      1         0        0            0
    """
    rel = operator_children(trace)
    rel = rel[(rel["source"] == "ops").to_numpy() & ~rel["merged"].to_numpy()]
    ops = trace.ops.loc[rel["row"].to_numpy()]
    keep = ops["kind"].isin(kinds).to_numpy()
    if step is not None:
        s = _step_row(trace, step)
        keep = keep & ((ops["start_ns"] >= s["start_ns"]) & (ops["start_ns"] < s["end_ns"])).to_numpy()
    rel, ops = rel[keep], ops[keep]
    t = pd.DataFrame({"name": ops["name"].to_numpy(), "kind": ops["kind"].to_numpy(),
                      "total_ns": ops["dur_ns"].to_numpy(),
                      "self_ns": ops["dur_ns"].to_numpy() - rel["children_ns"].to_numpy()})
    out = t.groupby(["name", "kind"], sort=False).agg(calls=("total_ns", "size"), total_ns=("total_ns", "sum"),
                                                      self_ns=("self_ns", "sum")).reset_index()
    out["children_ns"] = out["total_ns"] - out["self_ns"]
    return out.sort_values("total_ns", ascending=False, kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------- the four measures
def four_measures(trace: Trace, step: int | None = None, chain_df: pd.DataFrame | None = None) -> pd.DataFrame:
    """The measures of one step (default the first), side by side, in ns. Device measures use
    the GPU work the step *launched*, which may run on after it ends.

    Returns ``measure``, ``clock`` (``host``/``device``), ``value_ns``, ``what`` (the measure
    in words).

    Raises KitError when there is no such step, or no steps.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> four_measures(tiny_trace())[["measure", "value_ns"]]
                  measure  value_ns
    0                wall      1000
    1  host_ops_total_sum       300
    2   host_ops_self_sum       200
    3  host_ops_top_level       300
    4         device_busy       400
    5             gpu_sum       400
    6          kernel_sum       400
    """
    s = _step_row(trace, step)
    t0, t1 = int(s["start_ns"]), int(s["end_ns"])
    ops = trace.ops[(trace.ops["kind"] == "op") & (trace.ops["start_ns"] >= t0) & (trace.ops["start_ns"] < t1)]
    st = self_total(trace, step=int(s["step"]), kinds=("op",))
    top = sum(busy_ns(g) for _, g in ops.groupby("tid"))
    c = chain(trace) if chain_df is None else chain_df
    mine = c[(c["launch_start_ns"] >= t0) & (c["launch_start_ns"] < t1)]      # [start, end): kitlib.model.window
    work = pd.DataFrame({"start_ns": mine["gpu_start_ns"].astype("int64"),
                         "dur_ns": mine["gpu_dur_ns"].astype("int64")})
    kern = mine[mine["gpu_kind"] == "kernel"]
    rows = [
        ("wall", "host", int(s["dur_ns"]), f"host interval of {s['name']}"),
        ("host_ops_total_sum", "host", int(ops["dur_ns"].sum()),
         f"totals of {len(ops):,} operators summed: nested calls counted again"),
        ("host_ops_self_sum", "host", int(st["self_ns"].sum()),
         "self times summed: each ns of operator time once, CUDA API calls left out"),
        ("host_ops_top_level", "host", int(top),
         f"operator intervals merged per thread, summed over {ops['tid'].nunique()} thread(s)"),
        ("device_busy", "device", busy_ns(work),
         f"union of the {len(mine):,} kernels, copies and sets the step launched"),
        ("gpu_sum", "device", int(work["dur_ns"].sum()), "the same GPU events' durations summed"),
        ("kernel_sum", "device", int(kern["gpu_dur_ns"].sum()), f"durations of the {len(kern):,} kernels summed"),
    ]
    return pd.DataFrame(rows, columns=["measure", "clock", "value_ns", "what"])


# --------------------------------------------------------------------------- annotations on the GPU
def annotation_device_time(trace: Trace, chain_df: pd.DataFrame | None = None) -> pd.DataFrame:
    """The GPU-side spans of ``record_function`` labels (``gpu_user_annotation``), rebuilt
    from the GPU work launched inside the label on its thread but not inside a nested label.

    Returns one row per span, ns: ``name, stream, span_start_ns, span_ns`` (as recorded),
    ``events``, ``rebuilt_span_ns`` (first start to last end), ``busy_ns`` (union), ``sum_ns``,
    ``idle_in_span_ns``, ``host_tid``.

    Raises KitError when the trace has no ``gpu_user_annotation`` events.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> a = annotation_device_time(trace_from_json(tiny_profile_doc()))
    >>> a[["name", "span_ns", "rebuilt_span_ns", "busy_ns", "idle_in_span_ns"]]
          name  span_ns  rebuilt_span_ns  busy_ns  idle_in_span_ns
    0  forward     6500             6500     5000             1500
    """
    ga = trace.gpu[trace.gpu["kind"] == "gpu_annotation"]
    if ga.empty:
        raise KitError(f"{trace.path}: no gpu_user_annotation events: the trace has no record_function "
                       "label projected onto the GPU")
    c = chain(trace) if chain_df is None else chain_df
    ann = trace.ops[trace.ops["kind"].isin(["annotation", "step"])]
    # the chain's columns as plain arrays, once; a row missing any of them is never counted
    known = (c["launch_tid"].notna() & c["launch_start_ns"].notna() & c["stream"].notna()).to_numpy(bool)
    tid, start, stream = (c[k].fillna(0).to_numpy("int64") for k in ("launch_tid", "launch_start_ns", "stream"))
    gpu = c[["gpu_start_ns", "gpu_dur_ns"]]
    rows = []
    for g in ga.itertuples():
        host = ann[ann["external_id"] == g.external_id]
        if host.empty:
            continue
        h = host.iloc[0]
        # launched inside the label, [start, end) (kitlib.model.window), and not inside a nested one
        on = known & (tid == h["tid"]) & (start >= h["start_ns"]) & (start < h["end_ns"]) \
            & (stream == g.stream if pd.notna(g.stream) else False)
        nested = ann[(ann["tid"] == h["tid"]) & (ann["start_ns"] >= h["start_ns"]) & (ann["end_ns"] <= h["end_ns"])
                     & (ann.index != host.index[0])]
        for n in nested.itertuples():
            on &= ~((start >= n.start_ns) & (start < n.end_ns))
        ev = gpu[on]
        w = pd.DataFrame({"start_ns": ev["gpu_start_ns"].astype("int64"), "dur_ns": ev["gpu_dur_ns"].astype("int64")})
        first, last = (int(w["start_ns"].min()), int((w["start_ns"] + w["dur_ns"]).max())) if len(w) else (0, 0)
        b = busy_ns(w)
        rows.append({"name": g.name, "stream": g.stream, "span_start_ns": int(g.start_ns), "span_ns": int(g.dur_ns),
                     "events": len(ev), "rebuilt_span_ns": last - first, "busy_ns": b,
                     "sum_ns": int(w["dur_ns"].sum()), "idle_in_span_ns": int(g.dur_ns) - b,
                     "host_tid": int(h["tid"])})
    return pd.DataFrame(rows)


def annotation_summary(trace: Trace, table: pd.DataFrame, totals: dict | None = None,
                       chain_df: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each label's "Self CUDA" in the profiler's ``table`` (and ``totals``, from
    :func:`kitlib.readers.profiler_table.profiler_table`) beside what the trace says it is.

    Returns per label with GPU-side spans: ``name, calls, table_self_cuda_ns``, ``span_sum_ns``
    (what the table shows), ``busy_ns``, ``idle_in_spans_ns`` (ns); ``table_pct_of_total``,
    ``work_pct_of_total`` (%, of the table's "Self CUDA time total").

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> table = pd.DataFrame({"name": ["forward"], "calls": [1], "self_cuda_ns": [6500]})
    >>> annotation_summary(trace_from_json(tiny_profile_doc()), table)[["name", "span_sum_ns", "busy_ns"]]
          name  span_sum_ns  busy_ns
    0  forward         6500     5000
    """
    a = annotation_device_time(trace, chain_df)
    g = a.groupby("name", sort=False).agg(calls=("span_ns", "size"), span_sum_ns=("span_ns", "sum"),
                                          busy_ns=("busy_ns", "sum"), idle_in_spans_ns=("idle_in_span_ns", "sum"))
    g = g.reset_index()
    tab = table.drop_duplicates("name").set_index("name")["self_cuda_ns"]
    g.insert(2, "table_self_cuda_ns", g["name"].map(tab).astype("Int64"))
    total = (totals or {}).get("self_cuda_total_ns")
    if total:
        g["table_pct_of_total"] = g["table_self_cuda_ns"] / total * 100
        g["work_pct_of_total"] = g["busy_ns"] / total * 100
    return g
