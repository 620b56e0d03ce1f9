"""Which line of my code is responsible? Operators traced back to Python call sites.

With ``with_stack=True`` the profiler records every Python function call as a
``python_function`` event. Each carries ``Python id`` and ``Python parent id``,
so the events form a tree per thread (the call tree of the program), and an
operator's Python stack is the chain of frames that enclose it in time on its
own thread: the innermost (``<built-in method conv2d …>``) first, then
``torch/nn/modules/conv.py(534): _conv_forward``, ``nn.Module: Conv2d_0`` (a
pseudo-frame the tracer adds for each module call), …, up to the script's
``<module>``.

Operators of the backward pass run on autograd's own thread, where no Python
runs: like the profiler, kitlib gives an operator under a backward node (e.g.
``ConvolutionBackward0``) the stack of the forward operator with the same
sequence number.

Frame names are ``path(line): function``. The line is where the frame was
entered — the first line of the function (``def step():`` in the reference's
``capture_tables.py`` is line 15, and every operator of the step shows
``capture_tables.py(15): step``) — not the statement that made the call: a frame
names a *function*; the frame inside it (a module pseudo-frame, or the next
function) says which call. The path is relative to the
``sys.path`` entry it was found under (``torch/nn/modules/conv.py``,
``torchvision/models/resnet.py``, ``train.py``). A *user* frame is one that is not
PyTorch's own (``torch/…``), not the standard library (``typing.py``,
``<frozen os>``), not a C function (``<built-in …>``) and not a module
pseudo-frame; pass ``internal=`` to also skip, say, ``torchvision/``.

Sources: PyTorch docs, "torch.profiler" (``with_stack``, ``group_by_stack_n``);
``torch/autograd/profiler_util.py`` (``_filter_stack_entry``,
``_set_backward_stacktraces``); the reference trace
``data/reference/fixed_batch/trace.json.gz`` (tests/analyses/test_grouping.py).
"""
from __future__ import annotations

import re
import sys

import numpy as np
import pandas as pd

from .events import op_events, op_stacks
from ..model import Trace

#: Path prefixes of frames that are PyTorch's own code, not the learner's.
TORCH_INTERNAL = ("torch/",)
_FRAME_RE = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<function>.+)$")
_MODULE_PREFIX = "nn.Module: "


def parse_frame(frame: str) -> dict:
    """Split ``"torchvision/models/resnet.py(266): _forward_impl"`` into
    ``{"file": ..., "line": 266, "function": ...}`` (``line`` None when the frame
    is not a source line, e.g. ``<built-in method conv2d …>``).

    Examples
    --------
    >>> from kitlib.analyses.callsites import parse_frame
    >>> parse_frame("model.py(12): forward")
    {'file': 'model.py', 'line': 12, 'function': 'forward'}
    """
    m = _FRAME_RE.match(frame or "")
    if not m:
        return {"file": None, "line": None, "function": frame}
    return {"file": m["file"], "line": int(m["line"]), "function": m["function"]}


def is_user_frame(frame: str, internal=TORCH_INTERNAL) -> bool:
    """Whether a Python frame name is the learner's code.

    False for C functions (``<built-in …>``), frozen modules (``<frozen os>``), module
    pseudo-frames (``nn.Module: …``), files under any prefix in ``internal`` (default
    ``torch/``), installed packages' absolute paths (``site-packages``/``dist-packages``)
    and the standard library (top-level name in ``sys.stdlib_module_names``).

    Examples
    --------
    >>> from kitlib.analyses.callsites import is_user_frame
    >>> is_user_frame("model.py(5): forward")
    True
    >>> is_user_frame("torch/nn/modules/conv.py(549): forward"), is_user_frame("<built-in method conv2d>")
    (False, False)
    """
    f = parse_frame(frame)["file"]
    if f is None or f.startswith("<"):
        return False
    if any(f.startswith(p) for p in internal) or "site-packages/" in f or "dist-packages/" in f:
        return False
    top = f.replace("\\", "/").split("/")[0]
    top = top[:-3] if top.endswith(".py") else top
    return top not in getattr(sys, "stdlib_module_names", ())


