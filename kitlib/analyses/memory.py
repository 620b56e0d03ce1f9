"""Allocator events of a torch.profiler trace: per-operator accounting and memory over time.

With ``profile_memory=True`` the profiler records one instant (``[memory]``) each
time the caching allocator hands out or takes back a block: ``bytes`` (negative =
a free), the block's ``addr``, and the allocator's running totals *after* the
event, ``total_allocated`` (memory in use by tensors) and ``total_reserved``
(memory the allocator holds from CUDA, used or cached).

How the profiler turns those instants into the "CUDA Mem" and "Self CUDA Mem"
columns of ``key_averages()`` (PyTorch ``torch/autograd/profiler.py``,
``_parse_kineto_results``, and ``torch/autograd/profiler_util.py``,
``EventList``/``FunctionEvent``; checked to the byte on the reference recordings):

1. **Total** (``device_memory_usage``): every CPU-side event (operator,
   ``record_function`` label, CUDA runtime call) gets the sum of ``bytes`` of all
   CUDA memory instants whose time lies in its interval, *both ends included*
   (``MemRecordsAcc.in_interval``), **whatever thread made them**.
2. **Children**: events nest by time on their own thread (``_populate_cpu_children``:
   an event is a child of the innermost open event that it does not outlast).
   Then an event whose only child has the same name swallows that child
   (``_remove_dup_nodes``: ``aten::div`` calling ``aten::div`` counts once).
3. **Self** (``self_device_memory_usage``) = total − the children's totals.
4. A row of ``key_averages()`` sums both over every call with that name
   (``ProfilerStep#N`` become ``ProfilerStep*``).

So Self CUDA Mem is *allocations minus frees*, *summed over calls*: not a peak,
not what was live, and negative when an operator frees more than it allocates
(the ``autograd::engine::evaluate_function: …`` rows release the tensors saved for
backward). A label on one thread whose interval covers work on another thread (the
``backward`` label on the main thread, the autograd engine's operators on its own
thread) keeps all of that thread's bytes as its "self", because those operators
are not its children. A GPU-side copy of a label (``gpu_user_annotation``, same
name) is a separate row of ``key_averages()`` with no memory at all.

The profiler's printed table divides by 1024³ and calls it "GB" (``_format_memory``):
its GB are GiB. :func:`format_memory` reproduces it.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from ..errors import KitError
from ..units import bytes_to_gib
from ..model import Trace
from ..model.window import bounds_in, label_at, step_of
from ..phases import FORWARD, LABELS

__all__ = ["profiler_events", "memory_by_event", "memory_by_operator", "records_inside_no_event",
           "compare_with_key_averages",
           "format_memory", "parse_memory_table", "memory_timeline", "memory_peak", "memory_per_step",
           "memory_held_at",
           "DEVICE_TYPES", "MemoryDataError"]

#: ``Device Type`` codes of the memory instants (c10::DeviceType).
DEVICE_TYPES = {"cpu": 0, "cuda": 1}



class MemoryDataError(KitError, ValueError):
    """The trace lacks what a memory analysis needs (no allocator events).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> from kitlib.analyses.memory import MemoryDataError, memory_timeline
    >>> try:
    ...     memory_timeline(tiny_trace())
    ... except MemoryDataError as e:
    ...     print(type(e).__name__, isinstance(e, ValueError))
    MemoryDataError True
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

    A view of the trace's one event tree (``trace.host_events``, built by
    :func:`kitlib.readers.trace.build_host_tree`) with the names this module uses.

    Parameters
    ----------
    trace : Trace

    Returns
    -------
    DataFrame, one row per operator, ``record_function`` label, step, CUDA
    runtime/driver call and — where the trace's rule makes them children
    (``trace.meta["python_frames_rule"]``) — Python frame
        ``source`` (``ops``/``launches``), ``row`` (row label in that table),
        ``name``, ``key`` (the table's row name: ``ProfilerStep#N`` → ``ProfilerStep*``),
        ``kind``, ``pid, tid, start_ns, end_ns`` (ns), ``parent`` (position in this
        frame of the profiler's parent once folded events are gone, -1 at the top)
        and ``merged`` (True for an event folded into a same-named parent,
        ``_remove_dup_nodes``; it is not a row of the profiler's tables and its
        children belong to that parent). Rows are in start order; the index is 0..n-1.

    Notes
    -----
    Source: ``torch/autograd/profiler_util.py`` (``EventList._populate_cpu_children``,
    ``_remove_dup_nodes``).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> tr = tiny_trace()
    >>> from kitlib.analyses.memory import profiler_events
    >>> profiler_events(tr)[["name", "kind", "parent", "merged"]]
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

    Parameters
    ----------
    trace : Trace
        Recorded with ``profile_memory=True``.
    device : {"cuda", "cpu"} or int
        Which memory instants (``Device Type``) to count.
    events : DataFrame, optional
        A :func:`profiler_events` result to reuse.

    Returns
    -------
    DataFrame
        :func:`profiler_events` plus, in bytes: ``n_memory_events``, ``alloc_bytes``,
        ``free_bytes`` (positive), ``total_bytes`` (= alloc − free: the profiler's
        "CUDA Mem" of that call), ``self_alloc_bytes``, ``self_free_bytes`` and
        ``self_bytes`` (total minus the children's totals: "Self CUDA Mem"). Events
        folded into a parent (``merged``) keep their totals but are not rows of
        the profiler's tables (see :func:`memory_by_operator`).

    Raises
    ------
    MemoryDataError
        The trace has no memory events.

    Notes
    -----
    A record belongs to every event whose ``[start, end]`` holds its time, both ends
    included, on any thread (``MemRecordsAcc.in_interval`` in
    ``torch/autograd/profiler_util.py``), compared in the trace's integer ns. torch
    ≤ 2.10 compared them with edges that went through float µs since the epoch, so a
    record within about 128 ns of an edge can land on the other side (issue 41: 448 B a
    row on ``tests/data/oracle_versions/torch-2.5/convnet``, 16,384 B on another run of it); on such traces (``trace.meta
    ["memory_edges_float_us"]``, :func:`kitlib.readers.trace.memory_edges_rule`) the
    same edges are worked out here.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> tr = open_capture("profiler_5step").trace
    >>> from kitlib.analyses.memory import memory_by_event
    >>> memory_by_event(tr)[["name", "n_memory_events", "self_bytes"]].head(2)
                 name  n_memory_events  self_bytes
    0  ProfilerStep#2             1922   -77071872
    1       data_load                0           0
    """
    ev = profiler_events(trace) if events is None else events.copy()
    m = _memory_of(trace, device)
    t = m["start_ns"].to_numpy(dtype=np.int64)
    b = m["bytes"].to_numpy(dtype=np.int64)
    # the profiler's own rule for memory records, both ends included (in_interval):
    # named here, the one place kitlib does not use [start, end)
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
    """The ``[start, end]`` (ns, both ends included) that the recording's profiler held
    each event's memory records to: the event's own ns, or, where ``trace.meta
    ["memory_edges_float_us"]`` says it (torch ≤ 2.10,
    :func:`kitlib.readers.trace.memory_edges_rule`), the edges it got from
    ``in_interval(start_ns / 1000, end_ns / 1000)`` then ``× 1000`` in
    ``MemRecordsAcc.in_interval`` (``torch/autograd/profiler_util.py``, until pytorch PR
    #171788). Those ns are since the epoch (the trace's times + ``baseTimeNanoseconds``),
    about 1.8e18, where a float64 is a multiple of 256 ns: the edges move by up to about
    128 ns, and a record that close to an event's edge lands on the other side (issue 41:
    up to 448 B a row on ``tests/data/oracle_versions/torch-2.5/convnet``). Worked out as Python does it
    (``int / int`` rounded once, then ``* 1000``), one event at a time."""
    s = events["start_ns"].to_numpy(np.int64)
    e = events["end_ns"].to_numpy(np.int64)
    base = int(trace.meta.get("base_time_ns") or 0)
    if not trace.meta.get("memory_edges_float_us") or not base or not len(s):
        return s, e          # without baseTimeNanoseconds the profiler's epoch ns are unknown
    # t >= x / 1000 * 1000  <=>  t >= ceil(...), exactly, in integers (t is an integer)
    lo = np.array([math.ceil((x + base) / 1000 * 1000) - base for x in s.tolist()], dtype=np.int64)
    hi = np.array([math.floor((x + base) / 1000 * 1000) - base for x in e.tolist()], dtype=np.int64)
    return lo, hi


def _inside_no_event(events: pd.DataFrame, t: np.ndarray, trace: Trace | None = None) -> np.ndarray:
    """Which of the sorted record times ``t`` fall inside none of ``events``' ``[start,
    end]`` (both ends included, as :func:`memory_by_event` counts them, by the edges of
    :func:`_record_edges` when ``trace`` is given)."""
    covered = np.zeros(len(t), dtype=bool)
    if len(t) and len(events):
        if trace is not None:
            s_, e_ = _record_edges(trace, events)
        else:
            s_, e_ = events["start_ns"].to_numpy(np.int64), events["end_ns"].to_numpy(np.int64)
        delta = np.zeros(len(t) + 1, dtype=np.int64)
        lo, hi = bounds_in(s_, e_, t, closed="both")
        np.add.at(delta, lo, 1)
        np.add.at(delta, hi, -1)
        covered = np.cumsum(delta)[:-1] > 0
    return ~covered


def records_inside_no_event(trace: Trace, events: pd.DataFrame | None = None) -> pd.DataFrame:
    """The allocator records (every device) that fall inside no CPU-side event: the
    profiler makes each one an event of its own, named ``[memory]``, with no duration,
    and ``key_averages()`` shows them as a ``[memory]`` row (:func:`memory_by_operator`
    and :func:`kitlib.analyses.grouping.group_ops` do too).

    Parameters
    ----------
    trace : Trace
    events : DataFrame, optional
        A :func:`profiler_events` result to reuse.

    Returns
    -------
    DataFrame
        Rows of ``trace.memory``, in time order; empty when the trace has no memory
        records.

    Notes
    -----
    Source: ``torch/autograd/profiler.py``, ``_parse_kineto_results``: a record that no
    event's ``in_interval`` claimed (``mem_record[1]`` still False) becomes a
    ``FunctionEvent`` by ``_create_function_event_for_memory_events``, device type CPU,
    its bytes in ``cpu_memory_usage`` or ``device_memory_usage`` by the record's device.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> from kitlib.analyses.memory import records_inside_no_event
    >>> len(records_inside_no_event(tiny_trace()))        # no memory records at all
    0
    """
    m = trace.memory.sort_values("start_ns", kind="stable")
    if m.empty:
        return m
    ev = profiler_events(trace) if events is None else events
    return m[_inside_no_event(ev, m["start_ns"].to_numpy(dtype=np.int64), trace)]


def memory_by_operator(trace: Trace, device="cuda", by_event: pd.DataFrame | None = None) -> pd.DataFrame:
    """The "CUDA Mem" and "Self CUDA Mem" columns of ``key_averages()``, rebuilt.

    Parameters
    ----------
    trace : Trace
    device : {"cuda", "cpu"} or int
    by_event : DataFrame, optional
        A :func:`memory_by_event` result to reuse.

    Returns
    -------
    DataFrame indexed by ``key`` (operator or label name)
        ``calls``; in bytes, summed over calls: ``alloc_bytes``, ``free_bytes``,
        ``total_bytes`` ("CUDA Mem"), ``self_alloc_bytes``, ``self_free_bytes``,
        ``self_bytes`` ("Self CUDA Mem"); ``self_gib`` (the printed table's "GB").
        Sorted by ``self_bytes``, largest first; rows that tie keep the order in which
        their name first starts in the trace. Allocator records that fall inside
        no event (inside: ``start_ns <= t <= end_ns``) form a ``[memory]`` row, as in
        the profiler's table; Python frames
        are never rows (they may still be children that take a share of a parent's
        memory, by the trace's rule).

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> tr = open_capture("profiler_5step").trace       # recorded with profile_memory=True
    >>> from kitlib.analyses.memory import memory_by_operator
    >>> memory_by_operator(tr).head(2)[["calls", "self_bytes"]]
                             calls   self_bytes
    key
    aten::empty               2660  59423967744
    aten::cudnn_convolution    265  28514713600
    """
    ev = memory_by_event(trace, device) if by_event is None else by_event
    # allocator records inside no event at all become rows of their own, "[memory]"
    # (``_parse_kineto_results``: ``_create_function_event_for_memory_events``)
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
    """Line the rebuilt columns up with the profiler's own ``key_averages()`` rows.

    Parameters
    ----------
    by_operator : DataFrame
        From :func:`memory_by_operator`.
    rows : list of dict
        The profiler's rows (a bundle's ``key_averages()["by_name"]``), with ``key``,
        ``count``, ``device_memory_usage_bytes``, ``self_device_memory_usage_bytes``.
        Rows without a CPU-side event of that name (kernels, GPU-side labels) are left
        out; where a name has a CPU and a GPU row (``forward`` …), both are summed —
        the GPU row always holds 0 bytes.

    Returns
    -------
    DataFrame indexed by ``key``
        ``calls``, ``profiler_calls``, ``total_bytes``, ``profiler_total_bytes``,
        ``self_bytes``, ``profiler_self_bytes``, ``match`` (all three equal).

    Raises
    ------
    KitError
        ``rows`` lack the memory fields (recorded without ``profile_memory``).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> from kitlib.analyses.memory import compare_with_key_averages, memory_by_operator
    >>> by_op = memory_by_operator(trace_from_json(tiny_profile_doc()))
    >>> rows = [{"key": "aten::conv2d", "count": 1, "device_memory_usage_bytes": 4096,
    ...          "self_device_memory_usage_bytes": 4096}]
    >>> compare_with_key_averages(by_op, rows).T
    key                  aten::conv2d
    calls                           1
    profiler_calls                  1
    total_bytes                  4096
    profiler_total_bytes         4096
    self_bytes                   4096
    profiler_self_bytes          4096
    match                        True
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
    """A byte count as the profiler's printed table writes it.

    ``26.54 GB`` there means 26.54 × 2³⁰ bytes: the profiler divides by 1024 and
    still writes KB, MB, GB (``torch/autograd/profiler_util.py``, ``_format_memory``).

    Examples
    --------
    >>> from kitlib.analyses.memory import format_memory
    >>> format_memory(1536)
    '1.50 KB'
    """
    kb, mb, gb = 1024, 1024 ** 2, 1024 ** 3
    if abs(nbytes) >= gb:
        return f"{nbytes * 1.0 / gb:.2f} GB"
    if abs(nbytes) >= mb:
        return f"{nbytes * 1.0 / mb:.2f} MB"
    if abs(nbytes) >= kb:
        return f"{nbytes * 1.0 / kb:.2f} KB"
    return f"{nbytes} B"


_MEM_RE = re.compile(r"(-?\d+(?:\.\d+)?) (GB|MB|KB|B)")


def parse_memory_table(text: str) -> pd.DataFrame:
    """Read the memory columns of ``key_averages().table(...)`` printouts.

    Parameters
    ----------
    text : str
        One or more tables as the profiler prints them (e.g. a bundle's
        ``key_averages_tables.txt``); only tables with ``CUDA Mem`` and
        ``Self CUDA Mem`` columns are read. Names the profiler shortened with ``...``
        are kept as printed.

    Returns
    -------
    DataFrame
        ``table`` (0, 1, … in the text), ``name``, ``cuda_mem``, ``self_cuda_mem``
        (as printed, e.g. ``"26.56 GB"``), ``calls``.

    Raises
    ------
    KitError
        No table with those columns in ``text``.

    Examples
    --------
    >>> from kitlib.analyses.memory import parse_memory_table
    >>> text = '''
    ... ----------------  ------------  ------------  ------------
    ...             Name      CUDA Mem  Self CUDA Mem    # of Calls
    ... ----------------  ------------  ------------  ------------
    ...     aten::conv2d       4.00 Kb       4.00 Kb             1
    ...       aten::relu       1.00 Kb       1.00 Kb             1
    ... ----------------  ------------  ------------  ------------
    ... '''
    >>> parse_memory_table(text)
       table          name cuda_mem self_cuda_mem  calls
    0      0  aten::conv2d  4.00 Kb       4.00 Kb      1
    1      0    aten::relu  1.00 Kb       1.00 Kb      1
    """
    out, table = [], -1
    cols, spans, rule = None, None, None
    for line in text.splitlines():
        if "Self CUDA Mem" in line and "Name" in line:
            table += 1
            heads = re.split(r"\s{2,}", line.strip())
            cols = {h: i for i, h in enumerate(heads)}
            # the profiler pads each cell to the width of its column's dashes (the rule
            # printed above the header): cut rows there, so an empty cell (a row's Source
            # Location, an operator without a Python stack) is read as empty, not skipped
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
    """Live (allocated) and reserved memory after every allocator event.

    Parameters
    ----------
    trace : Trace
    device : {"cuda", "cpu"} or int
    phases : sequence of str
        ``record_function`` labels that name the phases of a step.

    Returns
    -------
    DataFrame, one row per memory event in time order
        ``start_ns``, ``tid``, ``bytes`` (+ allocation, − free), ``allocated_bytes``
        (the allocator's ``Total Allocated`` after the event: memory held by tensors),
        ``reserved_bytes`` (``Total Reserved``: what the caching allocator holds from
        CUDA, used or cached), ``device_id``, ``step`` (the ``ProfilerStep#N`` whose
        interval contains it, ``<NA>`` outside), ``phase`` (the label of ``phases``
        open at that moment on any thread: the autograd thread's work falls inside
        ``backward``), ``op`` (innermost operator or label on the event's own thread).

    Raises
    ------
    MemoryDataError
        The trace has no memory events.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> tr = open_capture("profiler_5step").trace       # recorded with profile_memory=True
    >>> from kitlib.analyses.memory import memory_timeline
    >>> tl = memory_timeline(tr)
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
    at = label_at(t, ph)                                     # the phase open latest, on any thread
    phase = np.full(len(t), None, dtype=object)              # None outside every phase
    hit = ~at.isna()
    phase[hit] = ph["name"].loc[at[hit].to_numpy(np.int64)].to_numpy(dtype=object)
    out["phase"] = phase
    op = np.full(len(m), None, dtype=object)
    op_names = trace.ops["name"].to_numpy(dtype=object)
    for (pid, tid), idx in (m.groupby(["pid", "tid"]).groups.items() if len(op_names) else ()):
        rows = np.asarray(innermost_op_at(trace, pid, tid, m.loc[idx, "start_ns"].to_numpy()), dtype=np.int64)
        pos = trace.ops.index.get_indexer(np.maximum(rows, 0))     # row labels -> positions
        op[np.asarray(idx)] = np.where(rows >= 0, op_names[pos], None)
    out["op"] = op
    return out


def memory_peak(timeline: pd.DataFrame) -> pd.Series:
    """The moment live (allocated) memory was highest in a :func:`memory_timeline`.

    Returns
    -------
    Series
        That row (the first, if several tie): ``start_ns, bytes, allocated_bytes,
        reserved_bytes, step, phase, op`` …, plus ``position`` (its row number) and
        ``reserved_max_bytes`` (the highest ``reserved_bytes`` of the whole timeline).

    Raises
    ------
    MemoryDataError
        An empty timeline.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> tr = open_capture("profiler_5step").trace       # recorded with profile_memory=True
    >>> from kitlib.analyses.memory import memory_peak, memory_timeline
    >>> peak = memory_peak(memory_timeline(tr))
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

    Returns
    -------
    DataFrame, one row per step
        ``step``, ``events``, ``start_allocated_bytes`` (before the step's first
        allocator event), ``peak_allocated_bytes``, ``end_allocated_bytes`` (after its
        last), ``growth_bytes`` (end − start), ``forward_growth_bytes`` (allocated
        bytes added by the events inside the ``forward`` label: the activations kept
        for backward), ``reserved_max_bytes``. Equal starts from step to step are what
        a training loop without a leak looks like; growth *inside* a step is normal.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> tr = open_capture("profiler_5step").trace
    >>> from kitlib.analyses.memory import memory_per_step, memory_timeline
    >>> memory_per_step(memory_timeline(tr))[["step", "events", "forward_growth_bytes"]].head(2)
       step  events  forward_growth_bytes
    0     2    1922           10942159360
    1     3    1922           10942159360
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
    """Which operators allocated the memory still held at one moment of a :func:`memory_timeline`.

    An allocation is held at row ``position`` when the last allocator event at its address,
    up to and including that row, is an allocation (a free would have released it; an
    address reused later is a new allocation). Memory allocated before the trace's first
    allocator event cannot be attributed: it gets one row, ``op`` = ``"(before the
    recording)"``, the rest of ``allocated_bytes`` at that moment.

    Parameters
    ----------
    trace : Trace
        The trace the timeline was built from (its ``memory`` table has the addresses).
    timeline : DataFrame
        :func:`memory_timeline` of ``trace`` for ``device``.
    position : int
        A row number of ``timeline`` (e.g. ``memory_peak(timeline)["position"]``).

    Returns
    -------
    DataFrame, one row per operator, largest first
        ``op`` (the innermost operator or label that made the allocation), ``allocations``,
        ``held_bytes``, ``share_of_allocated`` (of ``allocated_bytes`` at that row).

    Raises
    ------
    MemoryDataError
        ``position`` is not a row of ``timeline``.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> from kitlib.analyses.memory import memory_held_at, memory_timeline
    >>> tr = trace_from_json(tiny_profile_doc())
    >>> tl = memory_timeline(tr)
    >>> tl[["start_ns", "bytes", "op"]]
       start_ns  bytes              op
    0      2500   4096    aten::conv2d
    1      9200   1024      aten::relu
    2     15000  -4096  ProfilerStep#1
    >>> memory_held_at(tr, tl, 1)
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
