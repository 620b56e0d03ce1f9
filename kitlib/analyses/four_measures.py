"""Which number answers my question? Four measures of one step, kept apart.

A training step can be measured in four ways that are easy to confuse:

1. **wall time**: the step's host interval (``ProfilerStep#N``), what a stopwatch
   around the step reads;
2. **host time of operators**: the CPU intervals of the operators. An operator's
   *total* includes every operator it called, so summing totals counts nested work
   again (``aten::conv2d`` ⊃ ``aten::convolution`` ⊃ ``aten::cudnn_convolution``);
   *self* time (total minus its children, CUDA API calls included) counts each
   nanosecond once;
3. **device busy time**: how long at least one kernel, copy or set ran: the union of
   the GPU intervals, overlap counted once (:mod:`kitlib.analyses.intervals`);
4. **summed kernel time**: the kernels' durations added up, overlap counted as often
   as it occurs (``>=`` the busy time of the same kernels).

:func:`four_measures` computes them on one step; :func:`self_total` gives self and
total host time per operator, computed the way the profiler does; and
:func:`kitlib.readers.profiler_table.read_profiler_table` / :func:`annotation_device_time` explain why a
``record_function`` label such as ``forward`` shows "Self CUDA" time in the
profiler's own table although it launches nothing itself.

Sources: PyTorch docs, "torch.profiler" (``key_averages``, ``record_function``) and
the PyTorch profiler recipe (self vs total time); Kineto
(``libkineto/src/CuptiActivityProfiler.cpp``), which builds the
``gpu_user_annotation`` spans; checked on the reference ``profiler_5step`` recording
(its ``key_averages_tables.txt`` is the profiler's own printed table of that run).

Pure functions over tables (the profiler's printed table is read by
:mod:`kitlib.readers.profiler_table`).
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
    """The direct parent of every operator, annotation and CUDA API call, from the
    trace's one event tree (``trace.host_events``).

    CUDA API calls are children too — the profiler counts them, so an operator's
    *self* time leaves its launches out — and so are Python frames where the trace's
    rule says so (``trace.meta["python_frames_rule"]``).

    Returns
    -------
    DataFrame
        ``source`` (``ops`` or ``launches``), ``row`` (row label in that table),
        ``name``, ``kind``, ``tid``, ``dur_ns``, ``children_ns`` (the direct
        children's host time), ``parent`` (row label in ``trace.ops`` of the
        profiler's parent; -1 when at the top of its thread), ``merged`` (folded
        into a same-named parent: not a row of the profiler's table).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> tr = tiny_trace()
    >>> from kitlib.analyses.four_measures import operator_children
    >>> operator_children(tr)[["name", "dur_ns", "children_ns"]]
                   name  dur_ns  children_ns
    0    ProfilerStep#1    1000          300
    1        aten::relu     300          100
    2  cudaLaunchKernel     100            0
    3         aten::add       0            0
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
    """Self and total host (CPU) time per operator name, as the profiler computes them.

    *Total* is the event's host interval. *Self* is total minus the intervals of its
    direct children in the trace's one event tree: nested operators and annotations,
    the CUDA API calls it made, and Python frames where the trace's rule counts them;
    calls the profiler folds into a same-named parent are not counted again. This reproduces the "Self CPU" and "CPU total" columns of the profiler's
    ``key_averages().table()``: on ``profiler_5step`` ``aten::convolution_backward``
    gives 17,830,333 ns self and 29,461,674 ns total over 265 calls (the table
    prints 17.830ms and 29.462ms).

    Parameters
    ----------
    trace : Trace
    step : int, optional
        Only events that start inside this step's host interval (any thread); by
        default the whole trace.
    kinds : tuple of str
        Which ``trace.ops`` kinds to report.

    Returns
    -------
    DataFrame, one row per name, sorted by ``total_ns`` descending
        ``name``, ``kind``, ``calls``, ``total_ns``, ``self_ns``, ``children_ns``
        (``total_ns - self_ns``: time spent in what it called). Names with equal
        totals keep the order in which they first appear in the trace.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> tr = tiny_trace()
    >>> from kitlib.analyses.four_measures import self_total
    >>> self_total(tr)
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
    """The measures of one step, side by side, each in ns.

    The device measures use the GPU work the step *launched* (launch inside the
    step's host interval, any thread), which may run on after the step's host
    interval has ended.

    Parameters
    ----------
    trace : Trace
    step : int, optional
        The step number (N of ``ProfilerStep#N`` / ``torch_step#N``); default the first.
    chain_df : DataFrame, optional
        A :func:`kitlib.analyses.chain.chain` result to reuse.

    Returns
    -------
    DataFrame, one row per measure
        ``measure`` (key), ``clock`` (``host`` or ``device``), ``value_ns`` (int), and
        ``what`` (what it counts). Keys, in order:

        - ``wall``: the step annotation's host interval;
        - ``host_ops_total_sum``: every operator's total, summed (nested work counted
          once per enclosing operator, and the main and autograd threads added);
        - ``host_ops_self_sum``: every operator's self time, summed (each ns of
          operator time once, launches excluded);
        - ``host_ops_top_level``: the operators' intervals merged per thread and
          summed over threads (time some operator was running on a thread);
        - ``device_busy``: union of the step's kernels, copies and sets;
        - ``gpu_sum``: the same events' durations summed;
        - ``kernel_sum``: the kernels' durations summed (copies and sets left out).

        Always ``device_busy <= gpu_sum``, ``kernel_sum <= gpu_sum`` and
        ``host_ops_self_sum <= host_ops_total_sum``.

    Raises
    ------
    KitError
        No such step, or no steps at all.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> tr = tiny_trace()
    >>> from kitlib.analyses.four_measures import four_measures
    >>> four_measures(tr)[["measure", "value_ns"]]
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
    """The GPU-side rows of ``record_function`` labels, and the GPU work behind each.

    torch.profiler (Kineto) projects each ``record_function`` range onto the GPU as a
    ``gpu_user_annotation`` event: a span from the start of the first to the end of
    the last GPU operation launched while that label was the *innermost* label on
    the launching thread (one span per stream). ``key_averages()`` counts such a span
    as the label's device time, and, having no children, as all "self": this is the
    ``forward`` row's "Self CUDA".

    This function rebuilds each span from the trace: for every ``gpu_annotation``
    row, the host annotation with the same external id, the GPU events whose launch
    lies inside it on the same thread but not inside a nested annotation, and how
    much of the span they keep busy.

    Returns
    -------
    DataFrame, one row per ``gpu_annotation`` row
        ``name``, ``stream``, ``span_start_ns``, ``span_ns`` (the span's duration as
        recorded), ``events`` (GPU events attributed to the label),
        ``rebuilt_span_ns`` (first start to last end of those events; equals
        ``span_ns`` to within the trace's µs rounding), ``busy_ns`` (union of those
        events), ``sum_ns`` (their durations summed), ``idle_in_span_ns``
        (``span_ns - busy_ns``), ``host_tid``.

    Raises
    ------
    KitError
        The trace has no ``gpu_user_annotation`` events (the profiler records them
        only with CUDA activity on and ``record_function`` labels in the code).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> from kitlib.analyses.four_measures import annotation_device_time
    >>> annotation_device_time(trace_from_json(tiny_profile_doc())).T
                           0
    name             forward
    stream                 7
    span_start_ns       5000
    span_ns             6500
    events                 2
    rebuilt_span_ns     6500
    busy_ns             5000
    sum_ns              5000
    idle_in_span_ns     1500
    host_tid               1
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
    """Each label's "Self CUDA" in the profiler's table beside what the trace says it is.

    Parameters
    ----------
    trace : Trace
        The trace of the same run as ``table``.
    table, totals : DataFrame, dict
        From :func:`kitlib.readers.profiler_table.profiler_table`.

    Returns
    -------
    DataFrame, one row per label that has GPU-side rows
        ``name``, ``calls``, ``table_self_cuda_ns`` (the profiler's table, printed
        precision), ``span_sum_ns`` (the label's ``gpu_user_annotation`` spans summed:
        what the table shows), ``busy_ns`` (union of the GPU work attributed to the
        label), ``idle_in_spans_ns``, ``table_pct_of_total`` (the table's
        "Self CUDA %") and ``work_pct_of_total`` (``busy_ns`` over the table's
        "Self CUDA time total").

    Notes
    -----
    In ``profiler_5step`` the footer's "Self CUDA time total" (216.559 ms) equals the
    kernels, copies and sets of the trace summed, *without* the annotation spans, so
    the labels' rows are counted on top of their own kernels' rows and the
    "Self CUDA %" column adds up to more than 100 %.

    Examples
    --------
    >>> import pandas as pd
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> from kitlib.analyses.four_measures import annotation_summary
    >>> table = pd.DataFrame({"name": ["forward"], "calls": [1], "self_cuda_ns": [6500],
    ...                       "self_cuda_pct": [130.0]})
    >>> annotation_summary(trace_from_json(tiny_profile_doc()), table, {"self_cuda_total_ns": 5000}).T
                              0
    name                forward
    calls                     1
    table_self_cuda_ns     6500
    span_sum_ns            6500
    busy_ns                5000
    idle_in_spans_ns       1500
    table_pct_of_total    130.0
    work_pct_of_total     100.0
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
