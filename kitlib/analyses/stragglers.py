"""The straggler, measured per step from each rank's own time: where did each rank's step go?

A collective ends only when every rank has joined it, so every rank's step lasts
about as long as the slowest rank's. The step time alone therefore cannot say who
was slow. What differs between the ranks is *how* the step was spent: a rank that
is late spends its time working (or sleeping, or loading data); the others spend
the same time blocked in a collective, waiting for it. :func:`step_budget` splits
every rank's every step into

- ``exposed_ns``: time in collectives while the rank's main thread runs no
  operator — the rank was stuck in communication with nothing else to do (waiting
  for a late peer, or a transfer nothing hides): the kit's one definition,
  :func:`kitlib.analyses.collectives.exposed_by_step`;
- ``compute_ns = step_ns - exposed_ns``: everything else, itself split into
  ``ops_ns`` (the main thread's operators, the work the profiler sees) and
  ``outside_ops_ns`` (time between operators: Python, data loading outside
  operators, a ``time.sleep``).

:func:`straggler_estimate` compares these across ranks step by step: a rank's
excess is its time minus the median of the other ranks' in the same step. Comparing
ranks *within one step* cancels whatever slowed the whole machine during that step
(on a shared host the step time itself drifts by hundreds of ms); comparing two
runs does not (:func:`machine_drift` says when it would mislead). The operators'
own time still differs between ranks by ± hundreds of ms from step to step on a
busy host, so the compute excess alone is fragile (the kit's recordings: 502 ms
and 306 ms for 500 ms injected, 148 ms for 200 ms); the operators' difference is
used only when it is clear of its own swing, and otherwise the excess *outside*
operators is the delay (471, 504 and 201 ms on the same recordings).

Why not ``step_ns - (all time inside collectives)``: with Gloo each all-reduce of
``DistributedDataParallel`` runs on a worker thread *while* the main thread goes on
with the backward pass. Those hidden seconds are not lost time; subtracting them
charges the rank that hides the most communication with the least compute (on
``ranks_straggler`` that difference is 964 ms, nearly twice the 500 ms injected).

Time on one clock only: every figure here is a difference of times of one rank's
own trace (no comparison of start times across ranks, so no clock alignment is
needed). The estimate then compares durations across ranks.

Host collectives only: on an NCCL run the collectives' time is on the GPU, while
the host runs ahead; :func:`step_budget` refuses such traces (see
:mod:`kitlib.analyses.collectives` for the GPU's view).

Sources: PyTorch ``torch/nn/parallel/distributed.py`` (buffers broadcast at the
start of ``forward``, gradient buckets all-reduced during ``backward``, waited for
at its end); ``ProcessGroupGloo`` (each collective on a worker thread under a
``gloo:<op>`` record function); the kit's injected delay
(:class:`kitlib.capture.workload.WorkloadConfig` ``straggler_ms``: a ``time.sleep``
at the start of every step inside a ``straggler_delay`` range).
"""
from __future__ import annotations

import pandas as pd

from ..errors import KitError
from ..model.ranks import RankTraces
from .collectives import collectives, compute_intervals, exposed_by_step
from .intervals import busy_ns

#: Columns of :func:`step_budget`.
BUDGET_COLUMNS = ["rank", "step", "step_ns", "in_collectives_ns", "exposed_ns", "compute_ns", "ops_ns",
                  "outside_ops_ns"]

#: Above this change of the median step time (profiled vs uninstrumented, as a
#: fraction), :func:`machine_drift` says the machine drifted. The ``light`` recipe
#: costs about 4 % on the kit's balanced two-rank run (1,512 -> 1,571 ms, rank 0).
DRIFT_TOLERANCE = 0.15


