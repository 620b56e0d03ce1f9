"""Collectives across ranks: step times, time in collectives, waiting vs transfer,
the straggler, and communication hidden under computation.

In data-parallel training (``DistributedDataParallel``) every rank runs the same
steps and, during the backward pass, the same sequence of gradient all-reduces:
a *collective* finishes only when every rank has joined it. A rank that arrives
early waits for the last one inside the collective, so when one rank is late,
a collective's time on the others is mostly waiting, not moving data.

Where a trace shows a collective (PyTorch 2.x):

- NCCL (GPUs): on the calling thread ``c10d::allreduce_`` ⊃ ``record_param_comms``
  ⊃ ``nccl:all_reduce``, which only *enqueue* the work; the time is in the
  ``ncclKernel_*`` / ``ncclDevKernel_*`` kernel on the GPU.
- Gloo (CPU): ``c10d::allreduce_`` on the calling thread (the enqueue, µs); the
  time is in ``gloo:all_reduce`` on one of Gloo's worker threads.

:func:`collectives` takes the row that holds the time: the communication
kernels when the trace has any, else the ``gloo:*`` operators, else (a CPU-only
profile of an NCCL run) the outermost host operator, which holds only the
enqueue.

Exact and estimated figures
---------------------------
- Exact (the profiler's own durations): step times, each collective's duration,
  the time each rank spends in collectives, the overlap of communication and
  compute kernels within one complete GPU trace (a subsampled trace, such as the
  public NCCL pair, lacks some kernels: its overlap is an estimate).
- Estimated: the split of a collective into *waiting* (for the last rank to
  arrive) and *transfer*, and the straggler's lateness. Both compare start times
  of different ranks. The kit does **not** align clocks: it compares each trace's
  times as written (ns since the Unix epoch: ``baseTimeNanoseconds`` + ``ts``).
  Ranks on one host share that clock, so the comparison holds up to each
  process's own conversion of its fast time counter to that clock (PyTorch's
  ``ApproximateClockToUnixTimeConverter``, calibrated per process: an error far
  below the milliseconds a straggler costs, but not zero); for ranks on different hosts every wait and lateness figure also
  carries the difference between the hosts' clocks (``RankTraces.info["host"]``
  says which case you are in). The wait also assumes the collective can only
  make progress once the last rank arrives, true of all-reduce and all-gather
  (every rank needs every other's data), not of a broadcast from an early root.
- Collectives are matched across ranks by their **identity**: the process group
  and sequence number where the trace records them (``record_param_comms``'s
  ``Process Group Name`` and ``Seq``, PyTorch 2.3 and later), otherwise the name,
  the message size (``In msg nelems``, else the operator's ``Input Dims``, when
  shapes were recorded) and the order among calls of that name and size. Order
  alone is not enough: a subsampled trace can drop different calls on each rank
  while the count per name stays equal, and then the k-th call of a name is not
  the same call on every rank. Every match is then **checked by its end times**:
  a blocking collective of one group ends on every rank within a short time of
  the others (the last rank's data completes it everywhere), so partners whose
  ends are further apart than :data:`END_TOLERANCE_NS` are not one call. Only
  verified matches give waiting, transfer and lateness figures;
  :func:`collective_matches` reports the others (which call, which ranks, why).
  The same end-time agreement is the clock check: on one host the verified
  partners' ends differ by about nothing; a common offset between them is the
  difference between the ranks' clocks.
- NCCL runs a process group's collectives one after another on one stream, so a
  kernel can start late because the previous collective was still running
  (queueing), not because its rank arrived late: the kernel's start is when that
  rank could begin to communicate, which is what the waiting split needs, but its
  lateness is not all the rank's own. Host-side times (the ``c10d::``/``nccl:``
  operators) only say when the work was *enqueued*: a rank can enqueue early and
  still reach the collective late on its GPU, so they are not compared across ranks.

Sources: PyTorch ``torch/csrc/distributed/c10d`` (``record_param_comms``, the
``c10d::`` operators; ``ProcessGroupGloo`` runs each collective on a worker
thread under a ``gloo:<op>`` record function); Holistic Trace Analysis
(``hta/analyzers/communication_analysis.py``: the same split of collective time
into waiting and transfer, and ``comm_comp_overlap``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import KitError
from ..model.ranks import RankTraces
from .chain import chain
from .intervals import busy_ns, union_arrays
from ..model.window import containing

#: Host operators of a collective (``record_param_comms``, ``c10d::*``, ``nccl:*``, ``gloo:*``).
COMM_OP_PATTERN = r"^(?:record_param_comms$|c10d::|nccl:|gloo:)"
#: Communication kernels of NCCL (``ncclKernel_*`` before NCCL 2.19, ``ncclDevKernel_*`` after).
COMM_KERNEL_PATTERN = r"^(?:ncclKernel_|ncclDevKernel_)"

#: Columns of :func:`collectives`.
COLLECTIVE_COLUMNS = ["rank", "call", "name", "k", "measured_on", "step", "tid", "start_ns", "end_ns",
                      "dur_ns", "size", "identity"]

#: How far apart (ns) the ends of one collective call may be on different ranks, by where
#: the call was measured. ``device`` (NCCL kernels): 1 ms. In the public NCCL pair the calls
#: that are one call by name, size and order end within 0.33 ms of each other on the two
#: ranks, while the pairs that the order of each name alone would make end 63 to 254 ms
#: apart, and those that name, size and order make but the end check rejects, 600 to 616
#: ms: 1 ms keeps a factor of 3 above the one and of 63 below the other. ``host`` (Gloo's worker threads):
#: 25 ms. In the kit's two Gloo recordings (complete traces, every call present on both
#: ranks) the calls end up to 20.6 ms apart: the threads share two busy CPU cores with the
#: training (our hypothesis: the thread that finishes last was waiting for a core; a trace
#: of context switches would settle it). A host *enqueue* (a CPU-only profile of an NCCL
#: run) has no end to check: such matches are never verified.
END_TOLERANCE_NS = {"device": 1_000_000, "host": 25_000_000}

#: How :func:`collectives` identified each call (its ``identity`` column), best first.
IDENTITIES = ("process group + seq", "name + size + order", "name + order")


def _short(name: str) -> str:
    """A kernel's name without its argument list (``ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t``)."""
    return name.split("(", 1)[0].strip()


