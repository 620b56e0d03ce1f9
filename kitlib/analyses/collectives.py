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
- Collectives are matched across ranks by name and order of issue (the k-th
  ``gloo:all_reduce`` of rank 0 with the k-th of rank 1), as DDP issues them in
  the same order on every rank. A subsampled trace can break that order, so only
  calls present on every rank are matched; the rest are counted in
  ``attrs["unmatched"]``.

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
from ..readers.ranks import RankTraces
from .chain import chain
from .intervals import busy_ns
from ..model.window import containing

#: Host operators of a collective (``record_param_comms``, ``c10d::*``, ``nccl:*``, ``gloo:*``).
COMM_OP_PATTERN = r"^(?:record_param_comms$|c10d::|nccl:|gloo:)"
#: Communication kernels of NCCL (``ncclKernel_*`` before NCCL 2.19, ``ncclDevKernel_*`` after).
COMM_KERNEL_PATTERN = r"^(?:ncclKernel_|ncclDevKernel_)"

#: Columns of :func:`collectives`.
COLLECTIVE_COLUMNS = ["rank", "call", "name", "k", "measured_on", "step", "tid", "start_ns", "end_ns",
                      "dur_ns"]


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
    :data:`COMM_KERNEL_PATTERN`), trace clock."""
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
        clock, not aligned across hosts) and ``dur_ns``.

    Raises
    ------
    KitError
        No rank has any collective (the message says what was looked for).
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
            df = pd.DataFrame({"name": names.to_numpy(), "measured_on": "device",
                               "tid": kern["stream"].astype("int64").to_numpy(),
                               "start_ns": kern["start_ns"].to_numpy("int64") + base,
                               "dur_ns": kern["dur_ns"].to_numpy("int64")})
        else:
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
        if not len(df):
            continue
        df = df.sort_values("start_ns", kind="stable").reset_index(drop=True)
        df["rank"] = r
        df["end_ns"] = df["start_ns"] + df["dur_ns"]
        df["k"] = df.groupby("name").cumcount().astype("int64")
        df["call"] = df["name"] + "#" + df["k"].astype(str)
        df["step"] = _step_of(df["start_ns"].to_numpy(), t.steps, base)
        parts.append(df)
    if not parts:
        raise KitError(f"no collectives in ranks {traces.ranks}: no NCCL kernels (ncclKernel_*, "
                       "ncclDevKernel_*) and no operators named record_param_comms, c10d::*, nccl:* or "
                       "gloo:* — was the run distributed, and did the profiler record CPU activity?")
    return pd.concat(parts, ignore_index=True)[COLLECTIVE_COLUMNS]


def collective_waits(traces: RankTraces, calls: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each matched collective call on each rank, split into waiting and transfer.

    For a call matched on every rank (same ``call`` key), the last rank to arrive
    starts it at ``last_start_ns``. A rank that started earlier waited
    ``wait_ns = min(last_start_ns - start_ns, dur_ns)`` for it; the rest of its
    time, ``transfer_ns = dur_ns - wait_ns``, is the exchange itself. Estimates:
    see the module's notes on clocks.

    Parameters
    ----------
    traces : RankTraces
    calls : DataFrame, optional
        :func:`collectives` of ``traces`` (computed when not given).

    Returns
    -------
    DataFrame
        :data:`COLLECTIVE_COLUMNS` plus ``last_start_ns`` (ns since the epoch),
        ``wait_ns``, ``transfer_ns`` (ns), ``last_rank`` (the rank that arrived
        last), for the calls present on every rank; ``attrs["unmatched"]`` = rows of
        calls missing on some rank (left out).
    """
    calls = collectives(traces) if calls is None else calls
    n = len(traces.ranks)
    present = calls.groupby("call")["rank"].transform("nunique") == n
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
    """
    tab = straggler_table(traces, calls)
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
        No collective matched on every rank inside a step.

    Examples
    --------
    >>> from kitlib.readers.ranks import load_traces
    >>> from kitlib.analyses.collectives import straggler_summary
    >>> s = straggler_summary(load_traces("ranks_straggler"))
    >>> s["rank"], s["steps_last"], s["steps"], round(s["late_by_ms_median"], 1)
    (1, 3, 3, 525.6)
    """
    by_step = straggler_by_step(traces, calls)
    if not len(by_step):
        raise KitError(f"no collective matched on all ranks {traces.ranks} inside a step")
    counts = by_step["last_rank"].value_counts()
    rank = int(counts.index[0])
    tab = straggler_table(traces, calls)
    tab = tab[tab["step"] >= 0]
    return {"rank": rank, "steps_last": int(counts.iloc[0]), "steps": int(len(by_step)),
            "late_by_ms_median": float(by_step["late_by_ns"].median()) / 1e6,
            "last_share": float((tab["last_rank"] == rank).mean()), "calls": int(len(tab))}


def comm_overlap(traces: RankTraces) -> pd.DataFrame:
    """How much of each rank's communication-kernel time ran while a compute kernel
    ran too (on another stream): the communication hidden under computation.

    Computed per rank on the GPU's own timeline, so exact within a complete trace
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


__all__ = ["COMM_OP_PATTERN", "COMM_KERNEL_PATTERN", "COLLECTIVE_COLUMNS", "collective_ops", "comm_kernels",
           "collectives", "collective_waits", "straggler_table", "straggler_by_step", "straggler_summary", "rank_step_times",
           "rank_summary", "comm_overlap"]
