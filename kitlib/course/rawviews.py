"""Raw trace events as the profiler wrote them, for lessons that read the file before kitlib.

A torch.profiler trace is a Chrome trace: a JSON object whose ``traceEvents`` list holds
one dict per event. The fields a lesson reads by hand:

- ``ph``: the event's phase: ``"X"`` a complete event with ``ts`` and ``dur``, ``"s"``/``"f"``
  the start and end of a flow arrow, ``"M"`` metadata (process and thread names);
- ``cat``: what recorded it: ``cpu_op`` (a PyTorch operator), ``cuda_runtime`` (a CUDA API
  call such as a launch), ``kernel``, ``gpu_memcpy``, ``gpu_memset``, ``ac2g`` (a flow from
  an API call to the GPU);
- ``ts``, ``dur``: start and duration in µs (floats with ns digits);
- ``args["External id"]``: the profiler's id of the operator that was innermost on the
  thread (on the operator itself, its launches and their GPU events);
- ``args["correlation"]``: CUPTI's id shared by one API call and the GPU work it started.

Nothing here joins or interprets: the functions pick events, trim them for printing and
lay them out as a table, so that the learner does the join.
"""
from __future__ import annotations

import json

from ..readers.files import read_trace_events

#: Categories of the events that ran on a GPU (their ``tid`` is the stream).
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
#: The args a lesson prints: the two ids that link the three kinds of event.
LINK_ARGS = ("External id", "correlation")


def load_events(path) -> list:
    """The ``traceEvents`` of a Chrome trace file (``.json`` or ``.json.gz``), as written
    (:func:`kitlib.readers.files.read_trace_events`).

    Raises
    ------
    KitFileError
        The file cannot be read, is not JSON, or has no ``traceEvents`` list.
    """
    return read_trace_events(path)


def trimmed(event: dict, args=LINK_ARGS, name_width: int | None = None) -> dict:
    """``event`` with only the fields a lesson prints: ``ph cat name pid tid ts dur`` (those it
    has, flows keep ``id``) and the ``args`` named in ``args``; a name longer than
    ``name_width`` is cut with ``…``."""
    out = {k: event[k] for k in ("ph", "cat", "name", "id", "pid", "tid", "ts", "dur") if k in event}
    if name_width and len(str(out.get("name", ""))) > name_width:
        out["name"] = str(out["name"])[: name_width - 1] + "…"
    kept = {k: v for k, v in event.get("args", {}).items() if k in args}
    if kept:
        out["args"] = kept
    return out


def as_json(events, args=LINK_ARGS, name_width: int = 60) -> str:
    """``events`` as a JSON list, one trimmed event a line (see :func:`trimmed`), an event too
    long for a notebook's line broken between its fields
    (:func:`kitlib.course.raw_views.json_wrapped`)."""
    from ..units import PRINT_CHARS
    from .raw_views import json_wrapped
    lines = [json_wrapped(trimmed(e, args, name_width), PRINT_CHARS - 2).replace("\n", "\n  ")
             for e in events]
    return "[\n  " + ",\n  ".join(lines) + "\n]"


def events_frame(events):
    """One row per event: ``ph cat name pid tid ts dur`` and the two ids as columns
    ``external_id`` and ``correlation`` (missing ids are <NA>)."""
    import pandas as pd
    rows = [{"ph": e.get("ph"), "cat": e.get("cat"), "name": e.get("name"), "pid": e.get("pid"),
             "tid": e.get("tid"), "ts": e.get("ts"), "dur": e.get("dur"),
             "external_id": e.get("args", {}).get("External id"), "correlation": e.get("args", {}).get("correlation")}
            for e in events]
    df = pd.DataFrame(rows, columns=["ph", "cat", "name", "pid", "tid", "ts", "dur", "external_id", "correlation"])
    for c in ("external_id", "correlation"):
        df[c] = df[c].astype("Int64")
    return df


def first_op(events, name: str, after_ts: float | None = None) -> dict:
    """The earliest ``cpu_op`` called ``name`` (starting at or after ``after_ts``).

    Raises
    ------
    LookupError
        No such operator.
    """
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("name") == name
           and (after_ts is None or e["ts"] >= after_ts)]
    if not ops:
        raise LookupError(f"no cpu_op {name!r} in these events")
    return min(ops, key=lambda e: e["ts"])


