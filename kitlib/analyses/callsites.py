"""Which line of my code is responsible? Operators traced back to Python call sites.

Stacks (``with_stack=True``) are :func:`kitlib.analyses.events.op_stacks`'s, innermost first;
backward operators inherit their forward operator's. ``table`` may reuse a :func:`callsites`.

Sources: docs/SOURCES.md#callsites-frames
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
    """Split ``"path(line): function"`` into ``{"file", "line", "function"}`` (``file`` and
    ``line`` None when the frame is not a source line).

    Examples
    --------
    >>> parse_frame("model.py(12): forward")
    {'file': 'model.py', 'line': 12, 'function': 'forward'}
    """
    m = _FRAME_RE.match(frame or "")
    if not m:
        return {"file": None, "line": None, "function": frame}
    return {"file": m["file"], "line": int(m["line"]), "function": m["function"]}


def is_user_frame(frame: str, internal=TORCH_INTERNAL) -> bool:
    """Whether a Python frame name is the learner's code: not ``internal`` (PyTorch's own), the
    standard library, an installed package, a C function or an ``nn.Module`` pseudo-frame.

    Examples
    --------
    >>> is_user_frame("model.py(5): forward"), is_user_frame("torch/nn/modules/conv.py(549): forward")
    (True, False)
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
    """For every host event (``events``, :func:`~kitlib.analyses.events.op_events` by default):
    its innermost user-code frame and the ``nn.Module`` it ran under.

    Adds ``stack`` (innermost first), ``user_frame`` (else the innermost source-line frame;
    None without frames), ``file, line, function`` (parsed from it), ``module`` (innermost,
    e.g. ``Conv2d_0``), ``module_type`` (``Conv2d``), ``module_path`` (outermost → innermost,
    joined by ``" › "``).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> callsites(trace_from_json(tiny_profile_doc()))[["name", "user_frame", "module"]].iloc[2].tolist()
    ['aten::conv2d', 'model.py(5): forward', 'Net_0']
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
    """The call site of one operator (row label ``op_row`` of ``trace.ops``): a dict of
    ``name, user_frame, file, line, function, module, module_type, module_path, stack``.

    Raises KeyError when ``op_row`` is not a host event of the trace.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> callsite_of(trace_from_json(tiny_profile_doc()), 5)["stack"]        # row 5: aten::conv2d
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
    """Every GPU event (the :func:`kitlib.analyses.chain.chain` rows) with its launching
    operator's ``user_frame, module, module_type, module_path`` (None without an operator).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
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
    """Device and host time per call site (``by``: columns of :func:`callsites`, e.g.
    ``("module",)``): which lines cost the most.

    Returns, by ``device_self_ns`` descending: the ``by`` columns, ``ops``,
    ``gpu_events``, ``device_self_ns``, ``host_self_ns``; events without a call site under
    ``"(none)"``.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
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
