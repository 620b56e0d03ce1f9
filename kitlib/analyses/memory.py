"""Allocator events of a torch.profiler trace: per-operator accounting and memory over time.

"Self CUDA Mem" is allocations minus frees, not a peak. ``device`` is ``"cuda"``, ``"cpu"``
or a c10 ``DeviceType`` code (which instants count). Bytes are bytes; times are ns on the
trace's clock.

Sources: docs/SOURCES.md#memory-key-averages
"""
from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from ..errors import KitError
from ..units import bytes_to_gib
from ..model import Trace
from ..model.window import bounds_in, step_of, value_at
from ..phases import FORWARD, LABELS

__all__ = ["profiler_events", "memory_by_event", "memory_by_operator", "records_inside_no_event",
           "compare_with_key_averages",
           "format_memory", "parse_memory_table", "memory_timeline", "memory_peak", "memory_per_step",
           "memory_held_at",
           "DEVICE_TYPES", "MemoryDataError"]

#: ``Device Type`` codes of the memory instants (c10::DeviceType).
DEVICE_TYPES = {"cpu": 0, "cuda": 1}


class MemoryDataError(KitError, ValueError):
    """The trace lacks what a memory analysis needs (no allocator events); also a ValueError.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> memory_timeline(tiny_trace())
    Traceback (most recent call last):
    ...
    kitlib.analyses.memory.MemoryDataError: tiny.json: the trace has no memory events; record it with ...
    """


def _device_code(device) -> int:
    if isinstance(device, (int, np.integer)):
        return int(device)
    try:
        return DEVICE_TYPES[str(device).lower()]
    except KeyError:
        raise KitError(f"device must be 'cuda', 'cpu' or a c10 DeviceType code, not {device!r}") from None


def _memory_of(trace: Trace, device) -> pd.DataFrame:
    if trace.memory.empty:
        raise MemoryDataError(f"{trace.path}: the trace has no memory events; record it with "
                              "torch.profiler.profile(profile_memory=True)")
    code = _device_code(device)
    m = trace.memory[trace.memory["device_type"] == code]
    return m.sort_values("start_ns", kind="stable")


def profiler_events(trace: Trace) -> pd.DataFrame:
    """The CPU-side events the profiler's tables are built from, nested as it nests them.

    A view of ``trace.host_events`` in start order: ``source, row, name, key`` (the table's
    row name: ``ProfilerStep#N`` → ``ProfilerStep*``), ``kind, pid, tid, start_ns, end_ns``
    (ns), ``parent`` (-1 at the top), ``merged`` (folded into a same-named parent).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> profiler_events(tiny_trace())[["name", "kind", "parent", "merged"]]
                   name     kind  parent  merged
    0    ProfilerStep#1     step      -1   False
    1        aten::relu       op       0   False
    2  cudaLaunchKernel  runtime       1   False
    3         aten::add       op       0   False
    """
    t = trace.host_events
    ev = t[["source", "row", "name", "kind", "pid", "tid", "start_ns", "end_ns"]].copy()
    ev.insert(3, "key", ev["name"].where(~ev["name"].astype(str).str.startswith("ProfilerStep#"), "ProfilerStep*"))
    ev["parent"] = t["profiler_parent"].to_numpy()
    ev["merged"] = t["merged"].to_numpy()
    return ev


