"""Collectives across ranks: step times, time in collectives, waiting vs transfer,
the straggler, and communication hidden under computation.

A collective finishes only when every rank has joined it: an early rank waits inside it.
Durations are exact; waiting, transfer and lateness are estimates (start times of different
ranks, on clocks the kit does not align).

``traces`` is a :class:`~kitlib.model.ranks.RankTraces`; ``calls`` its :func:`collectives`
(computed when not given). Times are ns since the Unix epoch on each rank's host clock.

Sources: docs/SOURCES.md#collectives-clocks
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import KitError
from ..model.ranks import RankTraces
from .chain import chain
from .intervals import busy_ns, union_arrays
from ..model.tree import nearest_ancestor
from ..model.window import containing, step_of

#: Host operators of a collective (``record_param_comms``, ``c10d::*``, ``nccl:*``, ``gloo:*``).
COMM_OP_PATTERN = r"^(?:record_param_comms$|c10d::|nccl:|gloo:)"
#: Communication kernels of NCCL (``ncclKernel_*`` before NCCL 2.19, ``ncclDevKernel_*`` after).
COMM_KERNEL_PATTERN = r"^(?:ncclKernel_|ncclDevKernel_)"

#: Columns of :func:`collectives`.
COLLECTIVE_COLUMNS = ["rank", "call", "name", "k", "measured_on", "step", "tid", "start_ns", "end_ns",
                      "dur_ns", "size", "identity"]

#: How far apart (ns) one call's ends may be on different ranks, by where it was measured.
#: Sources: docs/SOURCES.md#collectives-end-tolerance
END_TOLERANCE_NS = {"device": 1_000_000, "host": 25_000_000}

#: How :func:`collectives` identified each call (its ``identity`` column), best first.
IDENTITIES = ("process group + seq", "name + size + order", "name + order")


def _short(name: str) -> str:
    """A kernel's name without its argument list (``ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t``)."""
    return name.split("(", 1)[0].strip()


def _epoch(trace) -> int:
    return int(trace.meta.get("base_time_ns") or 0)


def _size_text(dims) -> str:
    """``Input Dims`` as written, "" when no shape was recorded."""
    if dims is None or (hasattr(dims, "__len__") and not any(len(d) if hasattr(d, "__len__") else 1
                                                             for d in dims)):
        return ""
    return str([list(d) if hasattr(d, "__len__") else d for d in dims]).replace(" ", "")


def _identities(ops: pd.DataFrame, rows) -> list:
    """``(process group, seq, size)`` of the collective operators at ``rows`` of ``ops``:
    the ``comm_args`` of the operator or of its nearest ancestor that has them
    (``record_param_comms``), else the operator's ``Input Dims``."""
    args = ops["comm_args"].to_numpy() if "comm_args" in ops.columns else np.full(len(ops), None)
    parent = ops.index.get_indexer(ops["parent"].to_numpy())      # labels -> positions (-1: none)
    up = nearest_ancestor(parent, [isinstance(a, dict) for a in args], include_self=True)
    pos = ops.index.get_indexer([-1 if r is None else r for r in rows])
    out = []
    for row in pos:
        pg = seq = None
        size = ""
        if row >= 0 and up[row] >= 0:
            a = args[up[row]]
            pg, seq = a.get("Process Group Name"), a.get("Seq")
            if a.get("In msg nelems") is not None or a.get("Out msg nelems") is not None:
                size = f"in {a.get('In msg nelems')} out {a.get('Out msg nelems')}"
        if not size and row >= 0:
            size = _size_text(ops["input_dims"].iat[row])
        out.append((pg, seq, size))
    return out


def _comm_ops(ops: pd.DataFrame) -> pd.DataFrame:
    return ops[ops["name"].astype(str).str.contains(COMM_OP_PATTERN, regex=True)]


def collective_ops(traces: RankTraces) -> pd.DataFrame:
    """Every host operator of a collective (:data:`COMM_OP_PATTERN`) on every rank, nested
    ones too: ``rank, name, tid, start_ns, end_ns, dur_ns, depth`` (ns).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_rank_folder
    >>> from kitlib.readers.ranks import load_traces
    >>> ops = collective_ops(load_traces(tiny_rank_folder()))
    >>> ops.loc[ops["rank"] == 1, ["name", "start_ns", "dur_ns", "depth"]]
                     name  start_ns  dur_ns  depth
    4  record_param_comms   4980000   60000      1
    5     nccl:all_reduce   4990000   40000      2
    6  record_param_comms  13980000   60000      1
    7     nccl:all_reduce  13990000   40000      2
    """
    parts = []
    for r, t in traces.traces.items():
        ops = _comm_ops(t.ops)
        start, dur = ops["start_ns"].to_numpy("int64") + _epoch(t), ops["dur_ns"].to_numpy("int64")
        parts.append(pd.DataFrame({"rank": r, "name": ops["name"].astype(str).to_numpy(),
                                   "tid": ops["tid"].to_numpy(), "start_ns": start, "end_ns": start + dur,
                                   "dur_ns": dur, "depth": ops["depth"].to_numpy()}))
    return pd.concat(parts, ignore_index=True).sort_values(["rank", "start_ns"], kind="stable") \
        .reset_index(drop=True)


