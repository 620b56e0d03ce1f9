"""The straggler, measured per step from each rank's own time: where did each rank's step go?

Every rank's step lasts about as long as the slowest rank's, so step time cannot say who
was slow; *how* the step was spent can. Host (Gloo) collectives only; figures are differences
of one rank's own times, so no clock alignment is needed. ``traces`` is a
:class:`~kitlib.model.ranks.RankTraces`, ``calls`` its :func:`~kitlib.analyses.collectives.collectives`.

Sources: docs/SOURCES.md#stragglers-step-budget
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

#: Above this change of the median step time (profiled vs uninstrumented, a fraction),
#: :func:`machine_drift` says the machine drifted (docs/SOURCES.md#stragglers-step-budget).
DRIFT_TOLERANCE = 0.15


def step_budget(traces: RankTraces, calls: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every rank's every step split into exposed communication and the rest.

    Returns :data:`BUDGET_COLUMNS`, int64 ns, per rank and step: ``step_ns``;
    ``in_collectives_ns``, ``exposed_ns`` (:func:`~kitlib.analyses.collectives.exposed_by_step`'s,
    0 without a call); ``compute_ns = step_ns - exposed_ns``; ``ops_ns`` (union of the step's
    :func:`~kitlib.analyses.collectives.compute_intervals`); ``outside_ops_ns = compute_ns - ops_ns``
    (Python, data loading, a ``time.sleep``).

    Raises KitError for a rank without steps, collectives measured on the GPU (NCCL), or
    no collectives.

    Examples
    --------
    >>> from kitlib.readers.ranks import load_traces
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
        _, ps, pe = compute_intervals(t)
        mine = pd.DataFrame({"start_ns": ps, "dur_ns": pe - ps})
        for _, s in steps.iterrows():
            key = (int(r), int(s["step"]))
            in_coll, exposed = (int(x) for x in exposed_of.loc[key, ["comm_ns", "exposed_ns"]]) \
                if key in exposed_of.index else (0, 0)
            step_ns = int(s["dur_ns"])
            ops_ns = busy_ns(mine, (int(s["start_ns"]), int(s["start_ns"]) + step_ns))
            rows.append({"rank": int(r), "step": int(s["step"]), "step_ns": step_ns, "in_collectives_ns": in_coll,
                         "exposed_ns": exposed, "compute_ns": step_ns - exposed, "ops_ns": ops_ns,
                         "outside_ops_ns": step_ns - exposed - ops_ns})
    return pd.DataFrame(rows, columns=BUDGET_COLUMNS).astype("int64")


def _half_range(x: pd.Series) -> float:
    return float(x.max() - x.min()) / 2


def straggler_estimate(traces: RankTraces | None = None, budget: pd.DataFrame | None = None) -> dict:
    """The rank the others waited for and how long per step, from the ranks' own time
    (``budget``: :func:`step_budget` rows, read from ``traces`` when not given).

    In each step present on every rank, a rank's *excess* in a column is its value minus
    the median of the others'; over steps each excess has a median and a *swing*
    ((max − min) / 2). The operators' excess counts only when *clear* (median more than
    twice its swing): then the delay is the median compute excess, otherwise the median
    excess outside operators. The straggler has the largest delay.

    Returns ``rank``, ``delay_from`` (``"compute"``/``"outside operators"``), ``clear`` (delay > 2 ×
    swing), ``steps``; ms: ``delay_ms``, ``delay_ms_by_step``, ``swing_ms``, ``compute_ms``,
    ``ops_ms``, ``outside_ops_ms`` (median excesses), ``noise_ms`` (swing of the operator excess).

    Raises KitError with fewer than two ranks or no step present on every rank.

    Examples
    --------
    >>> from kitlib.readers.ranks import load_traces
    >>> e = straggler_estimate(load_traces("ranks_straggler"))
    >>> e["rank"], e["delay_from"], round(e["delay_ms"]), [round(x) for x in e["delay_ms_by_step"]], e["clear"]
    (1, 'outside operators', 471, [471, 527, 465], True)
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
    """Did the machine change speed between a run's uninstrumented and profiled steps? If so,
    a step time compared with another run's carries that change.

    ``wall``: :func:`kitlib.readers.ranks.wall_step_times`; ``budget``: :func:`step_budget` of the
    same run. Returns, index ``rank``: ``uninstrumented_ms``, ``profiled_ms`` (medians),
    ``change`` (profiled / uninstrumented − 1), ``drifted`` (``|change| > tolerance``).

    Raises KitError without uninstrumented step times.

    Examples
    --------
    >>> from kitlib.readers.ranks import load_traces, wall_step_times
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
    """One sentence for a lesson, said before the straggler is blamed: whether :func:`machine_drift` saw drift.

    Examples
    --------
    >>> drift = pd.DataFrame({"uninstrumented_ms": [1000.0], "profiled_ms": [1300.0], "change": [0.3],
    ...                       "drifted": [True]}, index=pd.Index([0], name="rank"))
    >>> drift_note(drift)
    'the machine drifted: rank 0 stepped in 1,000 ms without the profiler and 1,300 ms with it (+30 %), ...'
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
