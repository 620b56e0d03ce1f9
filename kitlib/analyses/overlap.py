"""Kernels that start before the previous kernel on their stream has finished.

On Hopper, programmatic dependent launch (``cudaLaunchKernelExC``) lets a kernel begin
while the one before it on its stream finishes; the trace does not record launch attributes.
"""
from __future__ import annotations

import pandas as pd


def same_stream_overlaps(chain_df: pd.DataFrame) -> pd.DataFrame:
    """Kernels of a :func:`kitlib.analyses.chain.chain` table that begin before an earlier
    kernel on the same device and stream has ended, in start order: ``device, stream,
    gpu_name, gpu_start_ns, gpu_dur_ns, launch_name`` (<NA> when not linked) and
    ``overlap_ns`` (time it ran beside an earlier kernel of its stream).

    Examples
    --------
    >>> chain_df = pd.DataFrame({"gpu_kind": ["kernel", "kernel", "kernel"], "device": 0, "stream": 7,
    ...                          "gpu_name": ["a", "b", "c"], "gpu_start_ns": [0, 80, 200],
    ...                          "gpu_dur_ns": [100, 50, 10], "launch_name": "cudaLaunchKernel"})
    >>> same_stream_overlaps(chain_df)[["gpu_name", "gpu_start_ns", "overlap_ns"]]
      gpu_name  gpu_start_ns  overlap_ns
    0        b            80          20
    """
    k = chain_df[chain_df["gpu_kind"] == "kernel"].sort_values(["gpu_start_ns", "gpu_dur_ns"])
    end = k["gpu_start_ns"] + k["gpu_dur_ns"]
    prev_end = end.groupby([k["device"], k["stream"]]).transform(lambda e: e.cummax().shift())
    hit = k["gpu_start_ns"] < prev_end
    out = k.loc[hit, ["device", "stream", "gpu_name", "gpu_start_ns", "gpu_dur_ns", "launch_name"]].copy()
    out["overlap_ns"] = (pd.concat([prev_end[hit], end[hit]], axis=1).min(axis=1) - out["gpu_start_ns"]).astype("int64")
    return out.reset_index(drop=True)
