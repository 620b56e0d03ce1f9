"""Why is the GPU idle? Gaps per stream, the launch queue, busy streams, and a verdict per step.

Sources: docs/SOURCES.md#gpu-idle-module (categories, threshold, boundaries),
docs/SOURCES.md#gpu-idle-threshold (30 µs, not HTA's 30 ns), docs/SOURCES.md#gpu-idle-hta.

``source`` is a Trace or NsysReport; ``events`` a :func:`device_events` table to use instead
(a subset, say); ``steps`` the windows (``step, start_ns, end_ns``), default
:func:`kitlib.analyses.steps.steps_of`; ``by`` ``"step"`` or ``"recording"``. Times are int64
ns. :class:`GpuIdleError`, naming the file, when GPU events, launches or steps are missing."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import KitError
from ..model.sources import check_source
from ..model.window import bounds_in, containing, count_in
from .collectives import COMM_KERNEL_PATTERN
from .intervals import idle_gaps_in_windows, per_window, union_arrays

__all__ = ["GpuIdleError", "KERNEL_WAIT_MAX_NS", "MAX_QUEUE_LENGTH", "CATEGORIES", "EVENT_COLUMNS",
           "device_events", "stream_gaps", "idle_breakdown", "queue_length", "queue_summary",
           "stream_concurrency", "temporal_breakdown", "step_verdicts", "source_name", "checked_events",
           "require_launches"]

#: A queued gap shorter than this (ns) is *kernel wait* (HTA's ``consecutive_kernel_delay`` as applied).
KERNEL_WAIT_MAX_NS = 30_000

#: A stream's launch queue is full at this many unfinished launches: undocumented by CUDA; HTA's
#: ``CUDA_MAX_LAUNCH_QUEUE_PER_STREAM`` (launches block at 1022-1024, forums.developer.nvidia.com/t/255260).
MAX_QUEUE_LENGTH = 1024

#: The categories of a gap, in the order the tables list them.
CATEGORIES = ("host_wait", "kernel_wait", "other", "no_launch")

#: Columns of :func:`device_events`.
EVENT_COLUMNS = ["kind", "name", "device", "stream", "start_ns", "end_ns", "dur_ns", "bytes",
                 "bandwidth_gb_per_s", "copy_kind", "src_memory", "dst_memory", "correlation", "launch_name",
                 "launch_start_ns", "launch_dur_ns", "launch_end_ns", "launch_tid", "op_name", "link"]

#: Verdict thresholds (shares of a step's wall time), see :func:`step_verdicts`.
CPU_BOUND_EMPTY_SHARE = 0.20
GPU_BOUND_EMPTY_SHARE = 0.05
GPU_BOUND_BUSY_SHARE = 0.90



_NO_STEPS = pd.DataFrame({"step": pd.Series([], dtype="int64"), "start_ns": pd.Series([], dtype="int64"),
                          "end_ns": pd.Series([], dtype="int64")})


class GpuIdleError(KitError, ValueError):
    """A recording cannot answer a GPU-idle question; the message names the file and what is missing.

    Examples
    --------
    >>> checked_events(None, events=pd.DataFrame({"start_ns": []}))
    Traceback (most recent call last):
    ...
    kitlib.analyses.gpu_idle.GpuIdleError: <table>: the events table lacks ['device', 'stream', 'end_ns']; ...
    """


# --------------------------------------------------------------------------- the events
def source_name(source) -> str:
    """How a message names a recording: its ``path``, or ``"<table>"``. Never raises.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> source_name(tiny_trace()), source_name(None)
    ('tiny.json', '<table>')
    """
    return str(getattr(source, "path", "<table>"))


def device_events(source) -> pd.DataFrame:
    """Every kernel, copy and set of a recording, with the launch that produced it.

    Returns :data:`EVENT_COLUMNS` by device, stream, start, end: ``start_ns, end_ns, dur_ns``
    (int64 ns); ``bytes`` (<NA> for kernels); ``bandwidth_gb_per_s`` (the profiler's GB/s, else
    NaN); ``copy_kind``, ``src_memory``, ``dst_memory``; ``launch_*`` (Int64 ns, <NA> where not
    recorded); ``op_name`` (profiler traces only); ``link`` (:data:`kitlib.analyses.chain.LINKS`,
    or ``correlation``/``no_launch`` for an NsysReport).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> device_events(tiny_trace())[["kind", "stream", "start_ns", "end_ns", "launch_start_ns"]]
         kind  stream  start_ns  end_ns  launch_start_ns
    0  kernel       7       300     700              150
    """
    check_source(source, None, error=GpuIdleError)
    if source.has_operators:     # a profiler trace names the operator behind each launch (chain)
        from .chain import chain
        return source.derived("gpu_idle.device_events", ("ops", "launches", "gpu"),
                              lambda: _events(source, chain(source))).copy()
    return _events(source, None)


def _events(source, chain_df: pd.DataFrame | None) -> pd.DataFrame:
    """:func:`device_events`; ``op_name`` and ``link`` from ``chain_df`` where given."""
    g = source.gpu_events()
    ev = pd.DataFrame({c: g[c].to_numpy(dtype=object) if c == "name" else g[c]
                       for c in ("kind", "name", "device", "stream", "start_ns", "end_ns", "dur_ns", "bytes",
                                 "bandwidth_gb_per_s", "copy_kind", "src_memory", "dst_memory",
                                 "correlation", "launch_start_ns", "launch_dur_ns")})
    ev["launch_name"], ev["launch_tid"] = g["launch"], g["tid"]
    ev["launch_end_ns"] = ev["launch_start_ns"] + ev["launch_dur_ns"]
    if chain_df is None:
        ev["op_name"] = None
        ev["link"] = np.where(ev["launch_start_ns"].notna(), "correlation", "no_launch")
    else:                               # every GPU event of one launch has its operator and link
        by = chain_df.dropna(subset=["correlation"]).drop_duplicates("correlation").set_index("correlation")
        ev["op_name"] = ev["correlation"].map(by["op_name"]).to_numpy(dtype=object)
        ev["link"] = ev["correlation"].map(by["link"]).fillna("no_launch").to_numpy(dtype=object)
    for c in ("start_ns", "end_ns", "dur_ns"):
        ev[c] = ev[c].astype("int64")
    for c in ("bytes", "correlation", "launch_start_ns", "launch_dur_ns", "launch_end_ns", "launch_tid",
              "device", "stream"):
        ev[c] = pd.array(ev[c].to_numpy(dtype=object), dtype="Int64") if ev[c].dtype == object \
            else ev[c].astype("Int64")
    ev = ev[EVENT_COLUMNS]
    key = [ev["end_ns"].to_numpy(), ev["start_ns"].to_numpy(),
           ev["stream"].fillna(-1).to_numpy(dtype=np.int64), ev["device"].fillna(-1).to_numpy(dtype=np.int64)]
    return ev.iloc[np.lexsort(key)].reset_index(drop=True)


def checked_events(source, events=None) -> pd.DataFrame:
    """``events``, else ``device_events(source)``, checked to have the time columns and a row.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> checked_events(tiny_trace())[["kind", "name", "start_ns", "end_ns"]]
         kind         name  start_ns  end_ns
    0  kernel  relu_kernel       300     700
    """
    ev = device_events(source) if events is None else events
    missing = [c for c in ("device", "stream", "start_ns", "end_ns") if c not in ev.columns]
    if missing:
        raise GpuIdleError(f"{source_name(source)}: the events table lacks {missing}; use device_events()")
    if ev.empty:
        raise GpuIdleError(f"{source_name(source)}: no GPU events (no kernel, copy or set): a CPU-only "
                           "recording, or one without CUDA activity, cannot tell when the GPU was idle")
    return ev


def require_launches(ev: pd.DataFrame, source) -> None:
    """Refuse a :func:`device_events` table none of whose rows has its launch recorded.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> require_launches(device_events(tiny_trace()).assign(launch_start_ns=None), tiny_trace())
    Traceback (most recent call last):
    ...
    kitlib.analyses.gpu_idle.GpuIdleError: tiny.json: none of its 1 GPU events has its launch ...
    """
    if ev["launch_start_ns"].notna().sum() == 0:
        raise GpuIdleError(f"{source_name(source)}: none of its {len(ev):,} GPU events has its launch (CUDA "
                           "runtime/driver call) in the recording, so whether work was queued cannot be "
                           "told: no host wait, no launch queue (record CUDA API calls: torch.profiler's "
                           "CUDA activity, or nsys -t cuda)")


def _streams(ev: pd.DataFrame):
    """(device, stream) of each row as int64 arrays (-1 where unknown) and group ids."""
    d = ev["device"].fillna(-1).to_numpy(dtype=np.int64)
    s = ev["stream"].fillna(-1).to_numpy(dtype=np.int64)
    if not len(d):
        return d, s, np.zeros(0, np.int64), []
    uniq, gid = np.unique(np.stack([d, s], axis=1), axis=0, return_inverse=True)
    return d, s, gid.reshape(-1).astype(np.int64), [tuple(u) for u in uniq.tolist()]


def _steps(source, steps=None, or_none: bool = False) -> pd.DataFrame:
    """``steps``, else the source's; without steps, :data:`_NO_STEPS` if ``or_none`` else an error."""
    if steps is not None:
        return steps
    from .steps import steps_of
    try:
        return steps_of(source)
    except KitError as e:
        if or_none:
            return _NO_STEPS
        raise GpuIdleError(str(e)) from None