def op_excerpt(events, op: dict, flows: bool = False) -> list:
    """The operator ``op`` and every event that carries its ``External id`` (its CUDA API
    calls and their GPU events), in time order; with ``flows``, the ``ac2g`` flow events of
    those API calls as well."""
    x = op["args"]["External id"]
    out = [e for e in events if e.get("ph") == "X" and e.get("args", {}).get("External id") == x and e is not op]
    if flows:
        corr = {e["args"].get("correlation") for e in out}
        out += [e for e in events if e.get("cat") == "ac2g" and e.get("id") in corr]
    return sorted([op] + out, key=lambda e: (e["ts"], e.get("ph") != "X"))


def steps_in(events) -> list:
    """The ``ProfilerStep#N`` annotations, in time order."""
    return sorted((e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")),
                  key=lambda e: e["ts"])


def time_trap_excerpt(events) -> tuple:
    """An excerpt for "which operator launched this kernel?": two operators of the main
    thread that each made one launch, where the first one's kernel started on the GPU
    while the host was inside the second one (the host runs ahead of the GPU).

    Searches the first profiler step for the earliest such pair whose operators have
    different names. Returns ``(excerpt, correlation)``: the two operators, their launches
    and their GPU events in time order, and the correlation id of the first operator's
    kernel (the one to ask about).

    Raises
    ------
    LookupError
        No such pair in the first step.
    """
    step = steps_in(events)[0]
    s0, s1 = step["ts"], step["ts"] + step["dur"]
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("tid") == step["tid"] and s0 <= e["ts"] < s1]
    launches: dict = {}
    for e in events:
        if e.get("cat") == "cuda_runtime" and "Launch" in e.get("name", ""):
            launches.setdefault(e["args"].get("External id"), []).append(e)
    gpu = {e["args"]["correlation"]: e for e in events if e.get("cat") in GPU_CATS and "correlation" in e.get("args", {})}
    single = [o for o in sorted(ops, key=lambda e: e["ts"]) if len(launches.get(o["args"]["External id"], ())) == 1
              and launches[o["args"]["External id"]][0]["args"]["correlation"] in gpu]
    for a in single:
        la = launches[a["args"]["External id"]][0]
        ka = gpu[la["args"]["correlation"]]
        for b in single:
            if b["name"] != a["name"] and b["ts"] <= ka["ts"] <= b["ts"] + b["dur"]:
                lb = launches[b["args"]["External id"]][0]
                kb = gpu[lb["args"]["correlation"]]
                picked = sorted([a, la, ka, b, lb, kb], key=lambda e: e["ts"])
                return picked, la["args"]["correlation"]
    raise LookupError("no operator in the first step whose kernel ran inside another operator's host interval")


#: What Perfetto shows on a PyTorch trace's tracks, less the Python frames of ``with_stack``
#: (``gpu_user_annotation``: a label's span of GPU work, which Kineto draws on the stream's track).
WINDOW_CATS = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "gpu_user_annotation") + GPU_CATS


def window(events, start_us: float, end_us: float, cats=WINDOW_CATS, pids=None) -> list:
    """The events a timeline shows between ``start_us`` and ``end_us`` (trace clock, µs):
    every ``X`` event of ``cats`` that overlaps the window (of the processes ``pids``, if
    given), the ``ac2g`` flow events inside it, and the metadata events that name the
    tracks. ``python_function`` frames are left out by default: Perfetto draws them under
    the operators when the trace was recorded ``with_stack``."""
    out = []
    for e in events:
        ph = e.get("ph")
        if ph == "M":
            out.append(e)
        elif ph == "X" and e.get("cat") in cats and (pids is None or e.get("pid") in pids):
            if e["ts"] < end_us and e["ts"] + e.get("dur", 0) > start_us:
                out.append(e)
        elif ph in ("s", "f") and e.get("cat") == "ac2g" and start_us <= e["ts"] <= end_us:
            out.append(e)
    return out