def _epoch(trace) -> int:
    return int(trace.meta.get("base_time_ns") or 0)


def _step_of(starts: np.ndarray, steps: pd.DataFrame, base: int) -> np.ndarray:
    """The ``ProfilerStep`` number each start falls in (-1 outside every step)."""
    pos = containing(steps["start_ns"].to_numpy() + base, steps["end_ns"].to_numpy() + base, starts,
                     closed="left")                         # [start, end): kitlib.model.window
    num = steps["step"].to_numpy(dtype="int64")
    return np.where(pos >= 0, num[np.maximum(pos, 0)] if len(num) else -1, -1).astype("int64")


def _size_text(dims) -> str:
    """A message size as written (``Input Dims`` of the collective's operator), "" when
    no shape was recorded."""
    if dims is None or (hasattr(dims, "__len__") and not any(len(d) if hasattr(d, "__len__") else 1
                                                             for d in dims)):
        return ""
    return str([list(d) if hasattr(d, "__len__") else d for d in dims]).replace(" ", "")


def _identity(ops: pd.DataFrame, row) -> tuple:
    """``(process group, seq, size)`` of the collective whose operator is ``row`` of
    ``ops``: the ``comm_args`` of the operator or of the nearest enclosing one that
    has them (``record_param_comms``), else the operator's ``Input Dims``."""
    pg = seq = None
    size = ""
    r = row
    while r is not None and r >= 0 and r in ops.index:
        a = ops.at[r, "comm_args"] if "comm_args" in ops.columns else None
        if isinstance(a, dict):
            pg, seq = a.get("Process Group Name"), a.get("Seq")
            if a.get("In msg nelems") is not None or a.get("Out msg nelems") is not None:
                size = f"in {a.get('In msg nelems')} out {a.get('Out msg nelems')}"
            break
        r = int(ops.at[r, "parent"])
    if not size and row is not None and row >= 0 and row in ops.index:
        size = _size_text(ops.at[row, "input_dims"])
    return pg, seq, size


def collective_ops(traces: RankTraces) -> pd.DataFrame:
    """Every host operator of a collective on every rank.

    Parameters
    ----------
    traces : RankTraces

    Returns
    -------
    DataFrame
        ``rank, name, tid, start_ns, end_ns, dur_ns, depth`` for the operators
        matching :data:`COMM_OP_PATTERN`; times in ns since the Unix epoch on the
        rank's host clock. Nested ones (``c10d::allreduce_`` ⊃ ``record_param_comms``
        ⊃ ``nccl:all_reduce``) are all listed, ``depth`` tells them apart.

    Examples
    --------
    Two ranks of an NCCL run, one all-reduce per step
    (:func:`kitlib.model.examples.tiny_rank_docs`):

    >>> from kitlib.model.examples import tiny_rank_folder
    >>> from kitlib.readers.ranks import load_traces
    >>> from kitlib.analyses.collectives import collective_ops
    >>> ops = collective_ops(load_traces(tiny_rank_folder()))
    >>> ops.loc[ops["rank"] == 1, ["rank", "name", "start_ns", "dur_ns", "depth"]]
       rank                name  start_ns  dur_ns  depth
    4     1  record_param_comms   4980000   60000      1
    5     1     nccl:all_reduce   4990000   40000      2
    6     1  record_param_comms  13980000   60000      1
    7     1     nccl:all_reduce  13990000   40000      2
    """
    parts = []
    for r, t in traces.traces.items():
        ops = t.ops[t.ops["name"].astype(str).str.contains(COMM_OP_PATTERN, regex=True)]
        base = _epoch(t)
        parts.append(pd.DataFrame({"rank": r, "name": ops["name"].astype(str).to_numpy(),
                                   "tid": ops["tid"].to_numpy(),
                                   "start_ns": ops["start_ns"].to_numpy("int64") + base,
                                   "end_ns": ops["start_ns"].to_numpy("int64") + ops["dur_ns"].to_numpy("int64") + base,
                                   "dur_ns": ops["dur_ns"].to_numpy("int64"),
                                   "depth": ops["depth"].to_numpy()}))
    return pd.concat(parts, ignore_index=True).sort_values(["rank", "start_ns"], kind="stable") \
        .reset_index(drop=True)