# --------------------------------------------------------------------------- gaps
def _split(start: np.ndarray, end: np.ndarray, w0: np.ndarray, w1: np.ndarray):
    """Cut each [start, end) at the windows' bounds; for each part: (row, start, end,
    window position or -1). Linear in parts: each bound cuts at most the intervals it
    falls in."""
    bounds = np.unique(np.concatenate([w0, w1]).astype(np.int64))
    # the bounds strictly inside (start, end) cut it; one at either end cuts nothing
    k0, k1 = bounds_in(start, end, bounds, closed="neither")
    cuts = k1 - k0
    pieces = cuts + 1
    row = np.repeat(np.arange(len(start)), pieces)
    first = np.repeat(np.cumsum(pieces) - pieces, pieces)
    j = np.arange(len(row)) - first
    nb = len(bounds)
    lo_b = bounds[np.clip(k0[row] + j - 1, 0, max(nb - 1, 0))] if nb else np.zeros(len(row), np.int64)
    hi_b = bounds[np.clip(k0[row] + j, 0, max(nb - 1, 0))] if nb else np.zeros(len(row), np.int64)
    ps = np.where(j == 0, start[row], lo_b)
    pe = np.where(j == pieces[row] - 1, end[row], hi_b)
    win = containing(w0, w1, ps, closed="left") if len(w0) else np.full(len(row), -1, np.int64)
    return row, ps.astype(np.int64), pe.astype(np.int64), win