def memory_by_event(trace: Trace, device="cuda", events: pd.DataFrame | None = None) -> pd.DataFrame:
    """Allocations and frees of every CPU-side event, total and self, as the profiler counts them.

    Returns :func:`profiler_events` (or ``events``, reused) plus ``n_memory_events``,
    ``alloc_bytes``, ``free_bytes`` (positive), ``total_bytes`` (alloc − free: "CUDA Mem"),
    ``self_alloc_bytes``, ``self_free_bytes``, ``self_bytes`` ("Self CUDA Mem"). A record
    counts in every event whose ``[start, end]`` holds it, on any thread; torch ≤ 2.10's
    float edges are reproduced (:func:`kitlib.readers.trace.memory_edges_rule`).

    Raises MemoryDataError when the trace has no memory events.

    Sources: docs/SOURCES.md#memory-key-averages

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> tr = open_capture("profiler_5step").trace
    >>> memory_by_event(tr)[["name", "n_memory_events", "self_bytes"]].head(2)
                 name  n_memory_events  self_bytes
    0  ProfilerStep#2             1922   -77071872
    1       data_load                0           0
    """
    ev = profiler_events(trace) if events is None else events.copy()
    m = _memory_of(trace, device)
    t = m["start_ns"].to_numpy(dtype=np.int64)
    b = m["bytes"].to_numpy(dtype=np.int64)
    # the profiler's rule for memory records (in_interval): the one place kitlib uses [start, end]
    lo, hi = bounds_in(*_record_edges(trace, ev), t, closed="both")
    csum = lambda v: np.concatenate([[0], np.cumsum(v)])  # noqa: E731
    alloc, free = csum(np.where(b > 0, b, 0)), csum(np.where(b < 0, -b, 0))
    ev["n_memory_events"] = hi - lo
    ev["alloc_bytes"] = alloc[hi] - alloc[lo]
    ev["free_bytes"] = free[hi] - free[lo]
    ev["total_bytes"] = ev["alloc_bytes"] - ev["free_bytes"]
    live = ~ev["merged"].to_numpy()
    par = ev["parent"].to_numpy()
    for col in ("alloc_bytes", "free_bytes"):
        v = ev[col].to_numpy()
        child = np.zeros(len(ev), dtype=np.int64)
        has = live & (par >= 0)
        np.add.at(child, par[has], v[has])
        ev["self_" + col] = v - child
    ev["self_bytes"] = ev["self_alloc_bytes"] - ev["self_free_bytes"]
    return ev


def _record_edges(trace: Trace, events: pd.DataFrame) -> tuple:
    """Each event's ``[start, end]`` (ns) for its records: torch ≤ 2.10's float-µs edges where
    ``trace.meta["memory_edges_float_us"]`` says so, else its own."""
    s = events["start_ns"].to_numpy(np.int64)
    e = events["end_ns"].to_numpy(np.int64)
    base = int(trace.meta.get("base_time_ns") or 0)
    if not trace.meta.get("memory_edges_float_us") or not base or not len(s):
        return s, e          # without baseTimeNanoseconds the profiler's epoch ns are unknown
    # t >= x / 1000 * 1000  <=>  t >= ceil(...), exactly, in integers (t is an integer)
    lo = np.array([math.ceil((x + base) / 1000 * 1000) - base for x in s.tolist()], dtype=np.int64)
    hi = np.array([math.floor((x + base) / 1000 * 1000) - base for x in e.tolist()], dtype=np.int64)
    return lo, hi


def _inside_no_event(events: pd.DataFrame, t: np.ndarray, trace: Trace) -> np.ndarray:
    """Which sorted record times ``t`` fall inside none of ``events``' :func:`_record_edges`."""
    covered = np.zeros(len(t), dtype=bool)
    if len(t) and len(events):
        delta = np.zeros(len(t) + 1, dtype=np.int64)
        lo, hi = bounds_in(*_record_edges(trace, events), t, closed="both")
        np.add.at(delta, lo, 1)
        np.add.at(delta, hi, -1)
        covered = np.cumsum(delta)[:-1] > 0
    return ~covered


def records_inside_no_event(trace: Trace, events: pd.DataFrame | None = None) -> pd.DataFrame:
    """The rows of ``trace.memory`` (every device) inside no CPU-side event, in time order: the
    ``[memory]`` row of ``key_averages()``, :func:`memory_by_operator` and ``group_ops``.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> len(records_inside_no_event(tiny_trace()))
    0
    """
    m = trace.memory.sort_values("start_ns", kind="stable")
    if m.empty:
        return m
    ev = profiler_events(trace) if events is None else events
    return m[_inside_no_event(ev, m["start_ns"].to_numpy(dtype=np.int64), trace)]


