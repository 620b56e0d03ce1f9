"""Raw trace events as the profiler wrote them, for lessons that read the file before kitlib:
picked and trimmed, never joined, so the learner does the join.

Fields read by hand: ``ph`` (``X`` complete, ``s``/``f`` flow, ``M`` metadata), ``cat``
(``cpu_op``, ``cuda_runtime``, ``kernel``, ``gpu_memcpy``, ``ac2g``...), ``ts``/``dur`` (µs),
``args["External id"]`` (the innermost operator) and ``args["correlation"]`` (CUPTI's id
shared by an API call and its GPU work)."""
from __future__ import annotations

from ..readers.files import read_trace_events

#: Categories of the events that ran on a GPU (their ``tid`` is the stream).
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
#: The args a lesson prints: the two ids that link the three kinds of event.
LINK_ARGS = ("External id", "correlation")


#: The ``traceEvents`` of a Chrome trace file, as written (KitFileError for a bad file).
load_events = read_trace_events


def trimmed(event: dict, args=LINK_ARGS, name_width: int | None = None) -> dict:
    """``event`` with only ``ph cat name id pid tid ts dur`` and the ``args`` named; a name over
    ``name_width`` cut with ``…``."""
    out = {k: event[k] for k in ("ph", "cat", "name", "id", "pid", "tid", "ts", "dur") if k in event}
    if name_width and len(str(out.get("name", ""))) > name_width:
        out["name"] = str(out["name"])[: name_width - 1] + "…"
    kept = {k: v for k, v in event.get("args", {}).items() if k in args}
    if kept:
        out["args"] = kept
    return out


def as_json(events, args=LINK_ARGS, name_width: int = 60) -> str:
    """``events`` as a JSON list, one :func:`trimmed` event a line (wrapped between fields)."""
    from ..units import PRINT_CHARS
    from .raw_views import json_wrapped
    lines = [json_wrapped(trimmed(e, args, name_width), PRINT_CHARS - 2).replace("\n", "\n  ")
             for e in events]
    return "[\n  " + ",\n  ".join(lines) + "\n]"


def events_frame(events):
    """One row per event: ``ph cat name pid tid ts dur``, ``external_id``, ``correlation`` (Int64)."""
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
    """The earliest ``cpu_op`` called ``name`` (at or after ``after_ts``).

    Raises LookupError: no such operator."""
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("name") == name
           and (after_ts is None or e["ts"] >= after_ts)]
    if not ops:
        raise LookupError(f"no cpu_op {name!r} in these events")
    return min(ops, key=lambda e: e["ts"])


def op_excerpt(events, op: dict, flows: bool = False) -> list:
    """``op`` and every event with its ``External id``, by time; with ``flows``, their ``ac2g`` flows."""
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
    """``(excerpt, correlation)`` for "which operator launched this kernel?": in the first step, the
    earliest two differently named main-thread operators of one launch each, the first one's
    kernel running while the host is inside the second; the correlation of that kernel.

    Raises LookupError: no such pair."""
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
    """The events a timeline shows between ``start_us`` and ``end_us``: ``X`` events of ``cats``
    overlapping it (of ``pids``), ``ac2g`` flows inside it, and the metadata events."""
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