def classify_gaps(stream, start_ns, end_ns, launch_start_ns, kernel_wait_max_ns: int = KERNEL_WAIT_MAX_NS) -> pd.DataFrame:
    """Lesson 04's idle categories: every gap between GPU events on one stream, and why.

    Sources: docs/SOURCES.md#gpu-idle-classify-gaps

    Per event: its ``stream``, times and its launch's start (<NA> where unknown), ns on one clock.

    Returns one row per gap, by stream then time: ``next`` (input position of the event after
    it), ``prev_end_ns``, ``end_ns``, ``gap_ns`` (ns), ``category``.

    Examples
    --------
    >>> classify_gaps([7, 7, 7], [0, 50, 80], [40, 60, 90], [0, 45, 10])
       next  prev_end_ns  end_ns  gap_ns     category
    0     1           40      50      10    host_wait
    1     2           60      80      20  kernel_wait
    """
    stream = np.asarray(stream)
    start, end = np.asarray(start_ns, dtype=np.int64), np.asarray(end_ns, dtype=np.int64)
    launch = pd.array(launch_start_ns, dtype="Int64")
    order = np.lexsort((end, start, stream))
    st, b, e = stream[order], start[order], end[order]
    # integer ns throughout: a float64 cannot hold a time since the epoch (1.7e18 ns) to the ns
    reach = pd.Series(e).groupby(st).cummax().to_numpy()   # the end of everything so far, per stream
    prev_end = np.r_[np.int64(0), reach[:-1]]
    has_prev = np.r_[False, st[1:] == st[:-1]]
    at = np.flatnonzero(has_prev & (b > prev_end))
    nxt, g0, g1 = order[at], prev_end[at], b[at]
    known = ~np.asarray(launch.isna())[nxt]
    la = launch.to_numpy(dtype=np.int64, na_value=0)[nxt]
    cat = np.where(~known, "no_launch",
                   np.where(la > g0, "host_wait", np.where(g1 - g0 < kernel_wait_max_ns, "kernel_wait", "other")))
    return pd.DataFrame({"next": nxt, "prev_end_ns": g0, "end_ns": g1, "gap_ns": g1 - g0, "category": cat})