def memory_by_operator(trace: Trace, device="cuda", by_event: pd.DataFrame | None = None) -> pd.DataFrame:
    """The "CUDA Mem" and "Self CUDA Mem" columns of ``key_averages()``, rebuilt.

    Returns, indexed by ``key``: ``calls``; summed over calls, ``alloc_bytes, free_bytes,
    total_bytes, self_alloc_bytes, self_free_bytes, self_bytes``; ``self_gib`` (the printed
    "GB"). Largest ``self_bytes`` first, ties in order of first start; records inside no
    event form a ``[memory]`` row; Python frames are never rows.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> memory_by_operator(open_capture("profiler_5step").trace).head(2)[["calls", "self_bytes"]]
                             calls   self_bytes
    key
    aten::empty               2660  59423967744
    aten::cudnn_convolution    265  28514713600
    """
    ev = memory_by_event(trace, device) if by_event is None else by_event
    m = _memory_of(trace, device)
    covered = ~_inside_no_event(ev, m["start_ns"].to_numpy(dtype=np.int64), trace)
    ev = ev[~ev["merged"] & (ev["kind"] != "python")]
    cols = ["alloc_bytes", "free_bytes", "total_bytes", "self_alloc_bytes", "self_free_bytes", "self_bytes"]
    g = ev.groupby("key", sort=False)
    out = g[cols].sum()
    out.insert(0, "calls", g.size())
    if (~covered).any():
        b = m["bytes"].to_numpy(dtype=np.int64)[~covered]
        a, f = int(b[b > 0].sum()), int(-b[b < 0].sum())
        out.loc["[memory]"] = [int((~covered).sum()), a, f, a - f, a, f, a - f]
    out["self_gib"] = bytes_to_gib(out["self_bytes"])
    return out.sort_values("self_bytes", ascending=False, kind="stable")


def compare_with_key_averages(by_operator: pd.DataFrame, rows: list) -> pd.DataFrame:
    """Line :func:`memory_by_operator` up with the profiler's own ``key_averages()`` ``rows``
    (dicts with ``key, count, device_memory_usage_bytes, self_device_memory_usage_bytes``;
    names without a CPU-side event are left out, a name's CPU and GPU rows are summed).

    Returns, indexed by ``key``: ``calls, profiler_calls, total_bytes,
    profiler_total_bytes, self_bytes, profiler_self_bytes, match`` (all three equal).

    Raises KitError when ``rows`` lack the memory fields.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> rows = [{"key": "aten::conv2d", "count": 1, "device_memory_usage_bytes": 4096,
    ...          "self_device_memory_usage_bytes": 4096}]
    >>> by_op = memory_by_operator(trace_from_json(tiny_profile_doc()))
    >>> compare_with_key_averages(by_op, rows)[["total_bytes", "match"]]
                  total_bytes  match
    key
    aten::conv2d         4096   True
    """
    ka = pd.DataFrame(rows)
    need = {"key", "count", "device_memory_usage_bytes", "self_device_memory_usage_bytes"}
    if not need <= set(ka.columns):
        raise KitError(f"key_averages rows lack {sorted(need - set(ka.columns))}: "
                       "were they recorded with profile_memory=True?")
    cpu = ka[ka["key"].isin(by_operator.index)]
    k = cpu.groupby("key").agg(profiler_calls=("count", "max"),
                               profiler_total_bytes=("device_memory_usage_bytes", "sum"),
                               profiler_self_bytes=("self_device_memory_usage_bytes", "sum"))
    j = by_operator[["calls", "total_bytes", "self_bytes"]].join(k, how="inner")
    j = j[["calls", "profiler_calls", "total_bytes", "profiler_total_bytes", "self_bytes", "profiler_self_bytes"]]
    j["match"] = ((j["calls"] == j["profiler_calls"]) & (j["total_bytes"] == j["profiler_total_bytes"])
                  & (j["self_bytes"] == j["profiler_self_bytes"]))
    return j


def format_memory(nbytes: int) -> str:
    """A byte count as the profiler's printed table writes it (1024-based KB, MB, GB).

    Examples
    --------
    >>> format_memory(1536)
    '1.50 KB'
    """
    for unit, size in (("GB", 1024 ** 3), ("MB", 1024 ** 2), ("KB", 1024)):
        if abs(nbytes) >= size:
            return f"{nbytes * 1.0 / size:.2f} {unit}"
    return f"{nbytes} B"