def comm_kernels(trace) -> pd.DataFrame:
    """A trace's NCCL kernels (``trace.kernels`` rows matching :data:`COMM_KERNEL_PATTERN`), trace clock.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_rank_docs
    >>> from kitlib.readers.trace import trace_from_json
    >>> comm_kernels(trace_from_json(tiny_rank_docs()[0]))[["stream", "start_ns", "end_ns"]]
       stream  start_ns    end_ns
    1      20   3100000   6000000
    4      20  13100000  15000000
    """
    k = trace.kernels
    return k[(k["kind"] == "kernel") & k["name"].astype(str).str.contains(COMM_KERNEL_PATTERN, regex=True)]


def collectives(traces: RankTraces) -> pd.DataFrame:
    """One row per collective call per rank, where its time is spent.

    Returns :data:`COLLECTIVE_COLUMNS`: ``name`` (the launching ``nccl:*`` operator, else the
    kernel's or operator's); ``measured_on`` (``device``: NCCL kernel, ``host``: ``gloo:*``
    operator, ``host enqueue``: only the calling operator); ``step`` (-1 outside); ``tid``
    (thread, or stream); ``start_ns, end_ns, dur_ns`` (ns); ``size`` (``"in N out M"``
    elements, else ``Input Dims``, else ``""``); ``call``, the key across ranks:
    ``"name (pg P, seq S)"``, else ``"name size#k"``, else ``"name#k"`` (``k`` counts the
    rank's calls of that name and size); ``identity`` says which (:data:`IDENTITIES`).

    Raises KitError when no rank has any collective.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_rank_folder
    >>> from kitlib.readers.ranks import load_traces
    >>> calls = collectives(load_traces(tiny_rank_folder()))
    >>> calls[["rank", "call", "measured_on", "step", "start_ns", "dur_ns"]]
       rank                           call measured_on  step  start_ns   dur_ns
    0     0  nccl:all_reduce (pg 0, seq 0)      device     1   3100000  2900000
    1     0  nccl:all_reduce (pg 0, seq 1)      device     2  13100000  1900000
    2     1  nccl:all_reduce (pg 0, seq 0)      device     1   5100000   900000
    3     1  nccl:all_reduce (pg 0, seq 1)      device     2  14100000   900000
    """
    parts = []
    for r, t in traces.traces.items():
        base = _epoch(t)
        kern = comm_kernels(t)
        if len(kern):
            names = kern["name"].astype(str).map(_short)
            links = chain(t)
            links = links[links["gpu_row"].isin(kern.index)]
            op = links.set_index("gpu_row")["op_name"].astype(str)
            op = op[op.str.contains(COMM_OP_PATTERN, regex=True)]
            names = pd.Series([op.get(i, n) for i, n in zip(kern.index, names)], index=kern.index)
            op_row = links.set_index("gpu_row")["op_row"]
            op_row = op_row[op_row.index.isin(op.index)]
            ident = _identities(t.ops, [int(op_row[i]) if i in op_row.index else None for i in kern.index])
            df = pd.DataFrame({"name": names.to_numpy(), "measured_on": "device",
                               "tid": kern["stream"].astype("int64").to_numpy(),
                               "start_ns": kern["start_ns"].to_numpy("int64") + base,
                               "dur_ns": kern["dur_ns"].to_numpy("int64")})
        else:
            ident = None
            ops = _comm_ops(t.ops)
            gloo = ops[ops["name"].astype(str).str.startswith("gloo:")]
            if len(gloo):
                ops, where = gloo, "host"
            else:
                ops, where = ops[ops["depth"] == ops.groupby("tid")["depth"].transform("min")], "host enqueue"
            df = pd.DataFrame({"name": ops["name"].astype(str).to_numpy(), "measured_on": where,
                               "tid": ops["tid"].astype("int64").to_numpy(),
                               "start_ns": ops["start_ns"].to_numpy("int64") + base,
                               "dur_ns": ops["dur_ns"].to_numpy("int64")})
            ident = _identities(t.ops, [int(i) for i in ops.index])
        if not len(df):
            continue
        df["pg"] = [x[0] for x in ident]
        df["seq"] = [x[1] for x in ident]
        df["size"] = [x[2] for x in ident]
        df = df.sort_values("start_ns", kind="stable").reset_index(drop=True)
        df["rank"] = r
        df["end_ns"] = df["start_ns"] + df["dur_ns"]
        df["k"] = df.groupby(["name", "size"]).cumcount().astype("int64")
        has_seq = df["pg"].notna() & df["seq"].notna()
        sized = df["size"] != ""
        df["identity"] = np.where(has_seq, IDENTITIES[0], np.where(sized, IDENTITIES[1], IDENTITIES[2]))
        df["call"] = np.where(has_seq, df["name"] + " (pg " + df["pg"].astype(str) + ", seq "
                              + df["seq"].astype(str) + ")",
                              np.where(sized, df["name"] + " " + df["size"] + "#" + df["k"].astype(str),
                                       df["name"] + "#" + df["k"].astype(str)))
        df["step"] = np.asarray(step_of(df["start_ns"].to_numpy() - base, t.steps).fillna(-1), dtype="int64")
        parts.append(df)
    if not parts:
        raise KitError(f"no collectives in ranks {traces.ranks}: no NCCL kernels (ncclKernel_*, "
                       "ncclDevKernel_*) and no operators named record_param_comms, c10d::*, nccl:* or "
                       "gloo:* — was the run distributed, and did the profiler record CPU activity?")
    return pd.concat(parts, ignore_index=True)[COLLECTIVE_COLUMNS]


#: Columns of :func:`collective_matches`.
MATCH_COLUMNS = ["call", "name", "identity", "ranks", "missing", "end_spread_ns", "verified", "reason"]