def stream_gaps(source, kernel_wait_max_ns: int = KERNEL_WAIT_MAX_NS, events=None, steps=None) -> pd.DataFrame:
    """Every gap between GPU events on one stream, classified, cut at step boundaries.

    A queued gap shorter than ``kernel_wait_max_ns`` (default 30 µs) is *kernel wait*, a longer
    one *other*.

    Returns one row per gap or part of one inside a step, by device, stream, start: ``gap`` (its
    number), ``device``, ``stream``, ``step`` (Int64; <NA> outside steps), ``start_ns, end_ns,
    dur_ns`` (the part, ns), ``gap_ns`` (the whole gap), ``category`` (:data:`CATEGORIES`),
    ``next_*`` (the GPU event after the gap), ``prev_end_ns`` (where the gap starts).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> stream_gaps(trace_from_json(tiny_profile_doc()))[["start_ns", "end_ns", "category"]]
       start_ns  end_ns   category
    0      9000   10500  host_wait
    """
    ev = checked_events(source, events)
    require_launches(ev, source)
    d, s, gid, _ = _streams(ev)
    gaps = classify_gaps(gid, ev["start_ns"], ev["end_ns"], ev["launch_start_ns"], kernel_wait_max_ns)
    nxt = gaps["next"].to_numpy()
    g0, g1, glen = (gaps[c].to_numpy() for c in ("prev_end_ns", "end_ns", "gap_ns"))
    cat = gaps["category"].to_numpy(dtype=str)
    st = _steps(source, steps, or_none=True)
    w0 = st["start_ns"].to_numpy(dtype=np.int64)
    w1 = st["end_ns"].to_numpy(dtype=np.int64)
    row, ps, pe, win = _split(g0, g1, w0, w1)
    src = nxt[row]
    step_vals = st["step"].to_numpy(dtype=np.int64)
    out = pd.DataFrame({
        "gap": row.astype(np.int64), "device": d[nxt][row], "stream": s[nxt][row],
        "step": pd.array(np.where(win >= 0, step_vals[np.maximum(win, 0)] if len(step_vals) else 0, 0),
                         dtype="Int64"),
        "start_ns": ps, "end_ns": pe, "dur_ns": pe - ps, "gap_ns": glen[row],
        "category": cat[row],
        "next_kind": ev["kind"].to_numpy()[src], "next_name": ev["name"].to_numpy()[src],
        "next_launch_name": ev["launch_name"].to_numpy()[src],
        "next_launch_start_ns": ev["launch_start_ns"].array[src],   # Int64: exact
        "prev_end_ns": g0[row]})
    out.loc[win < 0, "step"] = pd.NA
    out = out[out["dur_ns"] > 0].reset_index(drop=True)
    out.attrs["kernel_wait_max_ns"] = int(kernel_wait_max_ns)
    out.attrs["note"] = (f"{len(gaps):,} gaps between {len(ev):,} GPU events on {len(np.unique(gid))} stream(s); "
                         f"kernel wait: a queued gap < {kernel_wait_max_ns:,} ns")
    return out


def idle_breakdown(source, by: str = "step", kernel_wait_max_ns: int = KERNEL_WAIT_MAX_NS,
                   events=None, steps=None) -> pd.DataFrame:
    """Idle time per stream, split into host wait, kernel wait, other and no launch.

    By recording, the figures HTA's ``get_idle_time_breakdown`` gives.

    Returns, int64 ns: ``step`` (by step only), ``device``, ``stream``; ``window_ns`` (the step, or
    the stream's first start to last end); ``busy_ns`` (union); ``<category>_ns`` (gap time);
    ``gaps_ns`` (their sum); ``no_work_ns`` (by step: ``window_ns - busy_ns - gaps_ns``); ``gaps``.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> idle_breakdown(tiny_trace())[["step", "stream", "window_ns", "busy_ns", "gaps_ns", "no_work_ns"]]
       step  stream  window_ns  busy_ns  gaps_ns  no_work_ns
    0     1       7       1000      400        0         600
    """
    if by not in ("step", "recording"):
        raise ValueError(f"by must be 'step' or 'recording', not {by!r}")
    ev = checked_events(source, events)
    st = _steps(source, steps) if by == "step" else _NO_STEPS
    gaps = stream_gaps(source, kernel_wait_max_ns, events=ev, steps=st)   # by recording: gaps whole
    d, s, gid, uniq = _streams(ev)
    keys = ["device", "stream"] if by == "recording" else ["step", "device", "stream"]
    sums = gaps.pivot_table(index=keys, columns="category", values="dur_ns", aggfunc="sum",
                            fill_value=0, observed=True) if len(gaps) else None
    counts = gaps.groupby(keys).size() if len(gaps) else None
    start = ev["start_ns"].to_numpy(dtype=np.int64)
    end = ev["end_ns"].to_numpy(dtype=np.int64)
    rows = []
    merged = {}
    for g, (dev, stream) in enumerate(uniq):
        sel = gid == g
        merged[(dev, stream)] = union_arrays(start[sel], end[sel])
    if by == "recording":
        for (dev, stream), (ms, me) in merged.items():
            rows.append({"device": dev, "stream": stream, "window_ns": int(me.max() - ms.min()) if len(ms) else 0,
                         "busy_ns": int((me - ms).sum())})
    else:
        win = st[["start_ns", "end_ns"]].reset_index(drop=True)
        busy = {key: per_window(pd.DataFrame({"start_ns": ms, "end_ns": me}), win)["busy_ns"].to_numpy()
                for key, (ms, me) in merged.items()}
        for k in range(len(st)):
            a, b = int(st["start_ns"].iloc[k]), int(st["end_ns"].iloc[k])
            for dev, stream in merged:
                rows.append({"step": int(st["step"].iloc[k]), "device": dev, "stream": stream,
                             "window_ns": b - a, "busy_ns": int(busy[(dev, stream)][k])})
    out = pd.DataFrame(rows)
    idx = pd.MultiIndex.from_frame(out[keys])
    for c in CATEGORIES:
        col = sums[c] if sums is not None and c in sums.columns else None
        out[f"{c}_ns"] = (col.reindex(idx).fillna(0).to_numpy() if col is not None
                          else np.zeros(len(out))).astype(np.int64)
    out["gaps_ns"] = out[[f"{c}_ns" for c in CATEGORIES]].sum(axis=1).astype(np.int64)
    if by == "step":
        out["no_work_ns"] = (out["window_ns"] - out["busy_ns"] - out["gaps_ns"]).astype(np.int64)
    out["gaps"] = (counts.reindex(idx).fillna(0).to_numpy() if counts is not None
                   else np.zeros(len(out))).astype(np.int64)
    for c in keys:
        out[c] = out[c].astype("int64")
    out.attrs["kernel_wait_max_ns"] = int(kernel_wait_max_ns)
    out.attrs["note"] = gaps.attrs.get("note", "")
    return out.reset_index(drop=True)


