"""Training steps in a trace, and what each step's labelled phases took on the host.

A step is found from the profiler's ``ProfilerStep#N`` annotation (written by
``prof.step()``) or, where there is none, from a ``torch_step#N``
``record_function`` range (the reference ``cold_start_8step`` recording); in an
Nsight Systems report, from the ``torch_step`` NVTX ranges (``nsys_8step``).

Per step, :func:`step_measures` keeps apart the measures lesson 02 teaches: the
step's wall time on the host, the host time of each labelled phase, the device's
busy time (a union of GPU intervals: overlap counted once, via
:mod:`kitlib.intervals`), the summed durations of its kernels, and the idle time;
:func:`step_gaps` lists the device's idle gaps and what the host's main thread was
inside meanwhile. Pure functions: no I/O, printing or plotting.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .chain import chain
from .errors import KitError
from .intervals import idle_gaps, per_window
from .trace import Trace
from .workload import LABELS

PHASES = LABELS  # the phase labels of kitlib.workload.train_step
_STEP_PATTERNS = (r"^ProfilerStep#(\d+)$", r"^torch_step#(\d+)$")


def find_steps(trace: Trace) -> pd.DataFrame:
    """The steps of a trace.

    Returns
    -------
    DataFrame
        ``step`` (the N), ``name``, ``pid, tid, start_ns, end_ns, dur_ns`` (host interval, ns),
        sorted by start. Empty when the trace has neither ``ProfilerStep#N`` nor
        ``torch_step#N`` annotations.
    """
    ops = trace.ops[trace.ops["kind"].isin(["step", "annotation"])]
    for pat in _STEP_PATTERNS:
        n = ops["name"].str.extract(pat)[0]
        hit = ops[n.notna()].copy()
        if len(hit):
            hit["step"] = n[n.notna()].astype(int).to_numpy()
            return hit[["step", "name", "pid", "tid", "start_ns", "end_ns", "dur_ns"]] \
                .sort_values("start_ns").reset_index(drop=True)
    return pd.DataFrame(columns=["step", "name", "pid", "tid", "start_ns", "end_ns", "dur_ns"])


def step_table(trace: Trace, phases=PHASES, chain_df: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per step: host wall time, the host time of each labelled phase, and the GPU work it launched.

    Parameters
    ----------
    trace : Trace
    phases : sequence of str
        ``record_function`` labels to measure (the kit's ``train_step`` labels by default).
    chain_df : DataFrame, optional
        A :func:`kitlib.chain.chain` result to reuse.

    Returns
    -------
    DataFrame, one row per step
        ``step``; ``wall_ms`` (the step annotation's host duration); ``<phase>_ms`` for
        each phase (host duration of that range inside the step; summed if it occurs
        more than once, NaN if absent); ``gpu_events`` (kernels, copies and sets whose
        launch lies inside the step's host interval); ``gpu_time_ms`` (the sum of those
        events' durations — summed, so overlap on several streams would count twice).
        Host times are not device times: a phase's host range can end long before the
        GPU work it launched has run.
    """
    steps = find_steps(trace)
    c = chain(trace) if chain_df is None else chain_df
    ann = trace.ops[trace.ops["kind"] == "annotation"]
    rows = []
    for _, s in steps.iterrows():
        r = {"step": int(s["step"]), "wall_ms": s["dur_ns"] / 1e6}
        inside = ann[(ann["start_ns"] >= s["start_ns"]) & (ann["end_ns"] <= s["end_ns"])]
        for ph in phases:
            d = inside.loc[inside["name"] == ph, "dur_ns"]
            r[f"{ph}_ms"] = d.sum() / 1e6 if len(d) else np.nan
        launched = c[(c["launch_start_ns"] >= s["start_ns"]) & (c["launch_start_ns"] <= s["end_ns"])]
        r["gpu_events"] = len(launched)
        r["gpu_time_ms"] = launched["gpu_dur_ns"].sum() / 1e6
        rows.append(r)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- any source