def comm_kernels(trace) -> pd.DataFrame:
    """A trace's NCCL communication kernels (``trace.kernels`` rows matching
    :data:`COMM_KERNEL_PATTERN`), trace clock.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_rank_docs
    >>> from kitlib.readers.trace import trace_from_json
    >>> from kitlib.analyses.collectives import comm_kernels
    >>> tr = trace_from_json(tiny_rank_docs()[0])
    >>> k = comm_kernels(tr)
    >>> k[["stream", "start_ns", "end_ns"]]
       stream  start_ns    end_ns
    1      20   3100000   6000000
    4      20  13100000  15000000
    >>> len(tr.kernels) - len(k)              # the compute kernels (stream 7) are left out
    3
    """
    k = trace.kernels
    return k[(k["kind"] == "kernel") & k["name"].astype(str).str.contains(COMM_KERNEL_PATTERN, regex=True)]


def collectives(traces: RankTraces) -> pd.DataFrame:
    """One row per collective call per rank, where its time is spent.

    Parameters
    ----------
    traces : RankTraces

    Returns
    -------
    DataFrame
        :data:`COLLECTIVE_COLUMNS`: ``rank``; ``name`` (for a kernel, the collective
        operator that launched it, e.g. ``nccl:all_reduce``, found with
        :func:`kitlib.chain`, else the kernel's name without its arguments; for a host
        row, the operator's name); ``k`` (0 for the rank's first call of that
        name, 1 for the second, … in order of start); ``call`` (``"name#k"``, the key
        that matches a call across ranks); ``measured_on`` (``device`` = an NCCL
        kernel, ``host`` = a ``gloo:*`` operator on Gloo's worker thread,
        ``host enqueue`` = only the calling thread's operator was recorded, which
        holds the enqueue, not the transfer); ``step`` (the ``ProfilerStep`` number
        the call starts in, -1 outside every step); ``tid`` (thread, or stream for a
        kernel); ``start_ns, end_ns`` (ns since the Unix epoch on the rank's host
        clock, not aligned across hosts) and ``dur_ns``; ``size`` (the message size as
        the trace records it: ``"in N out M"`` elements from ``record_param_comms``, else
        the operator's ``Input Dims`` such as ``"[[19618307]]"``, ``""`` when shapes
        were not recorded) and ``identity`` (how ``call`` names the call, one of
        :data:`IDENTITIES`). ``call`` is the key that matches a call across ranks:
        ``"name (pg P, seq S)"`` where the trace records the process group and sequence
        number, else ``"name size#k"`` with ``k`` counting the rank's calls of that name
        and size, else ``"name#k"``. ``k`` counts the rank's calls of that name (and
        size, when recorded) in order of start.

    Raises
    ------
    KitError
        No rank has any collective (the message says what was looked for).

    Examples
    --------
    Each all-reduce is timed by its NCCL kernel and named by the process group and
    sequence number ``record_param_comms`` recorded:

    >>> from kitlib.model.examples import tiny_rank_folder
    >>> from kitlib.readers.ranks import load_traces
    >>> from kitlib.analyses.collectives import collectives
    >>> calls = collectives(load_traces(tiny_rank_folder()))
    >>> calls[["rank", "call", "measured_on", "step", "start_ns", "dur_ns"]]
       rank                           call measured_on  step  start_ns   dur_ns
    0     0  nccl:all_reduce (pg 0, seq 0)      device     1   3100000  2900000
    1     0  nccl:all_reduce (pg 0, seq 1)      device     2  13100000  1900000
    2     1  nccl:all_reduce (pg 0, seq 0)      device     1   5100000   900000
    3     1  nccl:all_reduce (pg 0, seq 1)      device     2  14100000   900000
    >>> calls.loc[0, ["size", "identity"]].tolist()
    ['in 4096 out 4096', 'process group + seq']
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
            ident = [_identity(t.ops, int(op_row[i]) if i in op_row.index else None) for i in kern.index]
            df = pd.DataFrame({"name": names.to_numpy(), "measured_on": "device",
                               "tid": kern["stream"].astype("int64").to_numpy(),
                               "start_ns": kern["start_ns"].to_numpy("int64") + base,
                               "dur_ns": kern["dur_ns"].to_numpy("int64")})
        else:
            ident = None
            ops = t.ops[t.ops["name"].astype(str).str.contains(COMM_OP_PATTERN, regex=True)]
            gloo = ops[ops["name"].astype(str).str.startswith("gloo:")]
            if len(gloo):
                ops, where = gloo, "host"
            else:
                ops, where = ops[ops["depth"] == ops.groupby("tid")["depth"].transform("min")], "host enqueue"
            df = pd.DataFrame({"name": ops["name"].astype(str).to_numpy(), "measured_on": where,
                               "tid": ops["tid"].astype("int64").to_numpy(),
                               "start_ns": ops["start_ns"].to_numpy("int64") + base,
                               "dur_ns": ops["dur_ns"].to_numpy("int64")})
            ident = [_identity(t.ops, int(i)) for i in ops.index]
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
        df["step"] = _step_of(df["start_ns"].to_numpy(), t.steps, base)
        parts.append(df)
    if not parts:
        raise KitError(f"no collectives in ranks {traces.ranks}: no NCCL kernels (ncclKernel_*, "
                       "ncclDevKernel_*) and no operators named record_param_comms, c10d::*, nccl:* or "
                       "gloo:* — was the run distributed, and did the profiler record CPU activity?")
    return pd.concat(parts, ignore_index=True)[COLLECTIVE_COLUMNS]


#: Columns of :func:`collective_matches`.
MATCH_COLUMNS = ["call", "name", "identity", "ranks", "missing", "end_spread_ns", "verified", "reason"]


def collective_matches(traces: RankTraces, calls: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every call key of :func:`collectives` with the ranks that have it, checked by the
    agreement of its end times: which calls are one call on every rank.

    A match is *verified* when the call is present once on every rank and its ends on
    the ranks lie within :data:`END_TOLERANCE_NS` of each other (a blocking collective
    completes on all ranks together: the last rank's data finishes it everywhere).
    The check assumes a collective in which every rank needs every other's data
    (all-reduce, all-gather, all-to-all, reduce-scatter); a broadcast's root or a
    point-to-point send may legitimately finish earlier than its peers.

    Parameters
    ----------
    traces : RankTraces
    calls : DataFrame, optional
        :func:`collectives` of ``traces`` (computed when not given).

    Returns
    -------
    DataFrame
        :data:`MATCH_COLUMNS`, one row per ``call`` key, in order of its first start:
        ``call``, ``name``, ``identity`` (as in :func:`collectives`); ``ranks`` and
        ``missing`` (tuples of the ranks that have the call and that lack it);
        ``end_spread_ns`` (latest end minus earliest end over the ranks that have it,
        ns; 0 on one rank); ``verified`` (bool); ``reason`` (why not, ``""`` when
        verified). ``attrs["tolerance_ns"]`` holds :data:`END_TOLERANCE_NS`.

    Examples
    --------
    >>> from kitlib.readers.ranks import load_traces
    >>> from kitlib.analyses.collectives import collective_matches
    >>> m = collective_matches(load_traces("public-traces", partial=True))
    >>> int(m["verified"].sum()), len(m)      # a subsampled pair: 4 of 13 calls can be matched
    (4, 13)
    >>> print(m.loc[m["call"] == "nccl:all_reduce [[26258430]]#0", "reason"].item())
    ends 612.9 ms later on rank 0 than on rank 1, more than the 1 ms one call allows: not the same call
    """
    return match_calls(collectives(traces) if calls is None else calls, list(traces.ranks))