# --------------------------------------------------------------------------- the launch queue
def _queue_changes(ev: pd.DataFrame, until: str):
    """Per stream: sorted distinct times and the queue length from each on."""
    known = ev["launch_start_ns"].notna().to_numpy()
    e = ev[known]
    d, s, gid, uniq = _streams(e)
    up = e["launch_start_ns"].to_numpy(dtype=np.int64)
    down = e["end_ns" if until == "end" else "start_ns"].to_numpy(dtype=np.int64)
    t = np.concatenate([up, down])
    delta = np.concatenate([np.ones(len(up), np.int64), -np.ones(len(down), np.int64)])
    g = np.concatenate([gid, gid])
    order = np.lexsort((t, g))
    t, delta, g = t[order], delta[order], g[order]
    last = np.r_[(g[1:] != g[:-1]) | (t[1:] != t[:-1]), True] if len(t) else np.zeros(0, bool)
    # each stream's changes sum to 0, so one running total restarts at 0 with each stream
    value = np.cumsum(delta)
    return t[last], value[last], g[last], uniq, int((~known).sum())


def queue_length(source, until: str = "end", events=None) -> pd.DataFrame:
    """The launch queue of each stream over time: launched GPU work not yet finished.

    Sources: docs/SOURCES.md#gpu-idle-queue-length

    ``until`` is ``"end"`` (work leaves the queue when it ends) or ``"start"``.

    Returns one row per change, by device, stream, time: ``device``, ``stream``, ``time_ns``,
    ``queue_length`` (until the stream's next row; 0 before its first).

    Examples
    --------
    The tiny trace's one kernel: launched at 150 ns, finished at 700 ns:

    >>> from kitlib.model.examples import tiny_trace
    >>> queue_length(tiny_trace())
       device  stream  time_ns  queue_length
    0       0       7      150             1
    1       0       7      700             0
    """
    if until not in ("end", "start"):
        raise ValueError(f"until must be 'end' or 'start', not {until!r}")
    ev = checked_events(source, events)
    require_launches(ev, source)
    t, v, g, uniq, left = _queue_changes(ev, until)
    keep = np.r_[True, (g[1:] != g[:-1]) | (v[1:] != v[:-1])] if len(t) else np.zeros(0, bool)
    dev = np.array([u[0] for u in uniq], dtype=np.int64)
    stm = np.array([u[1] for u in uniq], dtype=np.int64)
    out = pd.DataFrame({"device": dev[g[keep]], "stream": stm[g[keep]], "time_ns": t[keep],
                        "queue_length": v[keep]})
    out.attrs["left_out"] = left
    out.attrs["until"] = until
    out.attrs["note"] = (f"{left:,} GPU event(s) without a recorded launch left out" if left else
                         "every GPU event's launch is in the recording")
    return out


def _window_stats(T, V, a, b, pred):
    """Time in [a, b) where pred(value) holds, the value's integral and its max, for the step
    function V[i] on [T[i], T[i+1]) (0 before T[0])."""
    if not len(T) or b <= a:
        z = b - a if pred(0) else 0
        return max(z, 0), 0, 0
    # change points strictly inside (a, b) are T[lo:hi]; the value at a was set at T[lo - 1]
    (lo,), (hi,) = bounds_in([a], [b], T, closed="neither")
    i0 = lo - 1
    pts = np.r_[a, T[lo:hi]]
    vals = np.r_[V[i0] if i0 >= 0 else 0, V[lo:hi]]
    dt = np.diff(np.r_[pts, b])
    return int(dt[pred(vals)].sum()), int((vals * dt).sum()), int(vals.max())


