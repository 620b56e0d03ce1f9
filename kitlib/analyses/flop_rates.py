"""Achieved FLOP rates, each one counted FLOPs over the device time of the same work.

A rate is only as good as its pairing: FLOPs of some operators over the device time of
*the kernels those operators launched*; a whole step's FLOPs over the convolutions' time
mixes two sets of work.
"""
from __future__ import annotations

import pandas as pd

from ..errors import KitError
from ..units import ns_to_ms


def matched_rates(trace, counts: dict, covered: pd.DataFrame | None = None,
                  by_operator: pd.DataFrame | None = None) -> pd.DataFrame:
    """Three achieved-rate estimates per step of ``trace`` (recorded with ``record_shapes``
    and ``with_flops``), each with its FLOPs and its time named. ``counts``: a
    FlopCounterMode count of one step (``total``, ``by_op``); ``covered`` and
    ``by_operator`` reuse :func:`~kitlib.analyses.flops.device_time_covered` and
    :func:`~kitlib.analyses.flops.flops_by_operator`.

    Returns, indexed by ``work`` (``forward convolutions``, ``convolutions, forward +
    backward``, ``whole step``): ``flops_from, time_of`` (the pairing, in words),
    ``tflop_per_step`` (10¹²), ``device_ms_per_step``, ``tflops_estimate`` (TFLOP/s).

    Raises KitError when the trace has no steps or no convolution device time.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> counts = {"total": 20000, "by_op": {"aten.convolution": 7776, "aten.convolution_backward": 0}}
    >>> matched_rates(trace_from_json(tiny_profile_doc()), counts)["tflops_estimate"].round(6).tolist()
    [0.001944, 0.001944, 0.004]
    """
    from .chain import chain
    from .flops import device_time_covered, flops_by_operator
    from .intervals import busy_ns
    n = len(trace.steps)
    if not n:
        raise KitError(f"{getattr(trace, 'path', 'trace')}: rates per step need ProfilerStep#N annotations")
    cov = device_time_covered(trace) if covered is None else covered
    bo = flops_by_operator(trace) if by_operator is None else by_operator
    dev = cov["device_time_ns"]
    if "aten::conv2d" not in dev.index:
        raise KitError(f"{getattr(trace, 'path', 'trace')}: no device time under aten::conv2d")
    by_op = counts.get("by_op", {})
    c = chain(trace)
    mine = c[c["launch_row"] >= 0]
    step_busy = busy_ns(trace.gpu.loc[mine["gpu_row"].astype(int)])
    rows = [
        ("forward convolutions", "with_flops: aten::conv2d", "kernels under aten::conv2d",
         float(bo.loc["aten::conv2d", "flops"]) / n, float(dev["aten::conv2d"]) / n),
        ("convolutions, forward + backward", "FlopCounterMode: aten.convolution + aten.convolution_backward",
         "kernels under aten::conv2d and aten::convolution_backward",
         float(by_op.get("aten.convolution", 0) + by_op.get("aten.convolution_backward", 0)),
         float(dev["aten::conv2d"] + dev.get("aten::convolution_backward", 0)) / n),
        ("whole step", "FlopCounterMode: total", "GPU busy time (every kernel, copy and memset launched in the window)",
         float(counts["total"]), float(step_busy) / n),
    ]
    out = pd.DataFrame(rows, columns=["work", "flops_from", "time_of", "flops", "device_ns"]).set_index("work")
    out["tflop_per_step"] = out["flops"] / 1e12
    out["device_ms_per_step"] = ns_to_ms(out["device_ns"])
    out["tflops_estimate"] = out["flops"] / (out["device_ns"] * 1e-9) / 1e12
    return out.drop(columns=["flops", "device_ns"])
