"""FLOP estimates: from the shapes in a trace, from FlopCounterMode, and against a peak rate.

``with_flops=True`` counts, from the recorded shapes, only these operators (:data:`COUNTED`):

==============================  ==============================================
operator                        floating-point operations counted
==============================  ==============================================
``aten::conv2d``                2 · N · H_out · W_out · K_h · K_w · C_in · C_out / groups
``aten::mm``, ``aten::addmm``   2 · M · K · N (``addmm``: 2nd and 3rd inputs)
``aten::bmm``, ``aten::baddbmm`` 2 · B · M · K · N
``aten::mul``, ``aten::add``    the number of elements of the first input
==============================  ==============================================

Everything else (backward included) counts 0. ``FlopCounterMode`` counts forward and
backward with its own formulas. Neither is a measurement: FLOPs over device time is an
achieved-rate *estimate*, and over a datasheet peak it is not "utilization".

Sources: docs/SOURCES.md#flops-with-flops
"""
from __future__ import annotations

import ast
import functools

import numpy as np
import pandas as pd

from ..errors import KitError
from ..model import Trace
from ..model.tree import ancestors
from ..model.window import step_of
from ..units import ns_to_ms

__all__ = ["profiler_flops", "flops_by_event", "flops_by_operator", "compare_flops_with_key_averages",
           "flop_counter_table", "device_time_covered",
           "achieved_tflops", "rate_estimates", "PEAK_TFLOPS", "peak_table", "peak_for"]

#: Operators that get a count from ``with_flops`` (PyTorch ``torch/csrc/profiler/util.cpp``).
COUNTED = ("aten::conv2d", "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::mul", "aten::add")


def _ints(text):
    """A concrete input as the trace writes it ('[2, 2]', '1', '') -> list/int/None."""
    if text is None or text == "":
        return None
    return _literal(text) if isinstance(text, str) else text