def collective_matches(traces: RankTraces, calls: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every call key of :func:`collectives` with the ranks that have it: which calls are
    one call on every rank (see :func:`match_calls`).

    Examples
    --------
    >>> from kitlib.readers.ranks import load_traces
    >>> m = collective_matches(load_traces("public-traces", partial=True))
    >>> int(m["verified"].sum()), len(m)      # a subsampled pair: 4 of 13 calls can be matched
    (4, 13)
    """
    return match_calls(collectives(traces) if calls is None else calls, list(traces.ranks))


def match_calls(calls: pd.DataFrame, ranks: list) -> pd.DataFrame:
    """Lesson 12's collective match: one call on every rank, or not, and why.

    A call key is *verified* when every rank in ``ranks`` has it once and its ends lie
    within :data:`END_TOLERANCE_NS` of each other. ``calls`` needs ``call, rank, name,
    identity, end_ns, measured_on``.

    Returns :data:`MATCH_COLUMNS` by first start: ``ranks``, ``missing`` (tuples),
    ``end_spread_ns`` (latest minus earliest end, ns), ``verified``, ``reason`` (``""`` if verified);
    ``attrs["tolerance_ns"]``.

    Examples
    --------
    >>> import pandas as pd
    >>> calls = pd.DataFrame({"call": ["ar#0", "ar#0", "ar#1"], "rank": [0, 1, 0], "name": "nccl:all_reduce",
    ...                       "identity": "", "start_ns": [0, 5, 90], "end_ns": [50, 51, 120],
    ...                       "measured_on": "device"})
    >>> match_calls(calls, [0, 1])[["call", "ranks", "missing", "end_spread_ns", "verified"]]
       call   ranks missing  end_spread_ns  verified
    0  ar#0  (0, 1)      ()              1      True
    1  ar#1    (0,)    (1,)              0     False
    """
    rows = []
    first = calls.groupby("call", sort=False)["start_ns"].min().sort_values(kind="stable")
    rows_of = calls.groupby("call", sort=False).indices        # each call's row positions, in row order
    col = {c: calls[c].to_numpy() for c in ("rank", "end_ns", "measured_on", "name", "identity")}
    for call in first.index:
        i = rows_of[call]
        rank, end = col["rank"][i], col["end_ns"][i]
        uniq, count = np.unique(rank, return_counts=True)      # the ranks that have it, sorted
        have = tuple(int(r) for r in uniq)
        missing = tuple(r for r in ranks if r not in have)
        order = np.argsort(end, kind="stable")                  # by end: first and last to finish
        spread = int(end[order[-1]] - end[order[0]])
        where = set(col["measured_on"][i])
        tol = min((END_TOLERANCE_NS.get(w) for w in where if w in END_TOLERANCE_NS), default=None)
        if missing:
            reason = (f"not found on rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))}: "
                      "that rank's trace lacks it (subsampled or cut) or issued a different call")
        elif (count > 1).any():
            reason = (f"{int(count.max())} rows with this identity on rank {int(uniq[count.argmax()])}: "
                      "the identity does not name one call")
        elif tol is None or "host enqueue" in where:
            reason = ("only the host enqueue was recorded: its end is not the collective's end, so the "
                      "match cannot be checked")
        elif spread > tol:
            reason = (f"ends {spread / 1e6:,.1f} ms later on rank {int(rank[order[-1]])} than on rank "
                      f"{int(rank[order[0]])}, more than the {tol / 1e6:g} ms one call allows: "
                      "not the same call")
        else:
            reason = ""
        rows.append({"call": call, "name": col["name"][i[0]], "identity": col["identity"][i[0]], "ranks": have,
                     "missing": missing, "end_spread_ns": spread, "verified": reason == "", "reason": reason})
    out = pd.DataFrame(rows, columns=MATCH_COLUMNS)
    out["verified"] = out["verified"].astype(bool)
    out.attrs["tolerance_ns"] = dict(END_TOLERANCE_NS)
    return out


def match_summary(traces: RankTraces, calls: pd.DataFrame | None = None) -> dict:
    """How many calls could be matched across ranks, and what their ends say about the clocks.

    Returns ``calls``, ``verified``, ``missing``, ``ends_apart``, ``unchecked`` (call keys);
    ``end_offset_ms`` (per rank but the first, median end minus the first rank's over
    verified calls, ms); ``max_end_spread_ms``.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_rank_folder
    >>> from kitlib.readers.ranks import load_traces
    >>> match_summary(load_traces(tiny_rank_folder()))
    {'calls': 2, 'verified': 2, 'missing': 0, ...}
    """
    calls = collectives(traces) if calls is None else calls
    m = collective_matches(traces, calls)
    ok = m[m["verified"]]
    v = calls[calls["call"].isin(set(ok["call"]))]
    ends = v.pivot_table(index="call", columns="rank", values="end_ns", aggfunc="first")
    r0 = traces.ranks[0]
    offset = {int(r): float((ends[r] - ends[r0]).median()) / 1e6 for r in ends.columns if r != r0} if len(ends) else {}
    far = m["reason"].str.startswith("ends ")
    return {"calls": int(len(m)), "verified": int(m["verified"].sum()),
            "missing": int((m["missing"].map(len) > 0).sum()), "ends_apart": int(far.sum()),
            "unchecked": int((~m["verified"] & ~far & (m["missing"].map(len) == 0)).sum()),
            "end_offset_ms": offset,
            "max_end_spread_ms": float(ok["end_spread_ns"].max()) / 1e6 if len(ok) else float("nan")}


def collective_waits(traces: RankTraces, calls: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each verified call on each rank, split into waiting and transfer (estimates).

    The last rank to arrive starts the call at ``last_start_ns``; an earlier rank waited
    ``wait_ns = min(last_start_ns - start_ns, dur_ns)``, the rest is ``transfer_ns``.

    Returns :data:`COLLECTIVE_COLUMNS` plus ``last_start_ns``, ``last_rank``, ``wait_ns``,
    ``transfer_ns`` (ns), verified calls only; ``attrs["unmatched"]`` counts rows left out.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_rank_folder
    >>> from kitlib.readers.ranks import load_traces
    >>> collective_waits(load_traces(tiny_rank_folder()))[["rank", "call", "wait_ns", "transfer_ns"]]
       rank                           call  wait_ns  transfer_ns
    0     0  nccl:all_reduce (pg 0, seq 0)  2000000       900000
    1     0  nccl:all_reduce (pg 0, seq 1)  1000000       900000
    2     1  nccl:all_reduce (pg 0, seq 0)        0       900000
    3     1  nccl:all_reduce (pg 0, seq 1)        0       900000
    """
    calls = collectives(traces) if calls is None else calls
    ok = set(collective_matches(traces, calls).query("verified")["call"])
    present = calls["call"].isin(ok)
    m = calls[present].copy()
    last = m.loc[m.groupby("call")["start_ns"].idxmax(), ["call", "start_ns", "rank"]] \
        .rename(columns={"start_ns": "last_start_ns", "rank": "last_rank"})
    m = m.merge(last, on="call", how="left")
    m["wait_ns"] = np.minimum(np.maximum(m["last_start_ns"] - m["start_ns"], 0), m["dur_ns"]).astype("int64")
    m["transfer_ns"] = (m["dur_ns"] - m["wait_ns"]).astype("int64")
    m = m.sort_values(["rank", "start_ns"], kind="stable").reset_index(drop=True)
    m.attrs["unmatched"] = int((~present).sum())
    return m


def straggler_table(traces: RankTraces, calls: pd.DataFrame | None = None) -> pd.DataFrame:
    """Which rank arrives last at each verified call, and by how much (estimates).

    Returns, in order of the last arrival: ``call, name, step`` (of the last rank),
    ``last_rank``, ``late_by_ns`` (its start minus the next-latest rank's),
    ``spread_ns`` (minus the earliest rank's), ``first_rank``. One rank: ``late_by_ns`` 0.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_rank_folder
    >>> from kitlib.readers.ranks import load_traces
    >>> t = straggler_table(load_traces(tiny_rank_folder()))
    >>> t[["step", "last_rank", "late_by_ns", "first_rank"]]
       step  last_rank  late_by_ns  first_rank
    0     1          1     2000000           0
    1     2          1     1000000           0
    """
    w = collective_waits(traces, calls)
    rows = []
    for call, g in w.groupby("call", sort=False):
        g = g.sort_values("start_ns", kind="stable")
        last, first = g.iloc[-1], g.iloc[0]
        prev = g.iloc[-2] if len(g) > 1 else last
        rows.append({"call": call, "name": last["name"], "step": int(last["step"]),
                     "last_rank": int(last["rank"]), "late_by_ns": int(last["start_ns"] - prev["start_ns"]),
                     "spread_ns": int(last["start_ns"] - first["start_ns"]), "first_rank": int(first["rank"]),
                     "_t": int(last["start_ns"])})
    out = pd.DataFrame(rows, columns=["call", "name", "step", "last_rank", "late_by_ns", "spread_ns",
                                      "first_rank", "_t"])
    return out.sort_values("_t", kind="stable").drop(columns="_t").reset_index(drop=True)


def rank_step_times(traces: RankTraces) -> pd.DataFrame:
    """Every rank's steps: ``rank, step, start_ns, dur_ns`` (the ``ProfilerStep#N`` interval, exact).

    Raises KitError when a rank's trace has no steps.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_rank_folder
    >>> from kitlib.readers.ranks import load_traces
    >>> rank_step_times(load_traces(tiny_rank_folder())).head(2)
       rank  step  start_ns    dur_ns
    0     0     1         0  10000000
    1     0     2  10000000  10000000
    """
    parts = []
    for r, t in traces.traces.items():
        s = t.steps
        if not len(s):
            raise KitError(f"rank {r} ({traces.info.set_index('rank').loc[r, 'path']}) has no steps "
                           "(ProfilerStep#N): it was recorded without a profiler schedule and prof.step()")
        parts.append(pd.DataFrame({"rank": r, "step": s["step"].to_numpy("int64"),
                                   "start_ns": s["start_ns"].to_numpy("int64") + _epoch(t),
                                   "dur_ns": s["dur_ns"].to_numpy("int64")}))
    return pd.concat(parts, ignore_index=True)


def rank_summary(traces: RankTraces, calls: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per rank: step time and how much of it is in collectives, waiting or transferring.

    Returns, index ``rank``: ``steps``, ``step_ms`` (median), ``collectives`` (calls in the
    steps); per step, ms: ``in_collectives_ms`` (union of the calls), ``wait_ms``,
    ``transfer_ms`` (:func:`collective_waits`, estimates); ``wait_share``.

    Examples
    --------
    >>> from kitlib.readers.ranks import load_traces
    >>> rank_summary(load_traces("ranks_straggler"))[["steps", "collectives", "wait_ms", "transfer_ms"]].round(1)
          steps  collectives  wait_ms  transfer_ms
    rank
    0         3           21   1032.9        227.4
    1         3           21    308.7        250.7
    """
    calls = collectives(traces) if calls is None else calls
    waits = collective_waits(traces, calls)
    st = rank_step_times(traces)
    rows = []
    for r in traces.ranks:
        s = st[st["rank"] == r]
        steps = set(s["step"])
        c = calls[(calls["rank"] == r) & calls["step"].isin(steps)]
        w = waits[(waits["rank"] == r) & waits["step"].isin(steps)]
        n = max(len(s), 1)
        # unions: concurrent calls (DDP's broadcasts on two Gloo threads) must not count twice
        waiting = pd.DataFrame({"start_ns": w["start_ns"], "dur_ns": w["wait_ns"]})
        matched = busy_ns(w) if len(w) else 0
        wait_ns = busy_ns(waiting) if len(w) else 0
        wait, transfer = wait_ns / n / 1e6, (matched - wait_ns) / n / 1e6
        rows.append({"rank": r, "steps": len(s), "step_ms": float(s["dur_ns"].median()) / 1e6,
                     "collectives": len(c), "in_collectives_ms": busy_ns(c) / n / 1e6 if len(c) else 0.0,
                     "wait_ms": float(wait), "transfer_ms": float(transfer),
                     "wait_share": float(wait / (wait + transfer)) if wait + transfer > 0 else float("nan")})
    return pd.DataFrame(rows).set_index("rank")


def straggler_by_step(traces: RankTraces, calls: pd.DataFrame | None = None) -> pd.DataFrame:
    """For each step, the call at which the others waited longest for one rank.

    Returns ``step, call, name, last_rank, late_by_ns`` (the step's largest, an estimate of
    that rank's delay), ``calls`` (verified calls in the step).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_rank_folder
    >>> from kitlib.readers.ranks import load_traces
    >>> straggler_by_step(load_traces(tiny_rank_folder()))[["step", "last_rank", "late_by_ns"]]
       step  last_rank  late_by_ns
    0     1          1     2000000
    1     2          1     1000000
    """
    return _by_step(straggler_table(traces, calls))


def _by_step(tab: pd.DataFrame) -> pd.DataFrame:
    """:func:`straggler_by_step` from a :func:`straggler_table`."""
    tab = tab[tab["step"] >= 0]
    if not len(tab):
        return pd.DataFrame(columns=["step", "call", "name", "last_rank", "late_by_ns", "calls"])
    idx = tab.groupby("step")["late_by_ns"].idxmax()
    out = tab.loc[idx, ["step", "call", "name", "last_rank", "late_by_ns"]].copy()
    out["calls"] = tab.groupby("step").size().loc[out["step"]].to_numpy()
    return out.sort_values("step").reset_index(drop=True)


def straggler_summary(traces: RankTraces, calls: pd.DataFrame | None = None) -> dict:
    """The rank the others wait for, and for how long per step.

    Returns ``rank`` (most often last at its step's longest wait), ``steps_last``, ``steps``,
    ``late_by_ms_median`` (ms), ``last_share`` (of verified calls in steps), ``calls``.

    Raises KitError with fewer than two ranks, or no verified call inside a step.

    Examples
    --------
    >>> from kitlib.readers.ranks import load_traces
    >>> s = straggler_summary(load_traces("ranks_straggler"))
    >>> s["rank"], s["steps_last"], s["steps"], round(s["late_by_ms_median"], 1)
    (1, 3, 3, 525.6)
    """
    if len(traces.ranks) < 2:
        raise KitError(f"{traces.source or traces.info['path'].iloc[0]}: only rank(s) {traces.ranks} of world size "
                       f"{traces.world_size}: a straggler is the rank the others wait for, so it needs two ranks "
                       "or more")
    tab = straggler_table(traces, calls)
    by_step = _by_step(tab)
    if not len(by_step):
        raise KitError(f"no collective matched on all ranks {traces.ranks} inside a step")
    counts = by_step["last_rank"].value_counts()
    rank = int(counts.index[0])
    tab = tab[tab["step"] >= 0]
    return {"rank": rank, "steps_last": int(counts.iloc[0]), "steps": int(len(by_step)),
            "late_by_ms_median": float(by_step["late_by_ns"].median()) / 1e6,
            "last_share": float((tab["last_rank"] == rank).mean()), "calls": int(len(tab))}


def enqueue_and_start(traces: RankTraces, calls: pd.DataFrame | None = None) -> pd.DataFrame:
    """For each verified NCCL call, when each rank enqueued it (its ``nccl:*`` operator's
    start) and when its kernel started: only the second is when the rank joined.

    Returns ``call, name``, per rank ``r`` ``enqueue_ns_r`` and ``start_ns_r``, and
    ``enqueue_late_ms``, ``start_late_ms`` (highest rank minus the first, ms).

    Raises KitError when no rank has an NCCL kernel.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_rank_folder
    >>> from kitlib.readers.ranks import load_traces
    >>> enqueue_and_start(load_traces(tiny_rank_folder()))[["call", "enqueue_late_ms", "start_late_ms"]]
                                call  enqueue_late_ms  start_late_ms
    0  nccl:all_reduce (pg 0, seq 0)              2.0            2.0
    1  nccl:all_reduce (pg 0, seq 1)              1.0            1.0
    """
    calls = collectives(traces) if calls is None else calls
    dev = calls[calls["measured_on"] == "device"]
    if not len(dev):
        raise KitError(f"no NCCL kernels in ranks {traces.ranks} (backend {traces.backend}): a host-measured "
                       "collective has no separate enqueue")
    ok = set(collective_matches(traces, calls).query("verified")["call"])
    parts = []
    for r, t in traces.traces.items():
        base = _epoch(t)
        links = chain(t)
        kern = comm_kernels(t)
        links = links[links["gpu_row"].isin(kern.index)]
        enq = dict(zip(links["gpu_start_ns"].to_numpy("int64") + base, links["op_start_ns"].to_numpy("int64") + base))
        mine = dev[(dev["rank"] == r) & dev["call"].isin(ok)]
        parts.append(pd.DataFrame({"call": mine["call"].to_numpy(), "name": mine["name"].to_numpy(), "rank": r,
                                   "enqueue_ns": [enq.get(int(x)) for x in mine["start_ns"]],
                                   "start_ns": mine["start_ns"].to_numpy("int64")}))
    long = pd.concat(parts, ignore_index=True)
    wide = long.pivot_table(index=["call", "name"], columns="rank", values=["enqueue_ns", "start_ns"],
                            aggfunc="first")
    wide.columns = [f"{a}_{b}" for a, b in wide.columns]
    wide = wide.reset_index()
    lo, hi = traces.ranks[0], traces.ranks[-1]
    wide["enqueue_late_ms"] = (wide[f"enqueue_ns_{hi}"] - wide[f"enqueue_ns_{lo}"]) / 1e6
    wide["start_late_ms"] = (wide[f"start_ns_{hi}"] - wide[f"start_ns_{lo}"]) / 1e6
    first = wide[[c for c in wide.columns if c.startswith("start_ns_")]].min(axis=1)
    return wide.assign(_t=first).sort_values("_t", kind="stable").drop(columns="_t").reset_index(drop=True)


#: Columns of :func:`exposed_communication`.
EXPOSED_COLUMNS = ["rank", "step", "compute_from", "calls", "comm_ms", "hidden_ms", "exposed_ms", "exposed_wait_ms",
                   "exposed_transfer_ms", "exposed_unmatched_ms", "hidden_wait_ms", "hidden_transfer_ms",
                   "tail_ms"]


def _merged(starts, ends) -> tuple[np.ndarray, np.ndarray]:
    return union_arrays(np.asarray(starts, dtype="int64"), np.asarray(ends, dtype="int64"))


def _inside(merged: tuple, points: np.ndarray) -> np.ndarray:
    """Whether each point lies in a merged set of half-open intervals ``[start, end)``."""
    return containing(*merged, points, closed="left") >= 0


def _segments(*sets: tuple) -> tuple[np.ndarray, np.ndarray, list]:
    """The elementary pieces between all boundaries of ``sets``: their lengths and, per
    set, whether each piece belongs to it (a piece is wholly in or out of every set)."""
    b = np.unique(np.concatenate([np.r_[s, e] for s, e in sets] or [np.zeros(0, "int64")]))
    if len(b) < 2:
        return np.zeros(0, "int64"), np.zeros(0, "int64"), [np.zeros(0, bool) for _ in sets]
    left, length = b[:-1], np.diff(b)
    return left, length, [_inside(x, left) for x in sets]


def step_thread(trace) -> int | None:
    """The thread of the rank's ``ProfilerStep#N`` ranges (else the one with most operators; None without).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_rank_docs
    >>> from kitlib.readers.trace import trace_from_json
    >>> step_thread(trace_from_json(tiny_rank_docs()[0]))
    1
    """
    if len(trace.steps):
        return int(trace.steps["tid"].mode().iloc[0])
    o = trace.ops
    o = o[o["kind"] == "op"] if len(o) else o
    return int(o["tid"].value_counts().idxmax()) if len(o) else None


def compute_intervals(trace) -> tuple[str, np.ndarray, np.ndarray]:
    """The rank's *compute*, for :func:`exposed_communication` and
    :func:`kitlib.analyses.stragglers.step_budget`: every non-NCCL kernel (GPU run), else
    every operator on :func:`step_thread`'s thread but the collective ones (CPU run).

    Returns ``(source, starts, ends)``: ``"GPU kernels"`` or :data:`HOST_COMPUTE`, ns on the
    trace's clock, not merged.

    Sources: docs/SOURCES.md#collectives-cpu-compute

    Examples
    --------
    >>> from kitlib.model.examples import tiny_rank_docs
    >>> from kitlib.readers.trace import trace_from_json
    >>> compute_intervals(trace_from_json(tiny_rank_docs()[0]))
    ('GPU kernels', array([ 1000000,  4000000, 11000000]), array([ 3000000,  5000000, 13000000]))
    """
    k = trace.kernels
    kern = k[k["kind"] == "kernel"] if len(k) else k
    if len(kern):
        comp = kern[~kern["name"].astype(str).str.contains(COMM_KERNEL_PATTERN, regex=True)]
        return "GPU kernels", comp["start_ns"].to_numpy("int64"), comp["end_ns"].to_numpy("int64")
    o = trace.ops
    tid = step_thread(trace)
    o = o[(o["kind"] == "op") & (o["tid"] == tid) & ~o.index.isin(_comm_ops(o).index)]
    return HOST_COMPUTE, o["start_ns"].to_numpy("int64"), o["end_ns"].to_numpy("int64")


#: ``compute_from`` of a CPU run in :func:`exposed_communication` (see :func:`compute_intervals`).
HOST_COMPUTE = "host operators, step's thread"


#: Columns of :func:`exposed_by_step`.
EXPOSED_NS_COLUMNS = ["rank", "step", "calls", "comm_ns", "exposed_ns"]


def exposed_by_step(traces: RankTraces, calls: pd.DataFrame | None = None) -> pd.DataFrame:
    r"""Exposed communication, the kit's one definition: per rank and step, the time in the
    step's collectives during which the rank computed nothing.

    ``C`` is the union of the rank's calls that start in the step (each whole),
    ``P`` its :func:`compute_intervals`, all half-open: ``comm_ns = |C|``,
    ``exposed_ns = |C \ P|``.

    Returns :data:`EXPOSED_NS_COLUMNS` (int64), one row per rank and step with a call.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_rank_folder
    >>> from kitlib.readers.ranks import load_traces
    >>> exposed_by_step(load_traces(tiny_rank_folder()))
       rank  step  calls  comm_ns  exposed_ns
    0     0     1      1  2900000     1900000
    1     0     2      1  1900000     1900000
    2     1     1      1   900000      900000
    3     1     2      1   900000      900000
    """
    calls = collectives(traces) if calls is None else calls
    rows = []
    for r, t in traces.traces.items():
        mine = calls[(calls["rank"] == r) & (calls["step"] >= 0)]
        if not len(mine):
            continue
        _, ps, pe = compute_intervals(t)
        P = _merged(ps + _epoch(t), pe + _epoch(t))
        for step, g in mine.groupby("step", sort=True):
            _, length, (c, p) = _segments(_merged(g["start_ns"], g["end_ns"]), P)
            rows.append([r, step, len(g), length[c].sum(), length[c & ~p].sum()])
    return pd.DataFrame(rows, columns=EXPOSED_NS_COLUMNS).astype("int64")


#: Columns of :func:`communication_pieces`.
PIECE_COLUMNS = ["rank", "step", "start_ns", "end_ns", "part", "beside_compute"]
#: The parts of :func:`communication_pieces`: a verified call's waiting and transfer, a call
#: without a verified match, and compute with no communication running.
PARTS = ("wait", "transfer", "unmatched", "compute")


def _step_sets(traces: RankTraces, calls: pd.DataFrame):
    """Per rank and step with a collective: ``(rank, step, g, C, P, V, W, src, ps, pe, window_start)``
    (see :func:`exposed_communication` for the sets; times in ns since the epoch)."""
    waits = collective_waits(traces, calls)
    for r, t in traces.traces.items():
        base = _epoch(t)
        mine = calls[(calls["rank"] == r) & (calls["step"] >= 0)]
        if not len(mine):
            continue
        src, ps, pe = compute_intervals(t)
        ps, pe = ps + base, pe + base
        P = _merged(ps, pe)
        steps = t.steps.set_index("step")["start_ns"] + base if len(t.steps) else pd.Series(dtype="int64")
        w_all = waits[waits["rank"] == r]
        for step, g in mine.groupby("step", sort=True):
            w = w_all[w_all["step"] == step]
            C = _merged(g["start_ns"], g["end_ns"])
            V = _merged(w["start_ns"], w["end_ns"])
            W = _merged(w["start_ns"], w["start_ns"] + w["wait_ns"])
            lo = min(int(steps.get(step, g["start_ns"].min())), int(g["start_ns"].min()))
            yield r, int(step), g, C, P, V, W, src, ps, pe, lo


def communication_pieces(traces: RankTraces, calls: pd.DataFrame | None = None) -> pd.DataFrame:
    """The pieces :func:`exposed_communication` adds up, for the bucket picture.

    Returns :data:`PIECE_COLUMNS`: ``start_ns, end_ns`` (ns, adjacent pieces of one kind
    joined), ``part`` (:data:`PARTS`), ``beside_compute``; compute pieces up to the last call's end.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_rank_folder
    >>> from kitlib.readers.ranks import load_traces
    >>> sorted(set(communication_pieces(load_traces(tiny_rank_folder()))["part"]))
    ['compute', 'transfer', 'wait']
    """
    calls = collectives(traces) if calls is None else calls
    out = []
    for r, step, g, C, P, V, W, src, ps, pe, lo in _step_sets(traces, calls):
        hi = int(g["end_ns"].max())
        span = (np.array([lo]), np.array([hi]))
        left, ln, (c, p, v, wt, inside) = _segments(C, P, V, W, span)
        part = np.select([wt, v & ~wt, c & ~v, p & ~c & inside], list(PARTS), default="")
        keep = part != ""
        s0, e0, pt, bc = left[keep], (left + ln)[keep], part[keep], (p | (part == "compute"))[keep]
        for i in range(len(s0)):
            if out and out[-1][0] == r and out[-1][1] == step and out[-1][4] == pt[i] \
                    and out[-1][5] == bool(bc[i]) and out[-1][3] == s0[i]:
                out[-1][3] = int(e0[i])
            else:
                out.append([r, step, int(s0[i]), int(e0[i]), str(pt[i]), bool(bc[i])])
    return pd.DataFrame(out, columns=PIECE_COLUMNS)


def exposed_communication(traces: RankTraces, calls: pd.DataFrame | None = None) -> pd.DataFrame:
    r"""Per rank and step: the communication with no computation beside it, split into
    waiting and transfer.

    With :func:`exposed_by_step`'s ``C`` and ``P``, ``V`` the verified calls' part of ``C``
    and ``W`` their waiting parts: ``exposed = |C \ P|`` splits into ``|W \ P|`` (wait),
    ``|(V \ W) \ P|`` (transfer) and ``|(C \ V) \ P|`` (unmatched); the hidden ``|C ∩ P|``
    likewise. ``tail`` runs from the end of the last compute before the step's last call
    ends to that end.

    Returns :data:`EXPOSED_COLUMNS` in ms, one row per rank and step with a call;
    ``compute_from`` as :func:`compute_intervals`. Raises as :func:`collectives`.

    Sources: docs/SOURCES.md#collectives-cpu-compute

    Examples
    --------
    >>> from kitlib.readers.ranks import load_traces
    >>> e = exposed_communication(load_traces("public-traces", partial=True))
    >>> e[["rank", "step", "comm_ms", "exposed_ms", "exposed_wait_ms", "exposed_unmatched_ms"]].round(1)
       rank  step  comm_ms  exposed_ms  exposed_wait_ms  exposed_unmatched_ms
    0     0   551    195.3       172.3              1.9                 123.1
    1     0   552    200.9       164.7              3.4                  85.1
    2     1   551    168.0       134.3              0.0                  87.5
    3     1   552    211.0       169.2              0.0                 107.0
    """
    calls = collectives(traces) if calls is None else calls
    core = exposed_by_step(traces, calls).set_index(["rank", "step"])   # the one definition
    rows = []
    for r, step, g, C, P, V, W, src, ps, pe, _ in _step_sets(traces, calls):
        _, ln, (c, p, v, wt) = _segments(C, P, V, W)
        ms = lambda mask: float(ln[mask].sum()) / 1e6       # noqa: E731
        comm, exposed = (int(x) for x in core.loc[(r, step), ["comm_ns", "exposed_ns"]])
        end = int(g["end_ns"].max())
        before = ps < end
        last_compute = int(np.minimum(pe, end)[before].max()) if before.any() else int(g["start_ns"].min())
        rows.append({"rank": r, "step": int(step), "compute_from": src, "calls": len(g), "comm_ms": comm / 1e6,
                     "hidden_ms": (comm - exposed) / 1e6, "exposed_ms": exposed / 1e6,
                     "exposed_wait_ms": ms(wt & ~p), "exposed_transfer_ms": ms(v & ~wt & ~p),
                     "exposed_unmatched_ms": ms(c & ~v & ~p), "hidden_wait_ms": ms(wt & p),
                     "hidden_transfer_ms": ms(v & ~wt & p), "tail_ms": max(end - last_compute, 0) / 1e6})
    return pd.DataFrame(rows, columns=EXPOSED_COLUMNS)


def comm_overlap(traces: RankTraces) -> pd.DataFrame:
    """How much of each rank's NCCL kernel time ran beside a compute kernel (exact within a
    complete trace): ``hidden = |comm| + |compute| - |comm ∪ compute|``.

    Returns, index ``rank``: ``comm_kernels``, ``comm_ms``, ``compute_ms``, ``hidden_ms``,
    ``hidden_fraction`` (NaN without NCCL kernels).

    Raises KitError when no rank has an NCCL kernel.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_rank_folder
    >>> from kitlib.readers.ranks import load_traces
    >>> comm_overlap(load_traces(tiny_rank_folder())).round(3)
          comm_kernels  comm_ms  compute_ms  hidden_ms  hidden_fraction
    rank
    0                2      4.8         5.0        1.0            0.208
    1                2      1.8         7.0        0.0            0.000
    """
    rows = []
    for r, t in traces.traces.items():
        comm = comm_kernels(t)
        k = t.kernels
        compute = k[(k["kind"] == "kernel") & ~k.index.isin(comm.index)]
        c, p = busy_ns(comm) if len(comm) else 0, busy_ns(compute) if len(compute) else 0
        both = busy_ns(pd.concat([comm, compute])[["start_ns", "dur_ns"]]) if len(comm) + len(compute) else 0
        hidden = c + p - both
        rows.append({"rank": r, "comm_kernels": len(comm), "comm_ms": c / 1e6, "compute_ms": p / 1e6,
                     "hidden_ms": hidden / 1e6, "hidden_fraction": hidden / c if c else float("nan")})
    out = pd.DataFrame(rows).set_index("rank")
    if not out["comm_kernels"].sum():
        raise KitError(f"no NCCL kernels (ncclKernel_*, ncclDevKernel_*) in ranks {traces.ranks} "
                       f"(backend {traces.backend}): overlap of communication with computation needs a GPU "
                       "trace of an NCCL run")
    return out


__all__ = ["COMM_OP_PATTERN", "COMM_KERNEL_PATTERN", "COLLECTIVE_COLUMNS", "END_TOLERANCE_NS", "IDENTITIES",
           "MATCH_COLUMNS", "EXPOSED_COLUMNS", "EXPOSED_NS_COLUMNS", "HOST_COMPUTE", "step_thread", "compute_intervals", "PIECE_COLUMNS", "PARTS", "communication_pieces", "enqueue_and_start", "collective_ops", "comm_kernels", "collectives",
           "collective_matches", "match_summary", "exposed_by_step", "exposed_communication", "collective_waits", "straggler_table", "straggler_by_step", "straggler_summary", "rank_step_times",
           "rank_summary", "comm_overlap"]
