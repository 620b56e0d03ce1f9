"""The allocator's ``[memory]`` events as the trace JSON holds them, and the profiler's Self CUDA
Mem rule worked on a handful of them (lesson 07), with the standard library only.

Each event (``ph: "i"``) has ``args``: ``Bytes`` (negative for a free), the allocator's
running ``Total Allocated`` and ``Total Reserved`` after it, ``Device Type`` (1 CUDA, 0 CPU).
The rule (``torch/autograd/profiler.py``, ``_parse_kineto_results``): an operator's *total* is
the ``Bytes`` of every memory event in its interval, ends included, on any thread; its *self*
is that minus its children's totals; ``key_averages()`` sums both over calls."""
from __future__ import annotations

import pandas as pd

from ..errors import KitError
from .raw_views import trace_events

__all__ = ["raw_trace_events", "memory_events", "call_excerpt", "self_and_total"]


#: The ``traceEvents`` of a capture's trace, read afresh each call (a kept copy cost ~70 MiB a trace).
raw_trace_events = trace_events


def memory_events(events, device_type: int | None = 1) -> pd.DataFrame:
    """The ``[memory]`` instant events as a table: ``ts`` (µs), ``tid``, then every key of ``args``;
    only ``Device Type`` ``device_type`` (1 CUDA, 0 CPU; None both)."""
    rows = [{"ts": e["ts"], "tid": e.get("tid"), **e.get("args", {})} for e in events
            if e.get("name") == "[memory]" and e.get("ph") == "i"]
    df = pd.DataFrame(rows)
    if device_type is not None and len(df):
        df = df[df["Device Type"] == device_type].reset_index(drop=True)
    return df


def _end(e) -> float:
    return e["ts"] + e.get("dur", 0)


def call_excerpt(events, name: str, nth: int = 1, device_type: int = 1) -> list:
    """Call ``nth`` (0 the first) of operator ``name``, then by time the operators nested in it
    that hold memory events and its memory events of ``device_type`` (any thread), trimmed.

    Raises KitError: fewer than ``nth + 1`` calls of ``name``."""
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
    """``(self, total)`` bytes of the excerpt's first event, by the profiler's rule."""
    op, rest = excerpt[0], excerpt[1:]
    mem = [e for e in rest if e.get("ph") == "i"]
    ops = [e for e in rest if e.get("ph") == "X"]

    def total(o):
        return sum(m["args"]["Bytes"] for m in mem if o["ts"] <= m["ts"] <= _end(o))
    direct = [k for k in ops if not any(p is not k and p["ts"] <= k["ts"] and _end(k) <= _end(p) for p in ops)]
    t = total(op)
    return int(t - sum(total(k) for k in direct)), int(t)