def callsites(trace: Trace, events: pd.DataFrame | None = None, internal=TORCH_INTERNAL) -> pd.DataFrame:
    """For every host event: its innermost user-code frame and the ``nn.Module`` it ran under.

    Parameters
    ----------
    events : DataFrame, optional
        :func:`kitlib.analyses.events.op_events` (computed when absent).
    internal : tuple of str
        Path prefixes that are not the learner's code (default ``("torch/",)``).

    Returns
    -------
    DataFrame
        The ``events`` rows (same order) with ``stack`` (tuple, innermost first, backward
        operators inheriting their forward operator's), ``user_frame`` (innermost user
        frame, or the innermost source-line frame when no frame is the user's; None
        without Python frames), ``file``, ``line``, ``function`` (parsed from it),
        ``module`` (innermost ``nn.Module`` pseudo-frame without the prefix, e.g.
        ``Conv2d_0``), ``module_type`` (its class, ``Conv2d``) and ``module_path`` (outermost → innermost, joined by ``" › "``).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> from kitlib.analyses.callsites import callsites
    >>> callsites(trace_from_json(tiny_profile_doc()))[["name", "user_frame", "module"]]
                   name            user_frame module
    0    ProfilerStep#1                   NaN    NaN
    1           forward  model.py(5): forward  Net_0
    2      aten::conv2d  model.py(5): forward  Net_0
    3  cudaLaunchKernel  model.py(5): forward  Net_0
    4        aten::relu  model.py(5): forward  Net_0
    5  cudaLaunchKernel  model.py(5): forward  Net_0
    """
    ev = op_events(trace) if events is None else events
    stacks = op_stacks(trace, ev, filtered=False)
    user, mod, path = [], [], []
    user_frame: dict = {}           # frame -> is_user_frame; stacks repeat every step
    site: dict = {}                 # stack -> (user frame, module, module path)
    for s in stacks:
        hit = site.get(s)
        if hit is None:
            for f in s:
                if f not in user_frame:
                    user_frame[f] = is_user_frame(f, internal)
            u = next((f for f in s if user_frame[f]), None)
            if u is None:
                u = next((f for f in s if parse_frame(f)["line"] is not None), None)
            mods = [f[len(_MODULE_PREFIX):] for f in s if f.startswith(_MODULE_PREFIX)]
            hit = site[s] = (u, mods[0] if mods else None, " › ".join(reversed(mods)) if mods else None)
        user.append(hit[0])
        mod.append(hit[1])
        path.append(hit[2])
    out = ev.copy()
    out["stack"] = stacks
    out["user_frame"] = user
    parsed_of: dict = {}
    parsed = [parsed_of[u] if u in parsed_of else parsed_of.setdefault(u, parse_frame(u)) if u
              else {"file": None, "line": None, "function": None} for u in user]
    out["file"] = [p["file"] for p in parsed]
    out["line"] = pd.array([p["line"] for p in parsed], dtype="Int64")
    out["function"] = [p["function"] for p in parsed]
    out["module"] = mod
    out["module_type"] = [re.sub(r"_\d+$", "", m) if m else None for m in mod]
    out["module_path"] = path
    return out