def parse_memory_table(text: str) -> pd.DataFrame:
    """Read the memory columns of ``key_averages().table(...)`` printouts in ``text`` (tables
    without ``CUDA Mem`` and ``Self CUDA Mem`` are skipped; shortened names kept as printed).

    Returns ``table`` (0, 1, …), ``name``, ``cuda_mem``, ``self_cuda_mem`` (as printed),
    ``calls``. Raises KitError when no such table is in ``text``.

    Examples
    --------
    >>> parse_memory_table("Name  CUDA Mem  Self CUDA Mem  # of Calls\\naten::relu  1.00 Kb  1.00 Kb  1")
       table        name cuda_mem self_cuda_mem  calls
    0      0  aten::relu  1.00 Kb       1.00 Kb      1
    """
    out, table = [], -1
    cols, spans, rule = None, None, None
    for line in text.splitlines():
        if "Self CUDA Mem" in line and "Name" in line:
            table += 1
            heads = re.split(r"\s{2,}", line.strip())
            cols = {h: i for i, h in enumerate(heads)}
            # cut rows at the column rules' dashes, so an empty cell is read as empty
            spans = [m.span() for m in re.finditer(r"-+", rule or "")]
            if len(spans) != len(heads):
                spans = None
            continue
        if line.startswith("-"):
            rule = line
        if cols is None or not line.strip() or line.startswith("-") or line.startswith("Self "):
            if line.startswith("Self CPU time total"):
                cols = None
            continue
        if spans is not None:
            parts = [line[a:b].strip() for a, b in spans]
            if not parts[0]:
                continue                                  # a stack line under its row
            name, rec = parts[0], dict(zip(list(cols)[1:], parts[1:]))
        else:
            parts = re.split(r"\s{2,}", line.strip())
            if len(parts) < len(cols):
                continue
            name = parts[0]
            rec = dict(zip(list(cols)[1:], parts[-(len(cols) - 1):]))
        out.append({"table": table, "name": name, "cuda_mem": rec.get("CUDA Mem"),
                    "self_cuda_mem": rec.get("Self CUDA Mem"), "calls": int(rec.get("# of Calls") or 0)})
    if not out:
        raise KitError("no profiler table with 'CUDA Mem' and 'Self CUDA Mem' columns in this text "
                       "(was it printed from a profile recorded with profile_memory=True?)")
    return pd.DataFrame(out)


def memory_timeline(trace: Trace, device="cuda", phases=LABELS) -> pd.DataFrame:
    """Live (allocated) and reserved memory after every allocator event, in time order.

    Returns ``start_ns`` (ns), ``tid``, ``bytes`` (+ alloc, − free), ``allocated_bytes``,
    ``reserved_bytes`` (after it), ``device_id``, ``step`` (``<NA>`` outside), ``phase`` (the
    label of ``phases`` open then, any thread), ``op`` (innermost on the event's thread).

    Raises MemoryDataError when the trace has no memory events.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> tl = memory_timeline(open_capture("profiler_5step").trace)
    >>> len(tl), tl.columns.tolist()[-3:]
    (9610, ['step', 'phase', 'op'])
    """
    from .chain import innermost_op_at
    m = _memory_of(trace, device).reset_index(drop=True)
    t = m["start_ns"].to_numpy(dtype=np.int64)
    out = pd.DataFrame({"start_ns": t, "tid": m["tid"].to_numpy(),
                        "bytes": m["bytes"].to_numpy(dtype=np.int64),
                        "allocated_bytes": m["total_allocated"].to_numpy(dtype=np.int64),
                        "reserved_bytes": m["total_reserved"].to_numpy(dtype=np.int64),
                        "device_id": m["device_id"].to_numpy()})
    out["step"] = step_of(t, trace.steps)
    ph = trace.ops[trace.ops["name"].isin(list(phases)) & (trace.ops["kind"] == "annotation")]
    out["phase"] = value_at(t, ph)                  # the phase open latest, on any thread; None outside
    op = np.full(len(m), None, dtype=object)
    op_names = trace.ops["name"].to_numpy(dtype=object)
    for (pid, tid), idx in (m.groupby(["pid", "tid"]).groups.items() if len(op_names) else ()):
        rows = np.asarray(innermost_op_at(trace, pid, tid, m.loc[idx, "start_ns"].to_numpy()), dtype=np.int64)
        pos = trace.ops.index.get_indexer(np.maximum(rows, 0))     # row labels -> positions
        op[np.asarray(idx)] = np.where(rows >= 0, op_names[pos], None)
    out["op"] = op
    return out


