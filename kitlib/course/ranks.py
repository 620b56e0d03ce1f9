"""Lesson 12's recordings: two-rank runs of the workload, replayed (the kit's CPU runs
``ranks_balanced``, ``ranks_straggler`` and the public NCCL pair) or recorded live with
``torchrun`` (NCCL with one GPU per rank on two GPUs or more, else Gloo on the CPU)."""
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
    """What a live recording would run here (:func:`kitlib.capture.distributed.torchrun_plan`)."""
    return torchrun_plan(import_torch=mode() == "live")


def torchrun_command(out_dir, straggler: bool, plan: dict | None = None) -> list:
    """The ``torchrun`` command line of one live recording, planned by :func:`live_plan` unless given."""
    return _torchrun_command(out_dir, straggler, plan or live_plan())


def record_live(out_root=None, timeout_s: float = 900, free_bytes: int | None = None) -> dict:
    """Record the balanced and straggler runs with ``torchrun``; returns ``{role: bundle folder}``.

    NCCL ranks first pass the memory check (``free_bytes``, default the least free of their
    GPUs): a smaller batch, or Gloo on the CPU below :data:`kitlib.course.MIN_LIVE_BATCH`, with a warning.

    Raises KitError: a ``torchrun`` run failed (its last output lines in the message)."""
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
    """Lesson 12's runs: ``balanced`` and ``straggler`` (RankTraces, recorded or live), ``nccl``
    (the public pair) and ``origin`` (``"recorded"`` or ``"live"``); ``live`` default :func:`mode`."""
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
    """The delay a kit recording injected (``{"rank", "ms", "how"}``), or None."""
    if traces.source is None:
        return None
    from ..readers.bundle import open_capture
    try:
        return open_capture(traces.source).workload.get("straggler")
    except KitError:
        return None


def injected_text(traces: RankTraces) -> str:
    """The delay a kit recording injected as lesson 12 prints it before ``straggler_part`` is
    predicted: its rank and ms per step (``"rank 1, 500 ms per step"``), not how it was made
    (``time.sleep`` is no operator: that is the prediction); ``"none recorded"`` without one."""
    got = injected_delay(traces)
    return f"rank {got['rank']}, {got['ms']:,g} ms per step" if got else "none recorded"


def straggler_delay(traces: RankTraces) -> dict:
    """:func:`injected_delay`, or ``{"rank": <the rank waited for longest>, "ms": 0.0, "how": "none injected"}``."""
    got = injected_delay(traces)
    if got:
        return got
    from ..analyses.collectives import straggler_summary
    return {"rank": straggler_summary(traces)["rank"], "ms": 0.0, "how": "none injected"}


def clock_shifted(traces: RankTraces, rank: int, ms: float) -> RankTraces:
    """A copy of ``traces`` whose ``rank``'s clock reads ``ms`` later (its ``base_time_ns`` moved)."""
    import dataclasses
    if rank not in traces.traces:
        raise KitError(f"no rank {rank} in ranks {traces.ranks}")
    t = traces.traces[rank]
    meta = {**t.meta, "base_time_ns": int(t.meta.get("base_time_ns") or 0) + round(ms * 1e6)}
    return dataclasses.replace(traces, traces={**traces.traces, rank: dataclasses.replace(t, meta=meta)}, _cache={})


def uninstrumented_step_ms(traces: RankTraces) -> float | None:
    """Median over all ranks of ``step_ms_uninstrumented`` (ms), None where no rank has it.

    Raises KitError: a ``step_times.json`` that is not the kit's."""
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
    """One line: each run's uninstrumented step and their difference, or why there is none."""
    ua, ub = uninstrumented_step_ms(a), uninstrumented_step_ms(b)
    if ua is None or ub is None:
        missing = " and ".join(n for n, u in zip(names, (ua, ub)) if u is None)
        return (f"no steps timed without the profiler in the {missing} run (recorded with --timing-steps 0, or "
                "loose traces): how much the machine itself moved cannot be told here")
    return (f"timed without the profiler (the sleep included): {names[0]} {ua:,.0f} ms, {names[1]} {ub:,.0f} ms "
            f"per step ({ub - ua:+,.0f} ms)")


def _drift_within(rt: RankTraces) -> str | None:
    """The drift note of one run (profiled against uninstrumented steps), or None."""
    from ..analyses.stragglers import drift_note, machine_drift, step_budget
    from ..readers.ranks import wall_step_times
    try:
        return drift_note(machine_drift(wall_step_times(rt), step_budget(rt)))
    except KitError:
        return None


def drift_within(rt: RankTraces) -> str:
    """Whether the machine drifted during one run, or why that cannot be told."""
    return _drift_within(rt) or ("no steps timed without the profiler in this run (recorded with --timing-steps 0, "
                                 "loose traces, or an NCCL run): whether the machine drifted cannot be told here")


def runs_compared(a: RankTraces, b: RankTraces, names=("balanced", "straggler")) -> str:
    """One sentence on whether two runs can be compared: where and when each was recorded, their
    uninstrumented steps and the drift within each (the same host and day is not the same load)."""
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
