"""The allocator's events as the trace JSON holds them, and the profiler's Self CUDA Mem rule
worked on a handful of them (lesson 07).

With ``profile_memory=True``, torch.profiler writes one instant event per allocation or
free of the caching allocator::

    {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": 5139038785793.059,
     "pid": 449, "tid": 449, "args": {"Bytes": 77594624, "Total Allocated": 515523072,
     "Total Reserved": 13352566784, "Device Type": 1, "Device Id": 0, "Addr": ...}}

``Bytes`` is negative for a free; ``Total Allocated`` and ``Total Reserved`` are the
allocator's running totals just after the event; ``Device Type`` 1 is CUDA, 0 the CPU.

The profiler's rule (``torch/autograd/profiler.py``, ``_parse_kineto_results``; and
``profiler_util.py``, ``FunctionEvent.self_device_memory_usage``): an operator's *total*
is the sum of ``Bytes`` of every memory event whose time lies in its interval, ends
included, on any thread; its *self* is that total minus its children's totals; a row of
``key_averages()`` sums both over the calls. This module reads the raw events with the
standard library only, so a learner can check each step by hand, and
:func:`self_and_total` applies the rule to an excerpt.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..errors import KitError
from ..readers.files import read_trace_events

__all__ = ["raw_trace_events", "memory_events", "call_excerpt", "self_and_total"]


def raw_trace_events(capture, cats=None) -> list:
    """The ``traceEvents`` of a capture's trace, as ``prof.export_chrome_trace`` wrote them
    (:func:`kitlib.readers.files.read_trace_events`, the values ``json`` gives). Read afresh
    each time: a copy kept for speed held about 70 MiB of a learner's kernel per trace.

    Raises
    ------
    BundleError
        The capture has no trace file.
    """
    name = "trace.json.gz" if capture.has("trace.json.gz") else "trace.json"
    return read_trace_events(Path(capture.file(name)), cats=cats)


def memory_events(events, device_type: int | None = 1) -> pd.DataFrame:
    """The ``[memory]`` instant events of ``events`` as a table with the trace's own field
    names: ``ts`` (µs, as written), ``tid``, then every key of ``args`` (``Bytes``,
    ``Total Allocated``, ``Total Reserved``, ``Device Type``, ``Addr``, ...).

    Parameters
    ----------
    events : list of dict
        Raw trace events (:func:`raw_trace_events`).
    device_type : int or None
        Keep only this ``Device Type`` (1 = CUDA, 0 = CPU); None keeps both.
    """
    rows = [{"ts": e["ts"], "tid": e.get("tid"), **e.get("args", {})} for e in events
            if e.get("name") == "[memory]" and e.get("ph") == "i"]
    df = pd.DataFrame(rows)
    if device_type is not None and len(df):
        df = df[df["Device Type"] == device_type].reset_index(drop=True)
    return df


def _end(e) -> float:
    return e["ts"] + e.get("dur", 0)


def call_excerpt(events, name: str, nth: int = 1, device_type: int = 1) -> list:
    """One call of operator ``name`` with what the rule needs: the call, the operators
    nested in it on its thread, and the memory events in its interval (any thread).

    Each event keeps ``ph``, ``cat``, ``name``, ``tid``, ``ts`` and (operators) ``dur``;
    a memory event keeps ``args`` ``Bytes``, ``Total Allocated`` and ``Device Type``.
    Operators with no memory event inside them (``aten::view``...) are left out.

    Parameters
    ----------
    events : list of dict
        Raw trace events.
    name : str
        The operator (``aten::cudnn_batch_norm``...).
    nth : int
        Which call (0 = the first in the file).
    device_type : int
        The memory events kept (1 = CUDA).

    Returns
    -------
    list of dict
        The call first, then the other events by time.

    Raises
    ------
    KitError
        Fewer than ``nth + 1`` calls of ``name``.
    """
    calls = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e.get("name") == name]
    if len(calls) <= nth:
        raise KitError(f"the trace has {len(calls)} calls of {name!r}, not a call number {nth}")
    op = calls[nth]
    a, b = op["ts"], _end(op)
    mem = [e for e in events if e.get("name") == "[memory]" and e.get("ph") == "i" and a <= e["ts"] <= b
           and e.get("args", {}).get("Device Type") == device_type]
    kids = [e for e in events if e is not op and e.get("ph") == "X" and e.get("cat") == "cpu_op"
            and e.get("tid") == op.get("tid") and a <= e["ts"] and _end(e) <= b]
    kids = [k for k in kids if any(k["ts"] <= m["ts"] <= _end(k) for m in mem)]

    def keep(e):
        out = {k: e[k] for k in ("ph", "cat", "name", "tid", "ts", "dur") if k in e}
        if e.get("name") == "[memory]":
            out["args"] = {k: e["args"][k] for k in ("Bytes", "Total Allocated", "Device Type")}
        return out
    return [keep(op)] + [keep(e) for e in sorted(kids + mem, key=lambda e: (e["ts"], e.get("ph") == "i"))]


def self_and_total(excerpt) -> tuple[int, int]:
    """``(self, total)`` bytes of the excerpt's first event, by the profiler's rule: total =
    the ``Bytes`` of the memory events in its interval (ends included); self = total minus
    the totals of its direct children (operators in it, not inside another of them).
    """
    op, rest = excerpt[0], excerpt[1:]
    mem = [e for e in rest if e.get("ph") == "i"]
    ops = [e for e in rest if e.get("ph") == "X"]

    def total(o):
        return sum(m["args"]["Bytes"] for m in mem if o["ts"] <= m["ts"] <= _end(o))
    direct = [k for k in ops if not any(p is not k and p["ts"] <= k["ts"] and _end(k) <= _end(p) for p in ops)]
    t = total(op)
    return int(t - sum(total(k) for k in direct)), int(t)