def step_budget(traces: RankTraces, calls: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every rank's every step split into exposed communication and the rest.

    Parameters
    ----------
    traces : RankTraces
        Ranks whose collectives were measured on the host (Gloo: ``gloo:*`` on
        Gloo's worker threads).
    calls : DataFrame, optional
        :func:`kitlib.analyses.collectives.collectives` of ``traces``.

    Returns
    -------
    DataFrame
        :data:`BUDGET_COLUMNS`, one row per rank and ``ProfilerStep``, all in ns
        (exact: unions of the profiler's own intervals): ``step_ns`` (the
        ``ProfilerStep#N`` interval); ``in_collectives_ns`` and ``exposed_ns``, the
        ``comm_ns`` and ``exposed_ns`` of
        :func:`kitlib.analyses.collectives.exposed_by_step`, the one definition (the
        union of the collectives that start in the step, whole, any thread, and the
        part of it during which the step's thread runs no operator; 0 in a step
        without one), which :func:`~kitlib.analyses.collectives.exposed_communication`
        splits too; ``compute_ns = step_ns - exposed_ns``; ``ops_ns`` (union of the
        rank's compute, :func:`~kitlib.analyses.collectives.compute_intervals`, inside
        the step's half-open window ``[start, end)``: the thread's operators,
        collective operators left out); ``outside_ops_ns = compute_ns - ops_ns`` (on
        that thread, neither an operator nor blocked in a collective: Python, sleeps,
        loading outside operators). A call that outlasts its step counts whole in the
        step it starts in: that step's ``outside_ops_ns`` is short by the overrun, the
        next step's long by it (``data/clinic/cpu/case_b``: a ``gloo:all_reduce``
        0.53 ms past rank 0's step 2).

    Raises
    ------
    KitError
        A rank without steps; collectives measured on the GPU (an NCCL trace: its
        host thread does not block in them, so the split means nothing there); no
        collectives at all (from :func:`kitlib.analyses.collectives.collectives`).

    Examples
    --------
    >>> from kitlib.readers.ranks import load_traces
    >>> from kitlib.analyses.stragglers import step_budget
    >>> b = step_budget(load_traces("ranks_straggler"))
    >>> (b.set_index(["rank", "step"])[["step_ns", "exposed_ns", "compute_ns"]] // 1_000_000).loc[(slice(None), 3), :]
               step_ns  exposed_ns  compute_ns
    rank step
    0    3        2716         738        1977
    1    3        2742          20        2721
    """
    calls = collectives(traces) if calls is None else calls
    if (calls["measured_on"] == "device").any():
        raise KitError(f"ranks {traces.ranks}: the collectives were measured on the GPU (NCCL kernels); the "
                       "step budget splits the host thread's time, which does not block in an NCCL "
                       "collective — read the GPU's exposed communication instead")
    exposed_of = exposed_by_step(traces, calls).set_index(["rank", "step"])   # the one definition
    rows = []
    for r in traces.ranks:
        t = traces.traces[r]
        steps = t.steps
        if not len(steps):
            raise KitError(f"rank {r} ({traces.info.set_index('rank').loc[r, 'path']}) has no steps "
                           "(ProfilerStep#N): it was recorded without a profiler schedule and prof.step()")
        _, ps, pe = compute_intervals(t)            # the one definition of compute (collectives.py)
        mine = pd.DataFrame({"start_ns": ps, "dur_ns": pe - ps})
        for _, s in steps.iterrows():
            key = (int(r), int(s["step"]))
            in_coll, exposed = (int(x) for x in exposed_of.loc[key, ["comm_ns", "exposed_ns"]]) \
                if key in exposed_of.index else (0, 0)
            ops_ns = busy_ns(mine, (int(s["start_ns"]), int(s["start_ns"]) + int(s["dur_ns"])))
            step_ns = int(s["dur_ns"])
            rows.append({"rank": int(r), "step": int(s["step"]), "step_ns": step_ns, "in_collectives_ns": in_coll,
                         "exposed_ns": exposed, "compute_ns": step_ns - exposed, "ops_ns": ops_ns,
                         "outside_ops_ns": step_ns - exposed - ops_ns})
    return pd.DataFrame(rows, columns=BUDGET_COLUMNS).astype("int64")


def _half_range(x: pd.Series) -> float:
    return float(x.max() - x.min()) / 2


def straggler_estimate(traces: RankTraces | None = None, budget: pd.DataFrame | None = None) -> dict:
    """The rank the others waited for and how long per step, from the ranks' own time.

    In every step present on every rank, each rank's *excess* in a column of
    :func:`step_budget` is its value minus the median of the other ranks' in that
    step. Three excesses are taken: of ``compute_ns`` (the whole step less exposed
    collectives), and of its two parts, ``ops_ns`` and ``outside_ops_ns``. Over the
    steps, each has a median and a *swing* (half its range, (max − min) / 2).

    The operators are the part a shared machine moves most: the same operators on the
    same batch sizes take ± hundreds of ms from step to step on two busy cores. So a
    rank's operator excess counts only when it is *clear*: its median is more than twice
    its swing (a rank that really computes slower, every step). Then the rank's delay is
    its median compute excess; otherwise the operators' difference is noise and the
    delay is its median excess outside operators. The straggler is the rank with the
    largest delay.

    Parameters
    ----------
    traces : RankTraces, optional
        Read with :func:`step_budget` when ``budget`` is not given.
    budget : DataFrame, optional
        :func:`step_budget` rows (e.g. hand-built).

    Returns
    -------
    dict
        ``rank``; ``delay_ms`` (the estimate, ms per step); ``delay_from``
        (``"compute"`` or ``"outside operators"``: which excess it is);
        ``delay_ms_by_step`` (that excess in each step, step order); ``swing_ms`` (its
        swing); ``clear`` (``delay_ms`` more than twice ``swing_ms``: the delay stands
        out of the step-to-step noise); ``compute_ms`` (median compute excess: step
        time less exposed collectives, compared across ranks); ``ops_ms`` and
        ``outside_ops_ms`` (the medians of the two parts); ``noise_ms`` (the swing of
        the operator excess); ``steps`` (count).

    Raises
    ------
    KitError
        Fewer than two ranks, or no step present on every rank.

    Examples
    --------
    >>> from kitlib.readers.ranks import load_traces
    >>> from kitlib.analyses.stragglers import straggler_estimate
    >>> e = straggler_estimate(load_traces("ranks_straggler"))
    >>> e["rank"], e["delay_from"], round(e["delay_ms"]), [round(x) for x in e["delay_ms_by_step"]], e["clear"]
    (1, 'outside operators', 471, [471, 527, 465], True)
    >>> round(e["compute_ms"]), round(e["ops_ms"]), round(e["noise_ms"])
    (502, 37, 196)
    """
    b = step_budget(traces) if budget is None else budget
    ranks = sorted(b["rank"].unique())
    if len(ranks) < 2:
        raise KitError(f"a straggler needs two ranks or more to compare; these steps are of ranks {ranks}")
    full = b.groupby("step")["rank"].transform("nunique") == len(ranks)
    b = b[full]
    if not len(b):
        raise KitError(f"no step is present on every rank {ranks}: the ranks' steps cannot be compared")
    excess = {}
    for col in ("compute_ns", "ops_ns", "outside_ops_ns"):
        wide = b.pivot(index="step", columns="rank", values=col).astype("float64")
        excess[col] = pd.DataFrame({r: wide[r] - wide.drop(columns=r).median(axis=1) for r in ranks})
    per_rank = {}
    for r in ranks:
        ops = excess["ops_ns"][r]
        from_ = "compute" if abs(ops.median()) > 2 * _half_range(ops) else "outside operators"
        series = excess["compute_ns" if from_ == "compute" else "outside_ops_ns"][r]
        per_rank[r] = (float(series.median()), from_, series)
    rank = int(max(ranks, key=lambda r: per_rank[r][0]))
    delay, from_, series = per_rank[rank]
    swing = _half_range(series)
    return {"rank": rank, "delay_ms": delay / 1e6, "delay_from": from_,
            "delay_ms_by_step": [float(x) / 1e6 for x in series], "swing_ms": swing / 1e6,
            "clear": bool(delay > 2 * swing),
            "compute_ms": float(excess["compute_ns"][rank].median()) / 1e6,
            "ops_ms": float(excess["ops_ns"][rank].median()) / 1e6,
            "outside_ops_ms": float(excess["outside_ops_ns"][rank].median()) / 1e6,
            "noise_ms": _half_range(excess["ops_ns"][rank]) / 1e6, "steps": int(len(series))}


def machine_drift(wall: pd.DataFrame, budget: pd.DataFrame, tolerance: float = DRIFT_TOLERANCE) -> pd.DataFrame:
    """Did the machine change speed between a run's uninstrumented and profiled steps?

    A kit run times a few steps without the profiler (``step_ms_uninstrumented``)
    just before it records. The ``light`` recipe costs a few per cent, so when the
    profiled steps are much slower or faster than those, the machine itself changed
    (other jobs on a shared host, clocks, memory): a step time compared with
    another run's then carries that change, and must not be blamed on the
    straggler. Compare ranks within a step instead (:func:`straggler_estimate`).

    Parameters
    ----------
    wall : DataFrame
        ``rank, series, i, step_ms`` (:func:`kitlib.readers.ranks.wall_step_times`);
        the rows of series ``step_ms_uninstrumented`` are used.
    budget : DataFrame
        :func:`step_budget` of the same run (its ``step_ns``: the profiled steps).
    tolerance : float
        The change (fraction) above which the machine is said to have drifted.

    Returns
    -------
    DataFrame
        Index ``rank``: ``uninstrumented_ms`` and ``profiled_ms`` (medians),
        ``change`` (``profiled_ms / uninstrumented_ms - 1``), ``drifted`` (``|change|
        > tolerance``).

    Raises
    ------
    KitError
        No uninstrumented step times (a run recorded without ``timing_steps``, or
        loose trace files without the kit's ``step_times.json``).

    Examples
    --------
    >>> from kitlib.readers.ranks import load_traces, wall_step_times
    >>> from kitlib.analyses.stragglers import machine_drift, step_budget
    >>> rt = load_traces("ranks_straggler")
    >>> machine_drift(wall_step_times(rt), step_budget(rt)).round(2)
          uninstrumented_ms  profiled_ms  change  drifted
    rank
    0               1884.25      2449.62    0.30     True
    1               1917.63      2417.52    0.26     True
    """
    u = wall[wall["series"] == "step_ms_uninstrumented"]
    if not len(u):
        raise KitError("no uninstrumented step times (step_ms_uninstrumented) to compare the profiled steps "
                       "with: record with the kit's capture (timing_steps > 0) to know whether the machine drifted")
    un = u.groupby("rank")["step_ms"].median()
    pr = budget.groupby("rank")["step_ns"].median() / 1e6
    out = pd.DataFrame({"uninstrumented_ms": un, "profiled_ms": pr}).dropna()
    out.index = out.index.astype("int64").rename("rank")
    out["change"] = out["profiled_ms"] / out["uninstrumented_ms"] - 1
    out["drifted"] = out["change"].abs() > tolerance
    return out


def drift_note(drift: pd.DataFrame) -> str:
    """One sentence for a lesson, said before the straggler is blamed: whether the
    machine drifted during the run (:func:`machine_drift`).

    Examples
    --------
    >>> import pandas as pd
    >>> from kitlib.analyses.stragglers import drift_note
    >>> d = pd.DataFrame({"uninstrumented_ms": [1000.0], "profiled_ms": [1300.0], "change": [0.3],
    ...                   "drifted": [True]}, index=pd.Index([0], name="rank"))
    >>> drift_note(d)
    'the machine drifted: rank 0 stepped in 1,000 ms without the profiler and 1,300 ms with it (+30 %), far more than the profiler costs: compare ranks within a step, not this run with another'
    """
    bad = drift[drift["drifted"]]
    if not len(bad):
        worst = float(drift["change"].abs().max())
        return (f"no drift seen: on every rank the profiled steps are within {worst * 100:.0f} % of the "
                "uninstrumented ones")
    parts = [f"rank {r} stepped in {row.uninstrumented_ms:,.0f} ms without the profiler and {row.profiled_ms:,.0f} "
             f"ms with it ({row.change * 100:+.0f} %)" for r, row in bad.iterrows()]
    return ("the machine drifted: " + "; ".join(parts) + ", far more than the profiler costs: compare ranks "
            "within a step, not this run with another")


__all__ = ["BUDGET_COLUMNS", "DRIFT_TOLERANCE", "step_budget", "straggler_estimate", "machine_drift", "drift_note"]