def queue_summary(source, until: str = "end", max_queue_length: int = MAX_QUEUE_LENGTH,
                  events=None, steps=None) -> pd.DataFrame:
    """Per step and stream: the launch queue's mean and maximum, the time it was empty,
    and the host time blocked on a full queue (at ``max_queue_length``, default 1,024).

    A launch meets the queue at its start with every change of that instant applied, less the
    launches of that instant.

    Returns one row per (step, device, stream): ``window_ns``, ``queue_empty_ns``,
    ``queue_full_ns`` (ns); ``queue_length_mean`` (time-weighted), ``queue_length_max``;
    ``blocked_launches``, ``blocked_host_ns`` (launches that met a full queue, their summed ns).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> queue_summary(tiny_trace())[["step", "window_ns", "queue_length_mean", "queue_empty_ns"]]
       step  window_ns  queue_length_mean  queue_empty_ns
    0     1       1000               0.55             450
    """
    ev = checked_events(source, events)
    q = queue_length(source, until=until, events=ev)
    st = _steps(source, steps)
    d, s, gid, uniq = _streams(ev)
    known = ev[ev["launch_start_ns"].notna()]
    rows = []
    any_full = False
    for dev, stream in uniq:
        qs = q[(q["device"] == dev) & (q["stream"] == stream)]
        T, V = qs["time_ns"].to_numpy(np.int64), qs["queue_length"].to_numpy(np.int64)
        ks = known[(known["device"].fillna(-1) == dev) & (known["stream"].fillna(-1) == stream)]
        ks = ks.sort_values("launch_start_ns", kind="stable")
        ls = ks["launch_start_ns"].to_numpy(dtype=np.int64)
        ld = ks["launch_dur_ns"].fillna(0).to_numpy(dtype=np.int64)
        # the queue a launch met (see the docstring); V[i] holds on [T[i], T[i+1]), 0 before T[0]
        i = (containing(T, np.r_[T[1:], np.iinfo(np.int64).max], ls, closed="left") if len(T)
             else np.full(len(ls), -1))
        at = np.where(i >= 0, V[np.maximum(i, 0)] if len(V) else 0, 0)
        same = count_in(ls, ls, ls, closed="both")          # launches at that very instant
        before = at - same
        full = before >= max_queue_length
        any_full |= bool((V >= max_queue_length).any())
        n_full = np.r_[0, np.cumsum(full)]                 # blocked launches and host time
        t_full = np.r_[0, np.cumsum(np.where(full, ld, 0))]   # before each position
        # the launches of each step: ls[lo:hi] start in its [start, end) (ls is sorted)
        los, his = bounds_in(st["start_ns"], st["end_ns"], ls, closed="left")
        for k in range(len(st)):
            a, b = int(st["start_ns"].iloc[k]), int(st["end_ns"].iloc[k])
            empty, integral, vmax = _window_stats(T, V, a, b, lambda x: x == 0)
            at_full = _window_stats(T, V, a, b, lambda x: x >= max_queue_length)[0]
            lo, hi = los[k], his[k]
            rows.append({"step": int(st["step"].iloc[k]), "device": int(dev), "stream": int(stream),
                         "window_ns": b - a, "queue_length_mean": integral / (b - a) if b > a else float("nan"),
                         "queue_length_max": vmax, "queue_empty_ns": empty, "queue_full_ns": at_full,
                         "blocked_launches": int(n_full[hi] - n_full[lo]),
                         "blocked_host_ns": int(t_full[hi] - t_full[lo])})
    out = pd.DataFrame(rows).sort_values(["step", "device", "stream"], kind="stable").reset_index(drop=True)
    out.attrs["until"] = until
    out.attrs["note"] = (f"queue counted {'until each event ends' if until == 'end' else 'until each event starts'}; "
                         + ("the queue reached its limit" if any_full else
                            f"no stream's queue ever reached {max_queue_length:,}: the host was never "
                            "blocked on a full queue (blocked_host_ns 0)")
                         + (f"; {q.attrs['left_out']:,} GPU event(s) without a recorded launch left out"
                            if q.attrs["left_out"] else ""))
    return out


# --------------------------------------------------------------------------- concurrency
def _busy_count(ev: pd.DataFrame, dev: int):
    """Step function of the number of busy streams on one device."""
    sub = ev[ev["device"].fillna(-1) == dev]
    d, s, gid, uniq = _streams(sub)
    start = sub["start_ns"].to_numpy(np.int64)
    end = sub["end_ns"].to_numpy(np.int64)
    ts, ds = [], []
    for g in range(len(uniq)):
        ms, me = union_arrays(start[gid == g], end[gid == g])
        ts += [ms, me]
        ds += [np.ones(len(ms), np.int64), -np.ones(len(me), np.int64)]
    t = np.concatenate(ts) if ts else np.zeros(0, np.int64)
    dl = np.concatenate(ds) if ds else np.zeros(0, np.int64)
    order = np.argsort(t, kind="stable")
    t, dl = t[order], dl[order]
    v = np.cumsum(dl)
    last = np.r_[t[1:] != t[:-1], True] if len(t) else np.zeros(0, bool)
    return t[last], v[last], len(uniq), (int(start.min()) if len(start) else 0), (int(end.max()) if len(end) else 0)