@functools.lru_cache(maxsize=4096)
def _literal(text: str):
    """``ast.literal_eval`` of one concrete input, cached; None when unreadable."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None


def _prod(dims) -> int:
    out = 1
    for d in dims:
        out *= int(d)
    return out


def profiler_flops(name: str, input_dims, concrete_inputs=None) -> int | None:
    """The FLOP count ``with_flops`` gives one call of operator ``name`` from its ``Input
    Dims`` and ``Concrete Inputs`` (needed for ``aten::conv2d``: stride, padding, dilation,
    groups at positions 3–6), in PyTorch's integer arithmetic.

    Returns the count; 0 where PyTorch gives 0 (empty shapes, a convolution whose padding,
    stride or dilation is not two numbers); None for an operator it does not count.

    Raises KitError for a counted operator without the shapes or arguments it needs.

    Examples
    --------
    >>> profiler_flops("aten::mm", [[2, 3], [3, 4]])       # 2 * 2 * 3 * 4
    48
    """
    if name not in COUNTED:
        return None
    dims = input_dims
    if not dims:
        raise KitError(f"{name}: no input shapes; record with record_shapes=True to estimate FLOPs")
    if name == "aten::conv2d":
        ci = concrete_inputs or []
        if len(ci) < 7 or all(_ints(ci[i]) is None for i in range(3, 7)):
            raise KitError(f"aten::conv2d: stride/padding/dilation/groups not in the trace's Concrete "
                           f"Inputs ({ci!r}); a trace from a PyTorch that records them is needed")
        stride, padding, dilation, groups = (_ints(ci[i]) for i in range(3, 7))
        x, w = dims[0], dims[1]
        # PyTorch gives 0 where padding, stride or dilation is not two numbers (padding="same")
        if any(not isinstance(v, (list, tuple)) or len(v) != 2 for v in (stride, padding, dilation)):
            return 0
        if len(x) != 4 or len(w) != 4 or not groups or stride[0] * stride[1] == 0:
            return 0
        n, c_in, h, wd = x
        c_out, _, kh, kw = w
        h_out = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
        w_out = (wd + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
        return 2 * n * h_out * w_out * kh * kw * c_in * c_out // groups
    if name in ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"):
        a, b = (dims[0], dims[1]) if name in ("aten::mm", "aten::bmm") else (dims[1], dims[2])
        if not a or a[-1] == 0 or (name in ("aten::bmm", "aten::baddbmm") and a[0] == 0):
            return 0
        f = _prod(a) // a[-1]
        if name in ("aten::bmm", "aten::baddbmm"):
            f //= a[0]
        return f * _prod(b) * 2
    # aten::mul, aten::add: one operation per element of the first input
    return _prod(dims[0])


def flops_by_event(trace: Trace) -> pd.DataFrame:
    """Every call of a :data:`COUNTED` operator with its count rebuilt from the shapes (calls
    folded into a same-named parent are left out, as in the profiler's table).

    Returns ``row`` (label in ``trace.ops``), ``name, start_ns, dur_ns, step`` (``<NA>``
    outside), ``input_dims, flops``.

    Raises KitError (naming the file and operator) when shapes are missing or unreadable.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> flops_by_event(trace_from_json(tiny_profile_doc()))[["name", "input_dims", "flops"]]
               name                                        input_dims  flops
    0  aten::conv2d  [[1, 3, 8, 8], [4, 3, 3, 3], [], [], [], [], []]   7776
    """
    ops = trace.ops
    # calls folded into a same-named parent are not rows of the profiler's table
    t = trace.host_events
    folded = t.loc[t["merged"].to_numpy() & (t["source"] == "ops").to_numpy(), "row"].to_numpy()
    sel = ops[ops["name"].isin(COUNTED) & (ops["kind"] == "op") & ~ops.index.isin(folded)]
    fl = []
    for n, d, c in zip(sel["name"], sel["input_dims"], sel["concrete_inputs"]):
        try:
            fl.append(profiler_flops(n, d, c))
        except KitError as e:
            raise KitError(f"{trace.path}: {e}") from None
        except (TypeError, ValueError, IndexError, AttributeError):
            raise KitError(f"{trace.path}: {n}: its Input Dims {str(d)[:60]!r} (Concrete Inputs {str(c)[:40]!r}) "
                           "cannot be read as tensor shapes") from None
    t = sel["start_ns"].to_numpy()
    return pd.DataFrame({"row": sel.index, "name": sel["name"].to_numpy(), "start_ns": t,
                         "dur_ns": sel["dur_ns"].to_numpy(),
                         "step": step_of(t, trace.steps),          # the step an operator starts in
                         "input_dims": sel["input_dims"].to_numpy(),
                         "flops": np.asarray(fl, dtype=np.int64)})


def flops_by_operator(trace: Trace, by_event: pd.DataFrame | None = None) -> pd.DataFrame:
    """The profiler's "Total FLOPs" column, rebuilt: per operator name, ``calls``, ``flops``
    (sum), ``flops_per_call``, largest first.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> flops_by_operator(open_capture("profiler_5step").trace).head(2)[["calls", "flops"]]
                  calls          flops
    name
    aten::conv2d    265  5231534407680
    aten::mm         10      529530880
    """
    ev = flops_by_event(trace) if by_event is None else by_event
    g = ev.groupby("name")["flops"].agg(calls="size", flops="sum")
    g["flops_per_call"] = g["flops"] / g["calls"]
    return g.sort_values("flops", ascending=False)


def compare_flops_with_key_averages(by_operator: pd.DataFrame, rows: list) -> pd.DataFrame:
    """Rebuilt FLOPs (:func:`flops_by_operator`) beside the ``flops`` of the profiler's
    ``key_averages()`` ``rows``: per name either side counts, ``calls, profiler_calls,
    flops, profiler_flops, match``. Raises KitError when the rows lack ``flops``.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> by_op = flops_by_operator(trace_from_json(tiny_profile_doc()))
    >>> compare_flops_with_key_averages(by_op, [{"key": "aten::conv2d", "count": 1, "flops": 7776}])
                  calls  profiler_calls  flops  profiler_flops  match
    name
    aten::conv2d      1               1   7776            7776   True
    """
    ka = pd.DataFrame(rows)
    if not {"key", "count", "flops"} <= set(ka.columns):
        raise KitError("key_averages rows lack 'flops': were they recorded with with_flops=True?")
    k = ka[(ka["flops"] > 0) | ka["key"].isin(by_operator.index)]
    k = k.groupby("key").agg(profiler_calls=("count", "max"), profiler_flops=("flops", "sum"))
    j = by_operator[["calls", "flops"]].join(k, how="outer")
    j = j[["calls", "profiler_calls", "flops", "profiler_flops"]]
    j["match"] = (j["flops"] == j["profiler_flops"]) & (j["calls"] == j["profiler_calls"])
    return j


def device_time_covered(trace: Trace, chain_df: pd.DataFrame | None = None) -> pd.DataFrame:
    """How much GPU time ran under an operator ``with_flops`` counts: each GPU event is
    followed to its launching operator and up its parents (:func:`kitlib.analyses.chain.chain`).

    Returns, indexed by the outermost ``aten::`` operator above the launch (``(no
    operator)`` without one): ``gpu_events``, ``device_time_ns``, ``counted`` (bool), by
    device time.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> device_time_covered(open_capture("profiler_5step").trace).head(2)
                                     gpu_events  device_time_ns  counted
    operator
    aten::convolution_backward             1080        63803899    False
    aten::cudnn_batch_norm_backward         530        36121634    False
    """
    from .chain import chain
    c = chain(trace) if chain_df is None else chain_df
    c = c[c["gpu_kind"] != "gpu_annotation"] if "gpu_kind" in c.columns else c
    ops = trace.ops
    parent, names = ops["parent"].to_numpy(), ops["name"].to_numpy()
    counted_set = set(COUNTED)
    cache: dict = {}

    def walk(r):
        if r not in cache:
            up = [names[k] for k in [r] + ancestors(parent, r)]        # the operator, then its callers
            aten = [n for n in up if isinstance(n, str) and n.startswith("aten::")]
            cache[r] = (aten[-1] if aten else names[r], any(n in counted_set for n in up))
        return cache[r]

    rows = c["op_row"].fillna(-1).astype(int).to_numpy()
    res = [walk(r) if r >= 0 else ("(no operator)", False) for r in rows]
    df = pd.DataFrame({"operator": [a for a, _ in res], "counted": [b for _, b in res],
                       "device_time_ns": c["gpu_dur_ns"].to_numpy(dtype=np.int64)})
    g = df.groupby("operator").agg(gpu_events=("counted", "size"), device_time_ns=("device_time_ns", "sum"),
                                   counted=("counted", "max"))
    return g.sort_values("device_time_ns", ascending=False)


# -- FlopCounterMode ---------------------------------------------------------------

_BACKWARD_OPS = {"aten.convolution_backward", "aten.mm"}


def flop_counter_table(counts: dict) -> pd.DataFrame:
    """A ``FlopCounterMode`` result (``{"total": …, "by_op": {op: flops}}``) as a table.

    Returns, indexed by ATen op, by flops: ``flops``, ``tflop`` (10¹²), ``share``, ``pass``
    (``backward`` for ``convolution_backward``, ``mm`` and ``*_backward``, else ``forward``).

    Raises KitError when ``by_op`` is missing or the parts do not add up to ``total``.

    Examples
    --------
    >>> counts = {"total": 3000, "by_op": {"aten.convolution": 1000, "aten.convolution_backward": 2000}}
    >>> flop_counter_table(counts)[["flops", "share", "pass"]]
                               flops     share      pass
    aten.convolution_backward   2000  0.666667  backward
    aten.convolution            1000  0.333333   forward
    """
    if not isinstance(counts, dict) or "by_op" not in counts:
        raise KitError("not a FlopCounterMode result: expected a dict with 'total' and 'by_op'")
    s = pd.Series({str(k): int(v) for k, v in counts["by_op"].items()}, name="flops", dtype="int64")
    if "total" in counts and int(s.sum()) != int(counts["total"]):
        raise KitError(f"FlopCounterMode parts add up to {int(s.sum())}, not the total {counts['total']}")
    df = s.to_frame()
    df["tflop"] = df["flops"] / 1e12
    df["share"] = df["flops"] / df["flops"].sum()
    df["pass"] = ["backward" if k in _BACKWARD_OPS or k.endswith("_backward") else "forward" for k in df.index]
    return df.sort_values("flops", ascending=False)


def achieved_tflops(flops: float, device_time_ns: float) -> float:
    """An achieved-rate *estimate*: FLOPs / device time, in TFLOP/s. Raises KitError unless the time is positive.

    Examples
    --------
    >>> achieved_tflops(2e12, 1e9)          # 2e12 FLOPs in one second
    2.0
    """
    if not device_time_ns or device_time_ns <= 0:
        raise KitError(f"device time must be positive to get a rate, not {device_time_ns!r} ns")
    return float(flops) / (float(device_time_ns) * 1e-9) / 1e12


# -- peak rates --------------------------------------------------------------------

_HGX = ("NVIDIA HGX platform page, spec table (8-GPU figures; per GPU = ÷ 8; tensor-core figures "
        "are 'with sparsity', dense = ÷ 2): https://www.nvidia.com/en-us/data-center/hgx/")
#: Peak *dense* rates in TFLOP/s per GPU (SXM parts), with where each comes from
#: (the "with sparsity" figures halved: docs/SOURCES.md#flops-with-flops).
PEAK_TFLOPS = {
    "B300": {"FP32": 75.0, "TF32": 1125.0, "BF16": 2250.0, "source": "HGX B300: FP32 600 TFLOPS, TF32 18 PFLOPS*, "
             "BF16 36 PFLOPS* for 8 GPUs (*with sparsity). " + _HGX},
    "B200": {"FP32": 75.0, "TF32": 1125.0, "BF16": 2250.0, "source": "HGX B200: FP32 600 TFLOPS, TF32 18 PFLOPS*, "
             "BF16 36 PFLOPS* for 8 GPUs (*with sparsity). " + _HGX},
    "H200": {"FP32": 67.0, "TF32": 494.5, "BF16": 989.5, "source": "NVIDIA H200 Tensor Core GPU datasheet / product "
             "page, H200 SXM: FP32 67 TFLOPS, TF32 989 TFLOPS*, BF16 1,979 TFLOPS* (*with sparsity): "
             "https://www.nvidia.com/en-us/data-center/h200/"},
    "H100": {"FP32": 67.0, "TF32": 494.5, "BF16": 989.5, "source": "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: "
             "FP32 67 TFLOPS, TF32 989 TFLOPS*, BF16 1,979 TFLOPS* (*with sparsity): "
             "https://www.nvidia.com/en-us/data-center/h100/"},
    "A100": {"FP32": 19.5, "TF32": 156.0, "BF16": 312.0, "source": "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB): "
             "FP32 19.5 TFLOPS, TF32 156 TFLOPS (312* with sparsity), BF16 312 TFLOPS (624*): "
             "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
             "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"},
}


def peak_for(gpu_name: str | None) -> tuple[str | None, dict | None]:
    """``(key, rates)`` of a GPU name (as ``torch.cuda.get_device_name()`` writes it) in
    :data:`PEAK_TFLOPS`; ``(None, None)`` when unknown or a PCIe/NVL H100/H200.

    Examples
    --------
    >>> peak_for("NVIDIA H100 80GB HBM3")[0]
    'H100'
    """
    if not gpu_name:
        return None, None
    up = str(gpu_name).upper()
    for key in PEAK_TFLOPS:
        if key in up:
            if key in ("H100", "H200") and ("PCIE" in up or "NVL" in up):
                return None, None
            return key, PEAK_TFLOPS[key]
    return None, None


def peak_table(own_gpu: str | None = None, who: str = "the capture's GPU") -> pd.DataFrame:
    """Dense peak rates of B300, B200, H200, H100, A100 and ``own_gpu`` (renamed
    ``<key> = <who> (<name>)`` when known, else added with NaN figures).

    Returns, indexed by GPU: ``FP32_tflops, TF32_tflops, BF16_tflops`` (TFLOP/s per GPU), ``source``.

    Examples
    --------
    >>> peak_table()[["FP32_tflops", "TF32_tflops", "BF16_tflops"]]
          FP32_tflops  TF32_tflops  BF16_tflops
    B300         75.0       1125.0       2250.0
    B200         75.0       1125.0       2250.0
    H200         67.0        494.5        989.5
    H100         67.0        494.5        989.5
    A100         19.5        156.0        312.0
    """
    rows = {k: {"FP32_tflops": v["FP32"], "TF32_tflops": v["TF32"], "BF16_tflops": v["BF16"],
                "source": v["source"]} for k, v in PEAK_TFLOPS.items()}
    df = pd.DataFrame.from_dict(rows, orient="index")
    if own_gpu is not None:
        key, v = peak_for(own_gpu)
        if v:
            df = df.rename(index={key: f"{key} = {who} ({own_gpu})"})
        else:
            df.loc[f"{who} ({own_gpu})"] = [np.nan, np.nan, np.nan,
                                             "not in the table: look up its datasheet (dense figures)"]
    return df


def rate_estimates(trace: Trace, counts: dict | None = None, covered: pd.DataFrame | None = None,
                   by_operator: pd.DataFrame | None = None) -> pd.DataFrame:
    """Achieved-rate *estimates* per recorded step: ``forward convolutions (with_flops)``
    (``aten::conv2d`` FLOPs over its kernels' device time) and, with ``counts`` (a
    FlopCounterMode result), ``whole training step (FlopCounterMode)`` (its total over the
    GPU's busy time of work launched in the window). ``covered`` and ``by_operator`` reuse
    :func:`device_time_covered` and :func:`flops_by_operator`.

    Returns ``tflop_per_step`` (10¹²), ``device_ms_per_step``, ``tflops_estimate`` (TFLOP/s).

    Raises KitError when the trace has no steps or no GPU events.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> rate_estimates(trace_from_json(tiny_profile_doc()))[["device_ms_per_step", "tflops_estimate"]]
                                       device_ms_per_step  tflops_estimate
    forward convolutions (with_flops)               0.004         0.001944
    """
    from .intervals import busy_ns
    n_steps = len(trace.steps)
    if not n_steps or not trace.has_gpu:
        raise KitError(f"{trace.path}: rates need ProfilerStep#N annotations and GPU events")
    bo = flops_by_operator(trace) if by_operator is None else by_operator
    cov = device_time_covered(trace) if covered is None else covered
    conv_flops = float(bo.loc["aten::conv2d", "flops"]) if "aten::conv2d" in bo.index else 0.0
    conv_ns = float(cov.loc["aten::conv2d", "device_time_ns"]) if "aten::conv2d" in cov.index else np.nan
    rows = {"forward convolutions (with_flops)": (conv_flops / n_steps, conv_ns / n_steps)}
    if counts is not None:
        k = trace.kernels
        # GPU work launched inside the window only
        from .chain import chain
        c = chain(trace)
        mine = c[c["launch_row"] >= 0]
        busy = busy_ns(k.loc[mine["gpu_row"].astype(int)])
        rows["whole training step (FlopCounterMode)"] = (float(counts["total"]), busy / n_steps)
    df = pd.DataFrame.from_dict(rows, orient="index", columns=["flops_per_step", "device_ns_per_step"])
    out = pd.DataFrame({"tflop_per_step": df["flops_per_step"] / 1e12,
                        "device_ms_per_step": ns_to_ms(df["device_ns_per_step"])})
    out["tflops_estimate"] = df["flops_per_step"] / (df["device_ns_per_step"] * 1e-9) / 1e12
    return out