def match_calls(calls: pd.DataFrame, ranks: list) -> pd.DataFrame:
    """Lesson 12's collective match: one call on every rank, or not, and why.

    A call key (its name and identity, as :func:`collectives` writes it) is one collective
    when every rank has it once and its ends agree within :data:`END_TOLERANCE_NS`: a
    blocking collective finishes on every rank together.

    Parameters
    ----------
    calls : DataFrame
        :func:`collectives`' table: ``call, rank, name, identity, start_ns, end_ns,
        measured_on``.
    ranks : list of int
        Every rank of the job (a rank without the call is named as missing).

    Returns
    -------
    DataFrame
        As :func:`collective_matches`.

    Examples
    --------
    >>> import pandas as pd
    >>> from kitlib.analyses.collectives import match_calls
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

    Returns
    -------
    dict
        ``calls`` (call keys), ``verified`` (matched and checked), ``missing`` (absent on
        some rank), ``ends_apart`` (present everywhere, ends further apart than the
        tolerance), ``unchecked`` (host enqueue only, or one identity on several rows);
        ``end_offset_ms``: per rank other than the first, the median over verified calls
        of its end minus the first rank's end (ms): the clock check, about 0 on one host;
        ``max_end_spread_ms`` over verified calls.

    Examples
    --------
    >>> from kitlib.readers.ranks import load_traces
    >>> from kitlib.analyses.collectives import match_summary
    >>> s = match_summary(load_traces("public-traces", partial=True))
    >>> s["calls"], s["verified"], s["missing"], s["ends_apart"], round(s["max_end_spread_ms"], 3)
    (13, 4, 6, 3, 0.332)
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
    """Each verified collective call on each rank, split into waiting and transfer.

    For a call matched on every rank and verified by its end times
    (:func:`collective_matches`), the last rank to arrive starts it at
    ``last_start_ns``. A rank that started earlier waited
    ``wait_ns = min(last_start_ns - start_ns, dur_ns)`` for it; the rest of its
    time, ``transfer_ns = dur_ns - wait_ns``, is the exchange itself. Estimates:
    see the module's notes on clocks and on NCCL's queueing.

    Parameters
    ----------
    traces : RankTraces
    calls : DataFrame, optional
        :func:`collectives` of ``traces`` (computed when not given).

    Returns
    -------
    DataFrame
        :data:`COLLECTIVE_COLUMNS` plus ``last_start_ns`` (ns since the epoch),
        ``last_rank`` (the rank that arrived last), ``wait_ns``, ``transfer_ns`` (ns), for
        the verified calls only; ``attrs["unmatched"]`` = rows of calls left out
        (missing on some rank or failing the end-time check; :func:`collective_matches`
        says which and why).

    Examples
    --------
    >>> from kitlib.readers.ranks import load_traces
    >>> from kitlib.analyses.collectives import collective_waits
    >>> w = collective_waits(load_traces("public-traces", partial=True))
    >>> len(w), w.attrs["unmatched"]          # 4 verified calls on 2 ranks; 12 rows left out
    (8, 12)
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
    """Which rank arrives last at each collective, and by how much.

    Parameters
    ----------
    traces : RankTraces
    calls : DataFrame, optional
        :func:`collectives` of ``traces``.

    Returns
    -------
    DataFrame
        One row per call matched on every rank, in order of the last arrival:
        ``call``, ``name``, ``step`` (of the last rank), ``last_rank``,
        ``late_by_ns`` (its start minus the next-latest rank's start: how long the
        others waited for it alone), ``spread_ns`` (its start minus the earliest
        rank's start), ``first_rank``. Estimates (start times of different ranks;
        see the module notes on clocks). One rank: ``late_by_ns`` is 0.

    Examples
    --------
    Rank 1 starts both all-reduces last, 2 ms and then 1 ms after rank 0:

    >>> from kitlib.model.examples import tiny_rank_folder
    >>> from kitlib.readers.ranks import load_traces
    >>> from kitlib.analyses.collectives import straggler_table
    >>> t = straggler_table(load_traces(tiny_rank_folder()))
    >>> t[["call", "step", "last_rank", "late_by_ns", "first_rank"]]
                                call  step  last_rank  late_by_ns  first_rank
    0  nccl:all_reduce (pg 0, seq 0)     1          1     2000000           0
    1  nccl:all_reduce (pg 0, seq 1)     2          1     1000000           0
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
    """Every rank's steps.

    Returns
    -------
    DataFrame
        ``rank, step, start_ns`` (ns since the epoch, host clock), ``dur_ns`` (the
        ``ProfilerStep#N`` host interval: exact, the profiler's own duration), one
        row per rank and step.

    Raises
    ------
    KitError
        A rank's trace has no steps (no ``ProfilerStep#N``: recorded without
        ``prof.step()``).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_rank_folder
    >>> from kitlib.readers.ranks import load_traces
    >>> from kitlib.analyses.collectives import rank_step_times
    >>> rank_step_times(load_traces(tiny_rank_folder()))
       rank  step  start_ns    dur_ns
    0     0     1         0  10000000
    1     0     2  10000000  10000000
    2     1     1         0  10000000
    3     1     2  10000000  10000000
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
    """Per rank: step time, and how much of it is spent in collectives, waiting or
    transferring — the lesson's main table.

    Parameters
    ----------
    traces : RankTraces
    calls : DataFrame, optional
        :func:`collectives` of ``traces``.

    Returns
    -------
    DataFrame
        Index ``rank``; columns ``steps`` (count), ``step_ms`` (median step time,
        exact), ``collectives`` (calls inside the steps), ``in_collectives_ms``
        (per step: the union of the rank's collective intervals inside its steps,
        exact), ``wait_ms`` and ``transfer_ms`` (per step, estimates, calls matched
        on every rank: ``wait_ms`` is the union of the waiting parts of
        :func:`collective_waits`, ``transfer_ms`` the rest of the union of those
        calls, so concurrent calls are counted once), ``wait_share`` (``wait_ms /
        (wait_ms + transfer_ms)``).

    Examples
    --------
    >>> from kitlib.readers.ranks import load_traces
    >>> from kitlib.analyses.collectives import rank_summary
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
        # unions, not sums: concurrent calls (DDP broadcasts its buffers on two Gloo threads at
        # once) must not count the same waiting twice
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
    """For each step, the collective at which the others waited longest for one rank.

    A rank that starts a step late (a slow data load, a sleep, a busy host) is
    last at the step's first collective by the whole delay; once the others have
    waited for it, the ranks run in step again and later collectives show smaller
    differences (in their compute, and on Gloo also queueing behind the previous
    collective and the operating system's scheduling, which a trace cannot tell
    apart). The largest ``late_by_ns`` of a step is therefore an estimate of one
    rank's delay in that step while that delay outweighs those differences; when it
    does not (a small delay on a busy host), the largest lateness can belong to
    another rank or another cause.

    Parameters
    ----------
    traces : RankTraces
    calls : DataFrame, optional
        :func:`collectives` of ``traces``.

    Returns
    -------
    DataFrame
        One row per step with a matched collective: ``step``, ``call``, ``name``,
        ``last_rank``, ``late_by_ns`` (the step's largest; an estimate from start
        times, see the module notes on clocks), ``calls`` (matched calls in the step).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_rank_folder
    >>> from kitlib.readers.ranks import load_traces
    >>> from kitlib.analyses.collectives import straggler_by_step
    >>> straggler_by_step(load_traces(tiny_rank_folder()))[["step", "last_rank", "late_by_ns", "calls"]]
       step  last_rank  late_by_ns  calls
    0     1          1     2000000      1
    1     2          1     1000000      1
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

    Returns
    -------
    dict
        From :func:`straggler_by_step`: ``rank`` (the rank most often last at its
        step's longest wait), ``steps_last`` (in how many steps it was) and ``steps``
        (steps with a matched collective), ``late_by_ms_median`` (median over the
        steps of the step's largest lateness, ms; an estimate); and from
        :func:`straggler_table`: ``last_share`` (the share of all matched calls inside
        steps at which ``rank`` arrived last, 0–1) and ``calls``.

    Raises
    ------
    KitError
        Fewer than two ranks (one rank alone is "last" at every step); no collective
        matched on every rank inside a step.

    Examples
    --------
    >>> from kitlib.readers.ranks import load_traces
    >>> from kitlib.analyses.collectives import straggler_summary
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
    """For each verified NCCL call, when each rank *enqueued* it (the start of the
    ``nccl:*`` host operator that launched its kernel) and when its kernel *started*: the
    two tell different stories across ranks, and only the second is when the rank joined
    the collective.

    Returns
    -------
    DataFrame
        One row per verified call with a kernel (in order of the first start): ``call``,
        ``name``, and for every rank ``r`` ``enqueue_ns_r`` and ``start_ns_r`` (ns since the
        epoch); ``enqueue_late_ms`` and ``start_late_ms`` (the last rank's value minus the
        first rank's, in rank order: the highest rank minus rank ``traces.ranks[0]``, ms; a
        negative value says the higher rank was earlier).

    Raises
    ------
    KitError
        No rank has an NCCL kernel (a Gloo or CPU-only run: the enqueue is the call).

    Examples
    --------
    >>> from kitlib.readers.ranks import load_traces
    >>> from kitlib.analyses.collectives import enqueue_and_start
    >>> t = enqueue_and_start(load_traces("public-traces", partial=True))
    >>> t[["enqueue_late_ms", "start_late_ms"]].round(3).values.tolist()
    [[-0.041, 3.302], [-9.617, 0.084], [-9.187, 22.328], [-7.896, 1.292]]
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
    """The union of intervals ``[start, end)`` as sorted, disjoint ``(starts, ends)``, in int64
    ns (:func:`kitlib.analyses.intervals.union_arrays` on the values cast)."""
    return union_arrays(np.asarray(starts, dtype="int64"), np.asarray(ends, dtype="int64"))


def _inside(merged: tuple, points: np.ndarray) -> np.ndarray:
    """Whether each point lies in a merged set of half-open intervals ``[start, end)``
    (kitlib.model.window)."""
    s, e = merged
    return containing(s, e, points, closed="left") >= 0


def _segments(*sets: tuple) -> tuple[np.ndarray, np.ndarray, list]:
    """The elementary pieces between all boundaries of ``sets``: their lengths and, per
    set, whether each piece belongs to it (a piece is wholly in or out of every set)."""
    b = np.unique(np.concatenate([np.r_[s, e] for s, e in sets] or [np.zeros(0, "int64")]))
    if len(b) < 2:
        return np.zeros(0, "int64"), np.zeros(0, "int64"), [np.zeros(0, bool) for _ in sets]
    left, length = b[:-1], np.diff(b)
    return left, length, [_inside(x, left) for x in sets]


def step_thread(trace) -> int | None:
    """The thread that drives the rank's steps: the one its ``ProfilerStep#N`` ranges are
    on (without steps, the thread with the most operators; None without operators).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_rank_docs
    >>> from kitlib.readers.trace import trace_from_json
    >>> from kitlib.analyses.collectives import step_thread
    >>> tr = trace_from_json(tiny_rank_docs()[0])
    >>> tr.steps["tid"].tolist(), step_thread(tr)
    ([1, 1], 1)
    """
    if len(trace.steps):
        return int(trace.steps["tid"].mode().iloc[0])
    o = trace.ops
    o = o[o["kind"] == "op"] if len(o) else o
    return int(o["tid"].value_counts().idxmax()) if len(o) else None


def compute_intervals(trace) -> tuple[str, np.ndarray, np.ndarray]:
    """The rank's *compute*: the time during which its step makes progress other than by
    communicating. The one definition behind :func:`exposed_communication` and
    :func:`kitlib.analyses.stragglers.step_budget`.

    - A trace with kernels (a GPU run): every kernel that is not an NCCL kernel, on any
      stream. The GPU is what the step waits for; an NCCL kernel that runs while a
      compute kernel runs is hidden under it (HTA's rule too).
    - A trace without kernels (a CPU run, Gloo): every operator on the step's own
      thread (:func:`step_thread`), collective operators (:data:`COMM_OP_PATTERN`) left
      out. On a CPU the backward pass runs on the thread that called it, so that thread
      is the step's only worker. Operators on other threads do not advance the step, and
      Gloo's worker threads run the collectives themselves; on two shared cores they may
      not even run at the same instant. *Every* operator, not only ``aten::``: the
      autograd engine (``autograd::engine::evaluate_function``) and DDP's reducer
      (``torch::distributed::reducer::mul_out``, ``copy_bucket_to_grad``) keep the
      thread busy between ``aten::`` calls, and leaving them out would call
      communication exposed while the thread was working (2 to 25 ms per step on the
      kit's Gloo pairs). User ranges (``record_function``: ``backward``,
      ``DistributedDataParallel.forward``) are not operators: they enclose the waits.

    Returns
    -------
    tuple
        ``(source, starts, ends)``: ``"GPU kernels"`` or ``"host operators, step's
        thread"``, and the intervals in ns on the trace's own clock (not merged).

    Examples
    --------
    A GPU run: the compute kernels, the NCCL ones left out.

    >>> from kitlib.model.examples import tiny_rank_docs
    >>> from kitlib.readers.trace import trace_from_json
    >>> from kitlib.analyses.collectives import compute_intervals
    >>> compute_intervals(trace_from_json(tiny_rank_docs()[0]))
    ('GPU kernels', array([ 1000000,  4000000, 11000000]), array([ 3000000,  5000000, 13000000]))

    A CPU run (Gloo): the step's thread's operators but the collective's enqueue; the
    ``gloo:`` operator runs on Gloo's own thread.

    >>> def op(name, ts, dur, tid, cat="cpu_op"):
    ...     return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}
    >>> cpu = trace_from_json({"traceEvents": [
    ...     op("ProfilerStep#1", 0, 100, 1, "user_annotation"), op("aten::mm", 10, 20, 1),
    ...     op("c10d::allreduce_", 40, 5, 1), op("gloo:all_reduce", 42, 30, 2), op("aten::add", 80, 10, 1)]})
    >>> compute_intervals(cpu)
    ("host operators, step's thread", array([10000, 80000]), array([30000, 90000]))
    """
    k = trace.kernels
    kern = k[k["kind"] == "kernel"] if len(k) else k
    if len(kern):
        comp = kern[~kern["name"].astype(str).str.contains(COMM_KERNEL_PATTERN, regex=True)]
        return "GPU kernels", comp["start_ns"].to_numpy("int64"), comp["end_ns"].to_numpy("int64")
    o = trace.ops
    tid = step_thread(trace)
    o = o[(o["kind"] == "op") & (o["tid"] == tid) & ~o["name"].astype(str).str.contains(COMM_OP_PATTERN, regex=True)]
    return HOST_COMPUTE, o["start_ns"].to_numpy("int64"), o["end_ns"].to_numpy("int64")


#: ``compute_from`` of a CPU run in :func:`exposed_communication` (see :func:`compute_intervals`).
HOST_COMPUTE = "host operators, step's thread"


#: Columns of :func:`exposed_by_step`.
EXPOSED_NS_COLUMNS = ["rank", "step", "calls", "comm_ns", "exposed_ns"]


def exposed_by_step(traces: RankTraces, calls: pd.DataFrame | None = None) -> pd.DataFrame:
    r"""Exposed communication, the kit's one definition: per rank and step, the time in the
    step's collectives during which the rank computed nothing.

    For rank ``r`` and step ``n``, on ``r``'s own clock (ns since the epoch), every interval
    half-open ``[start, end)``: ``C`` is the union of ``r``'s collective calls
    (:func:`collectives`: the NCCL kernel, or Gloo's ``gloo:*`` operator) that *start* in
    ``ProfilerStep#n`` (its ``step`` column), each whole, even past the step's end (a call
    that starts in no step is in no row); ``P`` is the rank's compute
    (:func:`compute_intervals`); ``comm_ns = |C|``, ``exposed_ns = |C \ P|``. A call that
    touches compute at one instant only is not hidden there. :func:`exposed_communication`
    splits this ``exposed_ns`` into waiting and transfer;
    :func:`kitlib.analyses.stragglers.step_budget` subtracts it from the step.

    Returns
    -------
    DataFrame
        :data:`EXPOSED_NS_COLUMNS`, int64, one row per rank and step with a call (rank and
        step order): ``calls`` (how many start in the step), ``comm_ns``, ``exposed_ns``.

    Examples
    --------
    Rank 0's step 1: its all-reduce [3.1, 6.0) ms beside compute [1, 3) and [4, 5) ms; exposed
    [3.1, 4) and [5, 6): 1.9 of 2.9 ms (:func:`kitlib.model.examples.tiny_rank_docs`).

    >>> from kitlib.model.examples import tiny_rank_folder
    >>> from kitlib.readers.ranks import load_traces
    >>> from kitlib.analyses.collectives import exposed_by_step
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
    """The pieces of each rank's step that :func:`exposed_communication` adds up: where
    communication waited, transferred or could not be split, and whether compute ran
    beside it; and the compute that ran with no communication (the bucket picture).

    Returns
    -------
    DataFrame
        :data:`PIECE_COLUMNS`: ``rank``, ``step``, ``start_ns``, ``end_ns`` (ns since the
        epoch, the rank's clock; adjacent pieces of one kind are joined), ``part`` (one of
        :data:`PARTS`), ``beside_compute`` (bool: a compute kernel or operator ran during
        the piece; always True for ``compute``). Compute pieces cover the step from its
        ``ProfilerStep`` start (or its first collective, if earlier) to its last
        collective's end.

    Examples
    --------
    >>> from kitlib.readers.ranks import load_traces
    >>> from kitlib.analyses.collectives import communication_pieces
    >>> p = communication_pieces(load_traces("public-traces", partial=True))
    >>> sorted(set(p["part"]))
    ['compute', 'transfer', 'unmatched', 'wait']
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
    r"""Per rank and step: how much of the communication ran with no computation beside it
    (*exposed*: the step is held up by it), split into waiting and transfer before any
    of it is called hidden.

    ``C``, ``P``, ``comm = |C|`` and ``exposed = |C \ P|`` are :func:`exposed_by_step`'s (the
    one definition: the calls that start in the step, whole, less the rank's compute);
    ``V`` is the part of ``C`` in calls verified on every rank (:func:`collective_matches`),
    ``W`` their waiting parts (:func:`collective_waits`: before the last rank arrived).
    ``exposed`` is split exactly into ``|W \ P|`` (waiting for a peer), ``|(V \ W) \ P|`` (transfer)
    and ``|(C \ V) \ P|`` (calls without a verified match: cannot be split); the hidden
    part ``|C ∩ P|`` likewise into waiting and transfer (an NCCL kernel that spins
    waiting for a late peer while compute runs is not communication hidden: it moved no
    data). ``tail`` is the time from the end of the last compute before the step's last
    collective ends to that end (in DDP, after the last backward kernel: the gradient
    all-reduce the optimizer waits for).

    Parameters
    ----------
    traces : RankTraces
    calls : DataFrame, optional
        :func:`collectives` of ``traces``.

    Returns
    -------
    DataFrame
        :data:`EXPOSED_COLUMNS`, one row per rank and step with a collective:
        ``compute_from`` (``"GPU kernels"`` or :data:`HOST_COMPUTE`), ``calls``,
        and ms: ``comm_ms``, ``hidden_ms``, ``exposed_ms`` = ``exposed_wait_ms`` +
        ``exposed_transfer_ms`` + ``exposed_unmatched_ms``, ``hidden_wait_ms``,
        ``hidden_transfer_ms`` (with the hidden unmatched rest, sum to ``hidden_ms``),
        ``tail_ms``. Wait and transfer are estimates (start times of different ranks);
        on a CPU run "compute beside it" means the step's own thread ran an operator
        while a Gloo worker thread ran the collective, which on a machine with fewer
        cores than threads may not have been at the same instant.

    Raises
    ------
    KitError
        As :func:`collectives`.

    Examples
    --------
    >>> from kitlib.readers.ranks import load_traces
    >>> from kitlib.analyses.collectives import exposed_communication
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
    """How much of each rank's communication-kernel time ran while a compute kernel
    ran too (on another stream): the communication hidden under computation.

    A kernel that spins waiting for a late peer while compute runs counts as hidden here,
    though it moved no data: :func:`exposed_communication` splits waiting from transfer
    first. Computed per rank on the GPU's own timeline, so exact within a complete trace
    (on a subsampled one, dropped compute kernels make ``hidden_fraction`` too low and
    dropped communication kernels can move it either way):
    ``hidden = |comm ∩ compute| = |comm| + |compute| - |comm ∪ compute|`` with
    ``|·|`` the length of a union of intervals (:func:`kitlib.analyses.intervals.busy_ns`).

    Parameters
    ----------
    traces : RankTraces

    Returns
    -------
    DataFrame
        Index ``rank``; ``comm_kernels`` (count), ``comm_ms`` (union of the NCCL
        kernels), ``compute_ms`` (union of the other kernels), ``hidden_ms``,
        ``hidden_fraction`` (``hidden_ms / comm_ms``; NaN without communication
        kernels).

    Raises
    ------
    KitError
        No rank's trace has any NCCL kernel (a CPU or Gloo run has none: this
        question needs a GPU trace).

    Examples
    --------
    Rank 0 ran a compute kernel (1 ms) beside its first all-reduce; rank 1 none:

    >>> from kitlib.model.examples import tiny_rank_folder
    >>> from kitlib.readers.ranks import load_traces
    >>> from kitlib.analyses.collectives import comm_overlap
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