def stream_concurrency(source, by: str = "step", events=None, steps=None) -> pd.DataFrame:
    """How long 0, 1, or 2 and more streams of a device were busy at once.

    Sources: docs/SOURCES.md#gpu-idle-stream-concurrency

    By recording, the window runs from the device's first GPU event's start to its last one's end.

    Returns, int64: ``step`` (by step only), ``device``, ``streams`` (with any work),
    ``window_ns``, ``streams_0_ns`` (idle), ``streams_1_ns``, ``streams_2plus_ns`` (ns),
    ``streams_max`` (most busy at once).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> stream_concurrency(tiny_trace())[["step", "streams_0_ns", "streams_1_ns", "streams_2plus_ns"]]
       step  streams_0_ns  streams_1_ns  streams_2plus_ns
    0     1           600           400                 0
    """
    if by not in ("step", "recording"):
        raise ValueError(f"by must be 'step' or 'recording', not {by!r}")
    ev = checked_events(source, events)
    st = _steps(source, steps) if by == "step" else None
    rows = []
    lone = []
    for dev in sorted(set(ev["device"].fillna(-1).astype("int64").tolist())):
        T, V, n, first, last = _busy_count(ev, dev)
        if n < 2:
            lone.append(dev)
        wins = ([(None, first, last)] if by == "recording" else
                [(int(st["step"].iloc[k]), int(st["start_ns"].iloc[k]), int(st["end_ns"].iloc[k]))
                 for k in range(len(st))])
        for step, a, b in wins:
            z = _window_stats(T, V, a, b, lambda x: x == 0)
            one = _window_stats(T, V, a, b, lambda x: x == 1)[0]
            more = _window_stats(T, V, a, b, lambda x: x >= 2)[0]
            row = {"device": dev, "streams": n, "window_ns": b - a, "streams_0_ns": z[0],
                   "streams_1_ns": one, "streams_2plus_ns": more, "streams_max": z[2]}
            if by == "step":
                row = {"step": step, **row}
            rows.append(row)
    out = pd.DataFrame(rows).astype("int64")
    out.attrs["note"] = (f"device(s) {lone} ran work on one stream only: no two streams can be busy at once "
                         "there (streams_2plus_ns is 0 by construction)" if lone else
                         "every device ran work on two or more streams")
    return out


def temporal_breakdown(source, events=None) -> pd.DataFrame:
    """HTA's temporal breakdown per device, from the first GPU event's start to the last one's end.

    Sources: docs/SOURCES.md#gpu-idle-temporal-breakdown

    Returns ``device``, ``span_ns``, ``idle_ns``, ``compute_ns``, ``non_compute_ns`` (int64 ns;
    the last three add up to ``span_ns``).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> temporal_breakdown(tiny_trace())
       device  span_ns  idle_ns  compute_ns  non_compute_ns
    0       0      400        0         400               0
    """
    ev = checked_events(source, events)
    rows = []
    for dev, sub in ev.groupby(ev["device"].fillna(-1).astype("int64"), sort=True):
        s, e = sub["start_ns"].to_numpy(np.int64), sub["end_ns"].to_numpy(np.int64)
        span = int(e.max() - s.min())
        ms, me = union_arrays(s, e)
        comp = (sub["kind"] == "kernel") & ~sub["name"].astype(str).str.contains(COMM_KERNEL_PATTERN, regex=True)
        cs, ce = union_arrays(s[comp.to_numpy()], e[comp.to_numpy()])
        idle = span - int((me - ms).sum())
        compute = int((ce - cs).sum())
        rows.append({"device": int(dev), "span_ns": span, "idle_ns": idle, "compute_ns": compute,
                     "non_compute_ns": span - idle - compute})
    return pd.DataFrame(rows).astype("int64")


# --------------------------------------------------------------------------- the verdict
def _host_wait_idle(ev: pd.DataFrame, gaps: pd.DataFrame, st: pd.DataFrame) -> pd.Series:
    """Per (step, device): time the device ran nothing while one of its streams was in a host-wait
    gap, |A ∩ B| = |A| + |B| - |A ∪ B|."""
    hw = gaps[(gaps["category"] == "host_wait") & gaps["step"].notna()]
    out = {}
    steps = st["step"].to_numpy(dtype=np.int64)
    for dev, sub in ev.groupby(ev["device"].fillna(-1).astype("int64")):
        idle = idle_gaps_in_windows(sub[["start_ns", "end_ns"]], st)
        idle["step"] = steps[idle["window"].to_numpy()]
        a_dev = hw[hw["device"] == dev]
        for step, a in a_dev.groupby("step"):
            b = idle[idle["step"] == step]
            ms, me = union_arrays(a["start_ns"].to_numpy(np.int64), a["end_ns"].to_numpy(np.int64))
            la, lb = int((me - ms).sum()), int(b["dur_ns"].sum())
            us, ue = union_arrays(np.r_[ms, b["start_ns"].to_numpy(np.int64)], np.r_[me, b["end_ns"].to_numpy(np.int64)])
            out[(int(step), int(dev))] = la + lb - int((ue - us).sum())
    return pd.Series(out, dtype="int64")