def callsite_of(trace: Trace, op_row: int, table: pd.DataFrame | None = None, internal=TORCH_INTERNAL) -> dict:
    """The call site of one operator.

    Parameters
    ----------
    op_row : int
        Row label in ``trace.ops`` (e.g. :func:`kitlib.analyses.chain.first_op`).
    table : DataFrame, optional
        A :func:`callsites` result to reuse.

    Returns
    -------
    dict
        ``name``, ``user_frame``, ``file``, ``line``, ``function``, ``module``,
        ``module_type``, ``module_path``, ``stack`` (tuple, innermost first).

    Raises
    ------
    KeyError
        ``op_row`` is not a host event of the trace.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> from kitlib.analyses.callsites import callsite_of
    >>> tr = trace_from_json(tiny_profile_doc())
    >>> conv = int(tr.ops.index[tr.ops["name"] == "aten::conv2d"][0])
    >>> site = callsite_of(tr, conv)
    >>> site["file"], site["line"], site["function"], site["module_type"]
    ('model.py', 5, 'forward', 'Net')
    >>> site["stack"]
    ('model.py(5): forward', 'nn.Module: Net_0', 'train.py(10): <module>')
    """
    t = callsites(trace, internal=internal) if table is None else table
    hit = t[(t["source"] == "ops") & (t["row"] == op_row)]
    if hit.empty:
        raise KeyError(f"row {op_row} is not an operator or annotation of this trace")
    r = hit.iloc[0]
    out = {k: (None if r[k] is None or r[k] is pd.NA or (isinstance(r[k], float) and np.isnan(r[k])) else r[k])
           for k in ("name", "user_frame", "file", "line", "function", "module", "module_type", "module_path", "stack")}
    out["line"] = int(out["line"]) if out["line"] is not None else None
    return out


def kernel_callsites(trace: Trace, table: pd.DataFrame | None = None, chain_df: pd.DataFrame | None = None,
                     internal=TORCH_INTERNAL) -> pd.DataFrame:
    """Every GPU event with the operator that launched it, that operator's call site and module.

    Returns
    -------
    DataFrame
        The :func:`kitlib.analyses.chain.chain` rows (kernels, copies, sets; sorted by GPU start)
        with ``user_frame``, ``module``, ``module_type``, ``module_path`` of the launching operator
        (None where the GPU event has no operator, e.g. launched before the window).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> from kitlib.analyses.callsites import kernel_callsites
    >>> kernel_callsites(trace_from_json(tiny_profile_doc()))[["gpu_name", "user_frame", "module"]]
          gpu_name            user_frame module
    0  conv_kernel  model.py(5): forward  Net_0
    1  relu_kernel  model.py(5): forward  Net_0
    """
    from .chain import chain as _chain
    c = _chain(trace) if chain_df is None else chain_df
    t = callsites(trace, internal=internal) if table is None else table
    t = t[t["source"] == "ops"].set_index("row")
    cols = ["user_frame", "module", "module_type", "module_path"]
    j = t.reindex(c["op_row"].to_numpy())[cols].reset_index(drop=True)
    return pd.concat([c.reset_index(drop=True), j], axis=1)


def group_by_callsite(trace: Trace, by=("user_frame",), table: pd.DataFrame | None = None,
                      internal=TORCH_INTERNAL) -> pd.DataFrame:
    """Device and host time per call site (or per module): which lines cost the most.

    Parameters
    ----------
    by : sequence of str
        Columns of :func:`callsites` to group on: ``("user_frame",)``, ``("module",)``,
        ``("user_frame", "name")`` …
    table : DataFrame, optional
        A :func:`callsites` result to reuse.

    Returns
    -------
    DataFrame
        One row per group, sorted by ``device_self_ns`` (descending): the ``by`` columns,
        ``ops`` (host events counted), ``gpu_events`` (GPU events they launched),
        ``device_self_ns`` (device time of those GPU events, each counted once),
        ``host_self_ns``. Events without a call site are grouped under ``"(none)"``.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> from kitlib.analyses.callsites import group_by_callsite
    >>> group_by_callsite(trace_from_json(tiny_profile_doc()))
                 user_frame  ops  gpu_events  device_self_ns  host_self_ns
    0  model.py(5): forward    5           2            5000         10800
    1                (none)    1           0               0          9200
    """
    t = callsites(trace, internal=internal) if table is None else table
    t = t.assign(**{b: t[b].astype(object).where(t[b].notna(), "(none)") for b in by})
    out = t.groupby(list(by), sort=False).agg(ops=("name", "size"), gpu_events=("n_gpu_events", "sum"),
                                            device_self_ns=("device_self_ns", "sum"),
                                            host_self_ns=("host_self_ns", "sum")).reset_index()
    return out.sort_values("device_self_ns", ascending=False, kind="stable").reset_index(drop=True)