#: NVTX range that wraps one step in the kit's Nsight recordings (``nsys_8step``).
NSYS_STEP_RANGE = "torch_step"

STEP_COLUMNS = ["step", "name", "pid", "tid", "start_ns", "end_ns", "dur_ns"]


def _is_nsys(source) -> bool:
    from .nsys import NsysReport
    return isinstance(source, NsysReport)


def _check_source(source, what="source"):
    from .nsys import NsysReport
    if not isinstance(source, (Trace, NsysReport)):
        raise KitError(f"{what}: expected a kitlib Trace (load_trace) or NsysReport (load_nsys), "
                       f"got {type(source).__name__}")


def nsys_steps(report, step_range: str = NSYS_STEP_RANGE) -> pd.DataFrame:
    """The steps of an Nsight Systems report: its NVTX ranges named ``step_range``.

    Parameters
    ----------
    report : NsysReport
    step_range : str
        Name of the NVTX range that wraps one step (``torch_step`` in the kit's
        recordings, pushed by :func:`kitlib.workload.train_step`). A name ending in
        ``#N`` also counts (``torch_step#3``), N then being the step number.

    Returns
    -------
    DataFrame
        Columns as :func:`find_steps`; ``step`` numbers the ranges 0, 1, … in time
        order (or is the ``#N``). Empty when there is no such range.
    """
    n = report.nvtx
    hit = n[(n["name"] == step_range) | n["name"].str.match(rf"^{step_range}#\d+$")].copy()
    hit = hit[hit["end_ns"].notna()].sort_values("start_ns")
    if hit.empty:
        return pd.DataFrame(columns=STEP_COLUMNS)
    num = hit["name"].str.extract(r"#(\d+)$")[0]
    hit["step"] = num.astype(int).to_numpy() if num.notna().all() else np.arange(len(hit))
    out = hit[STEP_COLUMNS].reset_index(drop=True)
    return out.astype({c: "int64" for c in ["step", "pid", "tid", "start_ns", "end_ns", "dur_ns"]})


def steps_of(source) -> pd.DataFrame:
    """Steps of a Trace (:func:`find_steps`) or an NsysReport (:func:`nsys_steps`).

    Raises
    ------
    KitError
        ``source`` is neither, or it holds no step at all (no ``ProfilerStep#N``,
        ``torch_step#N`` or ``torch_step`` range) — named with its file.
    """
    _check_source(source)
    st = nsys_steps(source) if _is_nsys(source) else find_steps(source)
    if st.empty:
        raise KitError(f"{source.path}: no steps found (looked for ProfilerStep#N, torch_step#N "
                       f"annotations and '{NSYS_STEP_RANGE}' NVTX ranges)")
    return st


def labelled_ranges(source) -> pd.DataFrame:
    """The host-side labelled ranges: ``record_function`` annotations (Trace) or NVTX
    ranges (NsysReport), with ``name, pid, tid, start_ns, end_ns, dur_ns``."""
    _check_source(source)
    if _is_nsys(source):
        r = source.nvtx[source.nvtx["end_ns"].notna()]
    else:
        r = source.ops[source.ops["kind"].isin(["annotation", "step"])]
    return r[["name", "pid", "tid", "start_ns", "end_ns", "dur_ns"]].astype(
        {"start_ns": "int64", "end_ns": "int64", "dur_ns": "int64"})


def device_work(source) -> pd.DataFrame:
    """Every GPU operation that is work: kernels, copies and sets (not the profiler's
    ``gpu_user_annotation`` spans, which are labels).

    Returns
    -------
    DataFrame
        ``kind`` (``kernel``/``memcpy``/``memset``), ``name, start_ns, end_ns, dur_ns``
        (int64 ns), ``stream``, ``bytes``; sorted by start.
    """
    _check_source(source)
    cols = ["kind", "name", "start_ns", "end_ns", "dur_ns", "stream", "bytes"]
    if _is_nsys(source):
        parts = [source.kernels.assign(kind="kernel", bytes=pd.NA),
                 source.copies.assign(kind="memcpy"), source.sets.assign(kind="memset")]
        g = pd.concat([p[cols] for p in parts], ignore_index=True)
    else:
        g = source.kernels[cols].reset_index(drop=True)
    g = g.astype({"start_ns": "int64", "end_ns": "int64", "dur_ns": "int64"})
    return g.sort_values("start_ns", kind="stable").reset_index(drop=True)