def step_verdicts(source, events=None, steps=None,
                  cpu_bound_empty_share: float = CPU_BOUND_EMPTY_SHARE,
                  gpu_bound_empty_share: float = GPU_BOUND_EMPTY_SHARE,
                  gpu_bound_busy_share: float = GPU_BOUND_BUSY_SHARE) -> pd.DataFrame:
    """Per step: was the GPU waiting for the CPU (CPU-bound), the CPU for the GPU
    (GPU-bound), or some of each (mixed)? With the figures that decide it.

    Sources: docs/SOURCES.md#gpu-idle-step-verdicts

    Returns per step and device: ``wall_ns``, ``device_busy_ns``, ``queue_empty_ns``,
    ``host_wait_ns`` (ns); ``queue_length_mean``, ``queue_length_max``; ``*_share`` (0-1);
    ``verdict`` (``CPU-bound``, ``GPU-bound``, ``mixed``, ``cannot tell``); ``evidence``.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> v = step_verdicts(tiny_trace())
    >>> v[["step", "queue_empty_share", "device_busy_share", "verdict"]]
       step  queue_empty_share  device_busy_share    verdict
    0     1               0.45                0.4  CPU-bound
    """
    ev = checked_events(source, events)
    require_launches(ev, source)
    st = _steps(source, steps)
    allq = ev.assign(stream=0)                       # one queue for the whole device
    qs = queue_summary(source, events=allq, steps=st)
    conc = stream_concurrency(source, events=ev, steps=st)
    gaps = stream_gaps(source, events=ev, steps=st)
    hw = _host_wait_idle(ev, gaps, st)
    out = qs.drop(columns=["stream", "queue_full_ns", "blocked_launches", "blocked_host_ns"]).rename(
        columns={"window_ns": "wall_ns"})
    out = out.merge(conc[["step", "device", "streams_0_ns"]], on=["step", "device"], how="left")
    out["device_busy_ns"] = (out["wall_ns"] - out.pop("streams_0_ns")).astype("int64")
    key = pd.MultiIndex.from_frame(out[["step", "device"]])
    out["host_wait_ns"] = hw.reindex(key).fillna(0).to_numpy().astype("int64")
    w = out["wall_ns"].where(out["wall_ns"] > 0)
    out["queue_empty_share"] = out["queue_empty_ns"] / w
    out["host_wait_share"] = out["host_wait_ns"] / w
    out["device_busy_share"] = out["device_busy_ns"] / w
    verdicts, evidence = [], []
    for r in out.itertuples():
        if not (r.wall_ns > 0):
            verdicts.append("cannot tell")
            evidence.append("the step has no length: no share can be worked out")
            continue
        fig = (f"queue empty {100 * r.queue_empty_share:.1f} % of the step ({r.queue_empty_ns / 1e6:.3f} of "
               f"{r.wall_ns / 1e6:.3f} ms), GPU busy {100 * r.device_busy_share:.1f} %, host wait "
               f"{100 * r.host_wait_share:.1f} %, mean queue {r.queue_length_mean:.1f}, max {r.queue_length_max}")
        if r.queue_empty_share >= cpu_bound_empty_share:
            verdicts.append("CPU-bound")
        elif r.queue_empty_share <= gpu_bound_empty_share and r.device_busy_share >= gpu_bound_busy_share:
            verdicts.append("GPU-bound")
        else:
            verdicts.append("mixed")
        evidence.append(fig)
    out["verdict"] = verdicts
    out["evidence"] = evidence
    cols = ["step", "device", "wall_ns", "device_busy_ns", "queue_empty_ns", "host_wait_ns",
            "queue_length_mean", "queue_length_max", "queue_empty_share", "host_wait_share",
            "device_busy_share", "verdict", "evidence"]
    out = out[cols]
    out.attrs["rule"] = (f"CPU-bound: queue empty >= {cpu_bound_empty_share:.0%} of the step; GPU-bound: queue "
                         f"empty <= {gpu_bound_empty_share:.0%} and GPU busy >= {gpu_bound_busy_share:.0%}; "
                         "mixed otherwise")
    return out