def memory_peak(timeline: pd.DataFrame) -> pd.Series:
    """The row of a :func:`memory_timeline` where allocated memory was highest (the first of
    ties), plus ``position`` (its row number) and ``reserved_max_bytes`` (whole timeline).

    Raises MemoryDataError on an empty timeline.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> peak = memory_peak(memory_timeline(open_capture("profiler_5step").trace))
    >>> int(peak["allocated_bytes"]), int(peak["step"]), peak["phase"], peak["op"]
    (11462948352, 2, 'backward', 'aten::threshold_backward')
    """
    if timeline.empty:
        raise MemoryDataError("the memory timeline is empty: no allocator events for that device")
    i = int(np.argmax(timeline["allocated_bytes"].to_numpy()))
    row = timeline.iloc[i].copy()
    row["position"] = i
    row["reserved_max_bytes"] = int(timeline["reserved_bytes"].max())
    return row


def memory_per_step(timeline: pd.DataFrame) -> pd.DataFrame:
    """Live memory at the start, peak and end of each step of a :func:`memory_timeline`.

    Returns ``step, events, start_allocated_bytes, peak_allocated_bytes,
    end_allocated_bytes, growth_bytes`` (end − start), ``forward_growth_bytes`` (added
    inside ``forward``), ``reserved_max_bytes``.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> tl = memory_timeline(open_capture("profiler_5step").trace)
    >>> memory_per_step(tl)[["step", "growth_bytes", "forward_growth_bytes"]].head(2)
       step  growth_bytes  forward_growth_bytes
    0     2             0           10942159360
    1     3             0           10942159360
    """
    tl = timeline[timeline["step"].notna()]
    rows = []
    for step, g in tl.groupby("step", sort=True):
        first = g.iloc[0]
        rows.append({"step": int(step), "events": len(g),
                     "start_allocated_bytes": int(first["allocated_bytes"] - first["bytes"]),
                     "peak_allocated_bytes": int(g["allocated_bytes"].max()),
                     "end_allocated_bytes": int(g["allocated_bytes"].iloc[-1]),
                     "forward_growth_bytes": int(g.loc[g["phase"] == FORWARD, "bytes"].sum()),
                     "reserved_max_bytes": int(g["reserved_bytes"].max())})
    df = pd.DataFrame(rows)
    if len(df):
        df.insert(4, "growth_bytes", df["end_allocated_bytes"] - df["start_allocated_bytes"])
    return df


def memory_held_at(trace: Trace, timeline: pd.DataFrame, position: int, device="cuda") -> pd.DataFrame:
    """Which operators allocated the memory still held at row ``position`` of a
    :func:`memory_timeline` of ``trace`` (older memory: ``"(before the recording)"``).

    Returns, largest first: ``op, allocations, held_bytes, share_of_allocated``.

    Raises MemoryDataError when ``position`` is not a row of ``timeline``.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> tr = trace_from_json(tiny_profile_doc())
    >>> memory_held_at(tr, memory_timeline(tr), 1)
                 op  allocations  held_bytes  share_of_allocated
    0  aten::conv2d            1        4096                 0.8
    1    aten::relu            1        1024                 0.2
    """
    if not 0 <= int(position) < len(timeline):
        raise MemoryDataError(f"position {position} is outside the memory timeline (0 to {len(timeline) - 1})")
    m = _memory_of(trace, device).reset_index(drop=True)
    upto = pd.DataFrame({"addr": m["addr"].to_numpy()[: position + 1],
                         "bytes": timeline["bytes"].to_numpy()[: position + 1],
                         "op": timeline["op"].to_numpy()[: position + 1]})
    last = upto.groupby("addr", sort=False).tail(1)
    live = last[last["bytes"] > 0].fillna({"op": "(no operator)"})
    out = live.groupby("op").agg(allocations=("bytes", "size"), held_bytes=("bytes", "sum")).reset_index()
    total = int(timeline["allocated_bytes"].iloc[position])
    before = total - int(out["held_bytes"].sum())
    if before > 0:
        out = pd.concat([out, pd.DataFrame([{"op": "(before the recording)", "allocations": pd.NA,
                                             "held_bytes": before}])], ignore_index=True)
    out["allocations"] = out["allocations"].astype("Int64")
    out["held_bytes"] = out["held_bytes"].astype("int64")
    out["share_of_allocated"] = out["held_bytes"] / total if total else np.nan
    return out.sort_values("held_bytes", ascending=False, kind="stable").reset_index(drop=True)