def _innermost(ranges: pd.DataFrame, times) -> list:
    """For each time, the row (Series) of the innermost range containing it, or None.
    Ranges on one thread nest, so the innermost is the containing one that starts last."""
    r = ranges.sort_values(["start_ns", "dur_ns"], ascending=[True, False])
    s, e = r["start_ns"].to_numpy(), r["end_ns"].to_numpy()
    out = []
    for t in times:
        k = np.flatnonzero((s <= t) & (e > t))
        out.append(r.iloc[k[-1]] if k.size else None)
    return out


def host_context(source, times_ns, tid=None) -> pd.DataFrame:
    """What the host's main thread was inside at given times.

    Parameters
    ----------
    source : Trace or NsysReport
    times_ns : sequence of int
        Times on the source's clock.
    tid : int, optional
        The thread; by default the one that ran the steps.

    Returns
    -------
    DataFrame, one row per time
        ``time_ns``; ``host_label``: the innermost labelled range (``record_function``
        annotation or NVTX range) containing the time, ``""`` if none;
        ``host_event``: the innermost thing the thread was inside — for a Trace, the
        innermost operator or annotation; for an NsysReport, an OS-runtime call, else
        a CUDA API call, else the NVTX range — ``""`` if none; ``host_event_kind``
        (``op``, ``annotation``, ``step``, ``OS runtime``, ``CUDA API``, ``NVTX``).
    """
    steps = steps_of(source)
    tid = int(steps["tid"].iloc[0]) if tid is None else tid
    times = [int(t) for t in times_ns]
    lab = labelled_ranges(source)
    lab = lab[lab["tid"] == tid]
    labels = _innermost(lab, times)
    if _is_nsys(source):
        osrt = source.osrt[source.osrt["tid"] == tid]
        api = source.launches[source.launches["tid"] == tid]
        o_in, a_in = _innermost(osrt, times), _innermost(api, times)
        events = [(o["name"], "OS runtime") if o is not None else (a["name"], "CUDA API") if a is not None
                  else (lb["name"], "NVTX") if lb is not None else ("", "") for o, a, lb in zip(o_in, a_in, labels)]
    else:
        ops = source.ops[(source.ops["kind"] != "python") & (source.ops["tid"] == tid)]
        ev = _innermost(ops, times)
        events = [(e["name"], e["kind"]) if e is not None else ("", "") for e in ev]
    return pd.DataFrame({"time_ns": np.asarray(times, dtype=np.int64),
                         "host_label": [lb["name"] if lb is not None else "" for lb in labels],
                         "host_event": [e[0] for e in events], "host_event_kind": [e[1] for e in events]})


