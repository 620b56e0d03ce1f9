"""Lesson 12's recordings: two-rank runs of the workload, live or replayed.

Replay reads the kit's own two-rank CPU recordings (``data/reference/ranks_balanced``
and ``ranks_straggler``: ``torchrun``, DDP, Gloo; see ``data/reference/PROVENANCE.md``)
and the two public NCCL ranks in ``data/reference/public-traces`` (see ``SOURCES.md`` there).
Live (a CUDA GPU present) records the same two runs afresh with ``torchrun``:
NCCL with one GPU per rank when the machine has two or more GPUs, else Gloo on the
CPU — NCCL binds each rank's communicator to one device and refuses two ranks on
the same GPU.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..capture.distributed import STRAGGLER_MS, torchrun_plan
from ..capture.distributed import torchrun_command as _torchrun_command
from ..errors import KitError
from ..readers.bundle import reference_dir
from ..readers.ranks import RankTraces, load_traces
from . import mode, replay_capture

#: The reference recordings lesson 12 replays, by role.
REFERENCES = {"balanced": "ranks_balanced", "straggler": "ranks_straggler"}
def public_nccl_dir() -> Path:
    """``data/reference/public-traces``: the two public NCCL ranks (HTA's sampled A100 run)."""
    return reference_dir() / "public-traces"   # no manifest: not listed as a recording


def live_plan() -> dict:
    """What a live recording would run on this machine
    (:func:`kitlib.capture.distributed.torchrun_plan`; in replay mode without importing
    torch, which takes a second or more)."""
    return torchrun_plan(import_torch=mode() == "live")


def torchrun_command(out_dir, straggler: bool, plan: dict | None = None) -> list:
    """The ``torchrun`` command line of one live recording
    (:func:`kitlib.capture.distributed.torchrun_command`), planned by :func:`live_plan`
    unless ``plan`` is given (so replay does not import torch to print it)."""
    return _torchrun_command(out_dir, straggler, plan or live_plan())


def record_live(out_root=None, timeout_s: float = 900, free_bytes: int | None = None) -> dict:
    """Record the balanced and the straggler run with ``torchrun`` (live mode).

    NCCL ranks on GPUs (:func:`live_plan`) first pass the memory check of every live
    path (:func:`kitlib.course.live_memory_plan`: the reference batch, 128 per rank at
    224 px, against the least free memory of the GPUs the ranks use): with too little,
    every rank runs a smaller batch (``--batch-size``, with a warning); when not even
    :data:`kitlib.course.MIN_LIVE_BATCH` fits, the two ranks run with Gloo on the CPU
    instead (with a warning). Gloo ranks on the CPU need no check.

    Parameters
    ----------
    out_root : path, optional
        Where the two bundle folders go (default ``runs/``).
    timeout_s : float
        Limit of each ``torchrun``.
    free_bytes : int, optional
        Free GPU memory to plan for (default: the least free of the ranks' GPUs).

    Returns
    -------
    dict
        ``{"balanced": folder, "straggler": folder}`` (bundle folders).

    Raises
    ------
    KitError
        A ``torchrun`` run failed (its last output lines are in the message).
    """
    import warnings

    from ..capture.distributed import run_torchrun
    from ..capture.gpu_memory import free_gpu_bytes, live_memory_plan
    from ..capture.recipes import runs_dir
    from . import unique_run_dir
    root = Path(out_root) if out_root else runs_dir()
    plan, batch = live_plan(), None
    if plan["device"] == "cuda":
        free = free_bytes if free_bytes is not None else free_gpu_bytes(range(plan["nproc"]))
        mem = live_memory_plan(free_bytes=free)        # the GPU defaults torchrun_command runs: 128, 224 px
        if mem["batch_size"] is None:
            warnings.warn(f"{mem['message']} Recording the two ranks with Gloo on the CPU instead.", stacklevel=2)
            plan = {**plan, "nproc": 2, "device": "cpu", "backend": "gloo",
                    "why": "too little free GPU memory for NCCL ranks: two ranks on the CPU with Gloo"}
        elif mem["batch_size"] != 128:
            warnings.warn(mem["message"], stacklevel=2)
            batch = mem["batch_size"]
    # unique names (time + random), not created: the profile command claims its folder itself
    return {role: run_torchrun(unique_run_dir(root, f"lesson_ranks_{role}", create=False), role == "straggler",
                               timeout_s=timeout_s, plan=plan, batch_size=batch)
            for role in REFERENCES}


def recordings(live: bool | None = None) -> dict:
    """Lesson 12's runs, read with :func:`kitlib.load_traces`.

    Parameters
    ----------
    live : bool, optional
        Force a mode; by default :func:`kitlib.course.mode` decides.

    Returns
    -------
    dict
        ``balanced`` and ``straggler`` (:class:`RankTraces` of the kit's two-rank runs:
        the references in replay, or fresh ``torchrun`` recordings live), ``nccl``
        (the public NCCL pair) and ``origin`` (``"recorded"`` or ``"live"``).
    """
    live = (mode() == "live") if live is None else live
    if live:
        folders = record_live()
        origin = "live"
    else:
        folders = {role: replay_capture(name).path for role, name in REFERENCES.items()}
        origin = "recorded"
    out: dict = {role: load_traces(p) for role, p in folders.items()}
    out["nccl"] = load_traces(public_nccl_dir(), partial=True)   # ranks 0 and 1 of 128
    out["origin"] = origin
    return out


def injected_delay(traces: RankTraces) -> dict | None:
    """The delay a kit recording injected (``{"rank", "ms", "how"}`` from its manifest's
    workload), or ``None`` (none, or not a kit bundle)."""
    if traces.source is None:
        return None
    from ..readers.bundle import open_capture
    try:
        return open_capture(traces.source).workload.get("straggler")
    except KitError:
        return None


def straggler_delay(traces: RankTraces) -> dict:
    """The delay the lesson reads its straggler run against: :func:`injected_delay`,
    or, for a recording made without one (your own ``torchrun`` run, say),
    ``{"rank": <the rank the others waited for longest>, "ms": 0.0, "how": "none injected"}``
    (the rank from :func:`kitlib.analyses.collectives.straggler_summary`)."""
    got = injected_delay(traces)
    if got:
        return got
    from ..analyses.collectives import straggler_summary
    return {"rank": straggler_summary(traces)["rank"], "ms": 0.0, "how": "none injected"}


def clock_shifted(traces: RankTraces, rank: int, ms: float) -> RankTraces:
    """A copy of ``traces`` in which ``rank``'s clock reads ``ms`` later than it did (its
    ``base_time_ns`` moved): what two hosts whose clocks differ would record. Nothing else
    changes; the files are not touched.
    """
    import dataclasses
    if rank not in traces.traces:
        raise KitError(f"no rank {rank} in ranks {traces.ranks}")
    t = traces.traces[rank]
    meta = {**t.meta, "base_time_ns": int(t.meta.get("base_time_ns") or 0) + round(ms * 1e6)}
    return dataclasses.replace(traces, traces={**traces.traces, rank: dataclasses.replace(t, meta=meta)}, _cache={})


def uninstrumented_step_ms(traces: RankTraces) -> float | None:
    """The median of the steps the kit timed *without* the profiler before recording
    (``step_ms_uninstrumented`` in each rank's ``step_times.json`` beside its trace), over
    all ranks, ms; ``None`` where no rank has that file (loose traces, the public pair).

    Raises
    ------
    KitError
        A ``step_times.json`` that is not the kit's (the message names it).
    """
    import json
    vals = []
    for path in traces.info["path"]:
        f = Path(path).parent / "step_times.json"
        if f.is_file():
            try:
                vals += [float(v) for v in json.loads(f.read_text()).get("step_ms_uninstrumented") or []]
            except (ValueError, AttributeError, TypeError) as e:
                raise KitError(f"{f}: not the kit's step_times.json ({e})") from None
    return float(pd.Series(vals).median()) if vals else None


def uninstrumented_compared(a: RankTraces, b: RankTraces, names=("balanced", "straggler")) -> str:
    """One line: each run's uninstrumented step (:func:`uninstrumented_step_ms`) and their
    difference, or why there is none to compare (a run recorded with ``--timing-steps 0``,
    or loose traces).
    """
    ua, ub = uninstrumented_step_ms(a), uninstrumented_step_ms(b)
    if ua is None or ub is None:
        missing = " and ".join(n for n, u in zip(names, (ua, ub)) if u is None)
        return (f"no steps timed without the profiler in the {missing} run (recorded with --timing-steps 0, or "
                "loose traces): how much the machine itself moved cannot be told here")
    return (f"timed without the profiler (the sleep included): {names[0]} {ua:,.0f} ms, {names[1]} {ub:,.0f} ms "
            f"per step ({ub - ua:+,.0f} ms)")


def _drift_within(rt: RankTraces) -> str | None:
    """:func:`~kitlib.analyses.stragglers.drift_note` of one run (its profiled steps
    against its own uninstrumented ones), or None where that cannot be told (no
    uninstrumented step times, or collectives on the GPU)."""
    from ..analyses.stragglers import drift_note, machine_drift, step_budget
    from ..readers.ranks import wall_step_times
    try:
        return drift_note(machine_drift(wall_step_times(rt), step_budget(rt)))
    except KitError:
        return None


def drift_within(rt: RankTraces) -> str:
    """Whether the machine drifted during one run, said before the straggler is blamed:
    :func:`~kitlib.analyses.stragglers.drift_note` of its profiled steps against its own
    uninstrumented ones, or why that cannot be told (a run recorded with
    ``--timing-steps 0``, loose traces, or collectives on the GPU).
    """
    return _drift_within(rt) or ("no steps timed without the profiler in this run (recorded with --timing-steps 0, "
                                 "loose traces, or an NCCL run): whether the machine drifted cannot be told here")


def runs_compared(a: RankTraces, b: RankTraces, names=("balanced", "straggler")) -> str:
    """One sentence on whether two runs can be compared as they stand: where and when each
    was recorded (``info["host"]`` from the kit's manifests, ``first_ns`` from the
    traces) and, where the kit timed them, each run's uninstrumented step
    (:func:`uninstrumented_step_ms`) and whether the machine drifted *within* each run
    (:func:`kitlib.analyses.stragglers.machine_drift`: its profiled steps against its
    own uninstrumented ones, :func:`~kitlib.analyses.stragglers.drift_note`). The same
    host on the same day is not the same conditions: on a shared machine the load
    changes between runs and within one, so a difference between the runs is not only
    the straggler's until their uninstrumented steps say how much the machine itself
    moved. ``names`` name the two runs in the drift part.
    """
    def where(rt):
        hosts = sorted({str(h) for h in rt.info["host"] if h is not None and not pd.isna(h)})
        day = pd.to_datetime(int(rt.info["first_ns"].min()), utc=True).strftime("%Y-%m-%d")
        return hosts, day
    (ha, da), (hb, db) = where(a), where(b)
    ua, ub = uninstrumented_step_ms(a), uninstrumented_step_ms(b)
    timed = (f"; uninstrumented steps (median over ranks, step_times.json) {ua:,.0f} ms and {ub:,.0f} ms"
             if ua is not None and ub is not None else "; no uninstrumented step times to compare")
    drift = [(n, _drift_within(rt)) for n, rt, u in zip(names, (a, b), (ua, ub)) if u is not None]
    if any(note for _, note in drift):
        timed += "; within each run, " + "; ".join(f"{n}: {note}" for n, note in drift if note)
    if ha and ha == hb and da == db:
        return (f"both runs recorded on {', '.join(ha)} on {da}: the same machine and day, not the same conditions "
                f"(a shared host's load changes between runs and within one){timed}")
    return (f"recorded apart ({', '.join(ha) or 'host unknown'} on {da}; {', '.join(hb) or 'host unknown'} on {db}): "
            f"a difference between the two runs may be the machines' or the day's, not only the straggler's{timed}")


__all__ = ["REFERENCES", "STRAGGLER_MS", "public_nccl_dir", "live_plan", "torchrun_command", "record_live",
           "recordings", "injected_delay", "straggler_delay", "clock_shifted", "uninstrumented_step_ms", "uninstrumented_compared", "drift_within", "runs_compared"]
