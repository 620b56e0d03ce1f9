"""What a host range's time was spent on: CUDA API calls inside labelled ranges.

The rest of a label's host time is Python, the dispatcher, the operators' C++ and the
profiler's bookkeeping: "the host was mostly queueing kernels" can be checked, not assumed.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import KitError


def cuda_api_time_in_label(trace, label: str) -> pd.DataFrame:
    """Per instance of ``label`` in ``trace``, the time its thread spent inside CUDA API calls.

    Returns, in time order: ``step`` (containing the label's start, or <NA>), ``tid``,
    ``label_ns``, ``cuda_api_ns`` (summed calls on that thread starting inside the label;
    they do not nest), ``cuda_api_calls``, ``launch_calls`` (names containing ``Launch``),
    ``other_host_ns`` (``label_ns − cuda_api_ns``), ``cuda_api_share`` (0–1).

    Raises KitError when the trace has no such label.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> tr = open_capture("profiler_5step").trace
    >>> cuda_api_time_in_label(tr, "forward")[["step", "label_ns", "cuda_api_ns", "launch_calls"]].head(2)
       step  label_ns  cuda_api_ns  launch_calls
    0     2  32146161      3457962           232
    1     3  34678919      5049348           232
    """
    ops = trace.ops
    lab = ops[(ops["kind"] == "annotation") & (ops["name"] == label)].sort_values("start_ns")
    if lab.empty:
        raise KitError(f"{getattr(trace, 'path', 'trace')}: no {label!r} label (record_function) in this trace")
    api = trace.launches
    steps = trace.steps
    rows = []
    for r in lab.itertuples():
        end = r.start_ns + r.dur_ns
        inside = api[(api["tid"] == r.tid) & (api["start_ns"] >= r.start_ns) & (api["start_ns"] < end)]
        st = steps[(steps["start_ns"] <= r.start_ns) & (steps["end_ns"] > r.start_ns)]
        api_ns = int(inside["dur_ns"].sum())
        rows.append({"step": int(st["step"].iloc[0]) if len(st) else pd.NA, "tid": r.tid,
                     "label_ns": int(r.dur_ns), "cuda_api_ns": api_ns, "cuda_api_calls": len(inside),
                     "launch_calls": int(inside["name"].str.contains("Launch").sum()),
                     "other_host_ns": int(r.dur_ns) - api_ns})
    out = pd.DataFrame(rows)
    out["step"] = out["step"].astype("Int64")
    out["cuda_api_share"] = out["cuda_api_ns"] / out["label_ns"].where(out["label_ns"] > 0, np.nan)
    return out