def step_gaps(source, min_gap_ns: int = 1_000_000) -> pd.DataFrame:
    """The device's idle gaps inside each step, with what the host was doing.

    A gap is a time inside a step's host interval when no kernel, copy or set ran on
    any stream of the GPU (:func:`kitlib.intervals.idle_gaps` over
    :func:`device_work`, the step's start and end counting as edges).

    Parameters
    ----------
    source : Trace or NsysReport
    min_gap_ns : int
        Keep gaps strictly longer than this (default 1 ms).

    Returns
    -------
    DataFrame, one row per gap
        ``step``, ``start_ns, end_ns, dur_ns`` (the gap, ns), ``start_in_step_ns``
        (gap start minus step start) and, at the gap's midpoint on the main thread,
        ``host_label``, ``host_event``, ``host_event_kind`` (see :func:`host_context`).

    Raises
    ------
    KitError
        No steps in ``source``.
    """
    steps = steps_of(source)
    work = device_work(source)
    rows = []
    for s in steps.itertuples():
        g = idle_gaps(work, window=(s.start_ns, s.end_ns), min_gap_ns=min_gap_ns)
        g.insert(0, "step", s.step)
        g["start_in_step_ns"] = g["start_ns"] - s.start_ns
        rows.append(g)
    gaps = pd.concat(rows, ignore_index=True)
    ctx = host_context(source, (gaps["start_ns"] + gaps["dur_ns"] // 2).to_numpy(),
                       tid=int(steps["tid"].iloc[0]))
    return pd.concat([gaps, ctx.drop(columns="time_ns")], axis=1)


def step_measures(source, phases=None, min_gap_ns: int = 1_000_000) -> pd.DataFrame:
    """Per step, the measures that must be kept apart, all in ns.

    Parameters
    ----------
    source : Trace or NsysReport
        A torch.profiler trace (steps from ``ProfilerStep#N`` or ``torch_step#N``) or
        an Nsight Systems report (steps from ``torch_step`` NVTX ranges).
    phases : sequence of str, optional
        Labelled phases to time on the host; default :data:`PHASES` (those that occur).
    min_gap_ns : int
        Idle gaps counted in ``gaps`` and ``longest_gap_ns`` are longer than this.

    Returns
    -------
    DataFrame, one row per step
        - ``step``, ``start_ns``, ``end_ns``;
        - ``wall_ns``: the step's host interval (wall time on the host clock);
        - ``<phase>_ns``: host time of each labelled phase inside the step (summed
          if it occurs more than once; <NA> if absent);
        - ``device_busy_ns``: time inside the step's interval when at least one
          kernel, copy or set ran (union over streams, overlap counted once);
        - ``gpu_sum_ns``: the same operations' durations, cut to the interval and
          summed (overlap counted as often as it occurs; ``>= device_busy_ns``);
        - ``kernel_sum_ns``: kernels only, summed (``<= gpu_sum_ns``);
        - ``idle_ns``: ``wall_ns - device_busy_ns``;
        - ``gaps``, ``longest_gap_ns``: idle gaps longer than ``min_gap_ns``.

        GPU work is measured inside the step's host window: work a step submits that
        runs after its host interval has ended counts in the next window.

    Raises
    ------
    KitError
        ``source`` is not a Trace/NsysReport or holds no steps.
    """
    steps = steps_of(source)
    lab = labelled_ranges(source)
    work = device_work(source)
    phases = PHASES if phases is None else phases
    win = steps[["step", "start_ns", "end_ns"]].copy()
    allw = per_window(work, win)
    kern = per_window(work[work["kind"] == "kernel"], win)
    out = win.copy()
    out["wall_ns"] = steps["dur_ns"].to_numpy()
    tid = steps["tid"].to_numpy()
    for ph in phases:
        vals = []
        for s, t in zip(steps.itertuples(), tid):
            d = lab[(lab["name"] == ph) & (lab["tid"] == t) & (lab["start_ns"] >= s.start_ns)
                    & (lab["end_ns"] <= s.end_ns)]["dur_ns"]
            vals.append(int(d.sum()) if len(d) else pd.NA)
        if any(v is not pd.NA for v in vals):
            out[f"{ph}_ns"] = pd.array(vals, dtype="Int64")
    out["device_busy_ns"] = allw["busy_ns"].to_numpy()
    out["gpu_sum_ns"] = allw["sum_dur_ns"].to_numpy()
    out["kernel_sum_ns"] = kern["sum_dur_ns"].to_numpy()
    out["idle_ns"] = out["wall_ns"] - out["device_busy_ns"]
    gaps = step_gaps(source, min_gap_ns) if len(steps) else None
    cnt = gaps.groupby("step")["dur_ns"].agg(["size", "max"])
    out["gaps"] = out["step"].map(cnt["size"]).fillna(0).astype("int64")
    out["longest_gap_ns"] = out["step"].map(cnt["max"]).fillna(0).astype("int64")
    return out.reset_index(drop=True)
