"""FLOP estimates: from the shapes in a trace, from FlopCounterMode, and against a peak rate.

``torch.profiler.profile(with_flops=True)`` does no measuring: when an operator
starts, it saves a few input shapes and arguments (``saveExtraArgs``) and, for a
short list of operator names, turns them into a count with a formula
(``computeFlops``; both in PyTorch's ``torch/csrc/profiler/util.cpp``):

==============================  ==============================================
operator (``fn.name()``)        floating-point operations counted
==============================  ==============================================
``aten::conv2d``                2 · N · H_out · W_out · K_h · K_w · C_in · C_out / groups,
                                H_out = (H + 2·pad − dil·(K_h − 1) − 1) // stride + 1
``aten::mm``, ``aten::addmm``   2 · M · K · N (for ``addmm`` the 2nd and 3rd inputs;
                                the bias addition is not counted)
``aten::bmm``, ``aten::baddbmm`` 2 · B · M · K · N
``aten::mul``, ``aten::add``    the number of elements of the first input
==============================  ==============================================

Everything else counts 0: batch norm, ReLU, pooling, the loss, the optimizer, and
every backward operator (``aten::convolution_backward``) — so on a training step
the profiler's FLOPs are mostly the *forward* convolutions. The count goes on the
operator with that exact name (``aten::conv2d``), not on the ``cudnn_convolution``
inside it that launches the kernels.

``torch.utils.flop_counter.FlopCounterMode`` counts differently: it intercepts
every ATen call of forward *and* backward (``aten.convolution``,
``aten.convolution_backward``, ``aten.mm``, ``aten.addmm`` …) with its own
formulas, and gives the whole training step.

Neither is a measurement of the hardware. Dividing by device time gives an
*achieved rate estimate*; dividing that by a datasheet peak is not "utilization"
(the count skips work, the kernels may do more or less than the formula, and the
peak assumes the tensor cores are fed every cycle at the boost clock).
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
    """``ast.literal_eval`` of one concrete input, once per distinct text (a trace
    repeats the same few strides and paddings on every step); None when unreadable."""
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
    """The FLOP count ``with_flops`` gives one call of an operator.

    Parameters
    ----------
    name : str
        Operator name as in the trace (``aten::conv2d`` …).
    input_dims : list of list of int
        The trace's ``Input Dims`` (``record_shapes=True``).
    concrete_inputs : list of str, optional
        The trace's ``Concrete Inputs`` (scalar arguments as text); needed for
        ``aten::conv2d`` (stride, padding, dilation, groups at positions 3–6).

    Returns
    -------
    int or None
        The count (integer arithmetic as PyTorch's ``computeFlops``: ``uint64``,
        divisions truncated in the same order); 0 where PyTorch gives 0 (empty
        shapes; a convolution whose padding, stride or dilation is not two numbers, as
        with ``padding="same"``, which the trace records as an empty Concrete Input);
        None for an operator ``with_flops`` does not count.

    Raises
    ------
    KitError
        A counted operator without the shapes or arguments the formula needs
        (recorded without ``record_shapes``; a convolution from a PyTorch that writes no
        Concrete Inputs for stride, padding, dilation and groups).

    Examples
    --------
    >>> from kitlib.analyses.flops import profiler_flops
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
        # PyTorch gives 0 (and warns) where padding, stride or dilation is not two numbers:
        # padding="same" or "valid" is text, which Concrete Inputs leave empty ('')
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
    """Every operator call ``with_flops`` counts, with its count rebuilt from the shapes.

    Raises :class:`~kitlib.errors.KitError` (naming the file and operator) when the
    shapes are missing (recorded without ``record_shapes``) or cannot be read.

    Calls that the profiler folds into a same-named parent (``trace.host_events.merged``)
    are left out, as they are not rows of its table.

    Returns
    -------
    DataFrame, one row per call of a counted operator (see :data:`COUNTED`)
        ``row`` (label in ``trace.ops``), ``name``, ``start_ns``, ``dur_ns``, ``step``
        (the ``ProfilerStep#N`` containing it, ``<NA>`` outside), ``input_dims``,
        ``flops``.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> tr = open_capture("profiler_5step").trace
    >>> from kitlib.analyses.flops import flops_by_event
    >>> ev = flops_by_event(tr)
    >>> len(ev), ev.columns.tolist()
    (280, ['row', 'name', 'start_ns', 'dur_ns', 'step', 'input_dims', 'flops'])
    """
    ops = trace.ops
    # a call folded into a same-named parent (aten::mul inside aten::mul) is not a row
    # of the profiler's table: its FLOPs are not counted again (_remove_dup_nodes)
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
    """The profiler's "Total FLOPs" column, rebuilt: per operator name, summed over calls.

    Returns
    -------
    DataFrame indexed by operator name
        ``calls``, ``flops`` (sum over calls), ``flops_per_call`` (mean), sorted by
        ``flops``, largest first.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> tr = open_capture("profiler_5step").trace
    >>> from kitlib.analyses.flops import flops_by_operator
    >>> flops_by_operator(tr).head(2)[["calls", "flops"]]
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
    """Rebuilt FLOPs beside the profiler's own ``flops`` of each ``key_averages()`` row.

    Parameters
    ----------
    by_operator : DataFrame
        From :func:`flops_by_operator`.
    rows : list of dict
        ``key_averages()`` rows with ``key``, ``count``, ``flops`` (a bundle's
        ``key_averages()["by_name"]``).

    Returns
    -------
    DataFrame indexed by name, for every operator either side counts
        ``calls``, ``profiler_calls``, ``flops``, ``profiler_flops``, ``match``.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> from kitlib.analyses.flops import compare_flops_with_key_averages, flops_by_operator
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
    """How much GPU time ran under an operator that ``with_flops`` counts, and how much did not.

    Each kernel, copy or set is followed to the operator that launched it (see
    :func:`kitlib.analyses.chain.chain`) and up that operator's parents; it is *counted*
    when one of them is in :data:`COUNTED` (the ``cudnn_convolution`` kernels sit
    under ``aten::conv2d``).

    Returns
    -------
    DataFrame indexed by the outermost ``aten::`` operator above the launch
    (``aten::batch_norm``, ``aten::convolution_backward`` …; ``(no operator)`` for
    GPU events with no launching operator in the window)
        ``gpu_events``, ``device_time_ns`` (summed), ``counted`` (bool), sorted by
        device time.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> tr = open_capture("profiler_5step").trace
    >>> from kitlib.analyses.flops import device_time_covered
    >>> device_time_covered(tr).head(2)
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

    Parameters
    ----------
    counts : dict
        As written by the reference ``flop_counter_one_step.json`` or returned by
        :func:`flop_counter_step`.

    Returns
    -------
    DataFrame indexed by ATen op (``aten.convolution`` …)
        ``flops``, ``tflop`` (10¹²), ``share`` (of the total), ``pass``
        (``forward`` or ``backward``: ``convolution_backward`` and the two ``mm`` of
        the linear layer's backward are backward; ``convolution`` and ``addmm``
        forward). Sorted by flops.

    Raises
    ------
    KitError
        ``counts`` lacks ``by_op``, or its parts do not add up to ``total``.

    Examples
    --------
    >>> from kitlib.analyses.flops import flop_counter_table
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
    """An achieved-rate *estimate*: FLOPs / device time, in TFLOP/s (10¹² per second).

    Raises
    ------
    KitError
        ``device_time_ns`` not positive.

    Examples
    --------
    >>> from kitlib.analyses.flops import achieved_tflops
    >>> achieved_tflops(2e12, 1e9)          # 2e12 FLOPs in one second
    2.0
    """
    if not device_time_ns or device_time_ns <= 0:
        raise KitError(f"device time must be positive to get a rate, not {device_time_ns!r} ns")
    return float(flops) / (float(device_time_ns) * 1e-9) / 1e12


# -- peak rates --------------------------------------------------------------------

_HGX = ("NVIDIA HGX platform page, spec table (8-GPU figures; per GPU = ÷ 8; tensor-core figures "
        "are 'with sparsity', dense = ÷ 2): https://www.nvidia.com/en-us/data-center/hgx/")
#: Peak *dense* rates in TFLOP/s per GPU (SXM parts), with where each comes from.
#: NVIDIA quotes tensor-core rates "with sparsity" (2:4 structured sparsity doubles
#: them); these are the dense halves, the ones a ResNet-50 training step can reach.
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
    """Look a GPU's name (as ``torch.cuda.get_device_name()`` writes it) up in :data:`PEAK_TFLOPS`.

    Returns
    -------
    (key, rates) or (None, None)
        None for an unknown GPU, and for PCIe/NVL variants of H100/H200, whose
        peaks are lower than the SXM figures in the table.

    Examples
    --------
    >>> from kitlib.analyses.flops import peak_for
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
    """Dense peak rates (TFLOP/s) of B300, B200, H200, H100, A100 and the capture's GPU.

    Parameters
    ----------
    own_gpu : str, optional
        The capture's GPU name (in live mode, this machine's). When :func:`peak_for`
        knows it, its table row is renamed ``<key> = <who> (<name>)`` (one row per
        GPU, no duplicate); otherwise a row ``<who> (<name>)`` with NaN figures is added.
    who : str
        How to call that GPU in the label (default ``"the capture's GPU"``).

    Returns
    -------
    DataFrame indexed by GPU
        ``FP32_tflops``, ``TF32_tflops``, ``BF16_tflops`` (dense, per GPU) and ``source``.

    Examples
    --------
    >>> from kitlib.analyses.flops import peak_table
    >>> peak_table()[["FP32_tflops", "TF32_tflops", "BF16_tflops"]]
          FP32_tflops  TF32_tflops  BF16_tflops
    B300         75.0       1125.0       2250.0
    B200         75.0       1125.0       2250.0
    H200         67.0        494.5        989.5
    H100         67.0        494.5        989.5
    A100         19.5        156.0        312.0
    >>> peak_table("NVIDIA H200").index[2]
    "H200 = the capture's GPU (NVIDIA H200)"
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
    """Achieved-rate *estimates* per recorded step: counted FLOPs over the device time they took.

    Two rows:

    - ``forward convolutions (with_flops)``: the profiler's ``aten::conv2d`` FLOPs
      (rebuilt from shapes) over the device time of the kernels launched under
      ``aten::conv2d``;
    - ``whole training step (FlopCounterMode)``: ``counts["total"]`` (one step) over
      the GPU's busy time per step (union of all kernels, copies and sets of the
      recorded steps, divided by the number of steps).

    Parameters
    ----------
    trace : Trace
    counts : dict, optional
        A FlopCounterMode result (see :func:`flop_counter_table`); without it only the
        first row.
    covered, by_operator : DataFrame, optional
        :func:`device_time_covered` and :func:`flops_by_operator` results to reuse.

    Returns
    -------
    DataFrame indexed by what was counted
        ``tflop_per_step`` (10¹²), ``device_ms_per_step``, ``tflops_estimate``
        (TFLOP/s). Per step = divided by the number of ``ProfilerStep#N`` in the trace.

    Raises
    ------
    KitError
        The trace has no steps or no GPU events.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> from kitlib.analyses.flops import rate_estimates
    >>> rate_estimates(trace_from_json(tiny_profile_doc()), counts={"total": 20000, "by_op": {}})[["device_ms_per_step", "tflops_estimate"]]
                                           device_ms_per_step  tflops_estimate
    forward convolutions (with_flops)                   0.004         0.001944
    whole training step (FlopCounterMode)               0.005         0.004000
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
        # GPU work launched inside the window (the warm-up step's tail, launched
        # before recording began, is left out)
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
