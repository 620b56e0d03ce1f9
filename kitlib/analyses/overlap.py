"""Kernels that start before the previous kernel on their stream has finished.

On one CUDA stream, work normally runs in launch order, each kernel after the
previous one has completed. A trace that shows a kernel starting *before* its
predecessor on the same stream ends therefore needs an explanation; on Hopper GPUs
one is programmatic dependent launch, which lets a kernel launched with that attribute
(through ``cudaLaunchKernelExC``) begin while the kernel before it finishes. The trace
does not record launch attributes, so this module reports what it can: which launches
produced the overlapping kernels (lesson 03).
"""
from __future__ import annotations

import pandas as pd


def same_stream_overlaps(chain_df: pd.DataFrame) -> pd.DataFrame:
    """GPU kernels that begin before an earlier kernel on the same stream has ended.

    Parameters
    ----------
    chain_df : DataFrame
        :func:`kitlib.analyses.chain.chain` of a trace (``gpu_kind``, ``stream``,
        ``device``, ``gpu_start_ns``, ``gpu_dur_ns``, ``gpu_name``, ``launch_name``).

    Returns
    -------
    DataFrame, one row per overlapping kernel, in start order
        ``device``, ``stream``, ``gpu_name``, ``gpu_start_ns``, ``gpu_dur_ns``,
        ``launch_name`` (the CUDA API call that launched it; <NA> when not linked) and
        ``overlap_ns`` (how long it ran while an earlier kernel of its stream was still
        running).

    Examples
    --------
    >>> import pandas as pd
    >>> from kitlib.analyses.overlap import same_stream_overlaps
    >>> chain_df = pd.DataFrame({"gpu_kind": ["kernel", "kernel", "kernel"], "device": 0, "stream": 7,
    ...                          "gpu_name": ["a", "b", "c"], "gpu_start_ns": [0, 80, 200],
    ...                          "gpu_dur_ns": [100, 50, 10], "launch_name": "cudaLaunchKernel"})
    >>> same_stream_overlaps(chain_df)[["gpu_name", "gpu_start_ns", "gpu_dur_ns", "overlap_ns"]]
      gpu_name  gpu_start_ns  gpu_dur_ns  overlap_ns
    0        b            80          50          20
    """
    k = chain_df[chain_df["gpu_kind"] == "kernel"].sort_values(["gpu_start_ns", "gpu_dur_ns"])
    end = k["gpu_start_ns"] + k["gpu_dur_ns"]
    prev_end = end.groupby([k["device"], k["stream"]]).transform(lambda e: e.cummax().shift())
    hit = k["gpu_start_ns"] < prev_end
    out = k.loc[hit, ["device", "stream", "gpu_name", "gpu_start_ns", "gpu_dur_ns", "launch_name"]].copy()
    out["overlap_ns"] = (pd.concat([prev_end[hit], end[hit]], axis=1).min(axis=1) - out["gpu_start_ns"]).astype("int64")
    return out.reset_index(drop=True)
