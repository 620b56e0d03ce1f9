"""Training steps in a trace, and what each step's labelled phases took on the host.

A step is found from the profiler's ``ProfilerStep#N`` annotation (written by
``prof.step()``) or, where there is none, from a ``torch_step#N``
``record_function`` range (the reference ``cold_start_8step`` recording).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .chain import chain
from .trace import Trace

PHASES = ("data_load", "h2d", "forward", "backward", "optimizer")
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
