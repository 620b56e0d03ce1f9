"""Lesson 10's raw views of repeated step times: how the reference series were timed, where each
step sat in the loader's epoch, and what a handful of steps can say.

``data/reference/how_captured/capture.py`` drew from one DataLoader iterator 3 warm-up steps,
10 uninstrumented timed steps, one batch for the fixed-batch timing, then 7 profiled steps
(``schedule(wait=1, warmup=1, active=5)``, ``p.step()`` outside the clock); with
``persistent_workers=False`` each epoch (14 batches of 128) forks its workers again.
Lesson 12's ``ranks_straggler`` (rank 1 sleeps 500 ms a step) and ``ranks_balanced`` are a
before/after pair (:func:`fix_pair`). Sources: the capture script, ``data/reference/PROVENANCE.md``."""
from __future__ import annotations

import json
from math import comb
from pathlib import Path

import pandas as pd

from ..errors import KitError
from ..readers.bundle import reference_dir

__all__ = ["WARMUP_BATCHES", "FIXED_BATCHES", "capture_script", "timed_loops", "batches_before_profiled",
           "by_batch", "min_p_value", "fix_pair"]

#: Batches ``capture.py`` draws before its uninstrumented timed loop (``for _ in range(3): step(...)``).
WARMUP_BATCHES = 3
#: Batches it draws between the uninstrumented and the profiled loop (the fixed-batch timing's one).
FIXED_BATCHES = 1


def capture_script() -> Path:
    """``data/reference/how_captured/capture.py``: the script that recorded the H200 references."""
    return reference_dir() / "how_captured" / "capture.py"


def timed_loops(path=None) -> str:
    """The capture script's step-timing lines (from ``# --- D: uninstrumented timing`` to the
    profiled loop's ``p.step()``), numbered as in the file; long lines continue unnumbered.

    Raises KitError: the file is missing or lacks those markers."""
    path = Path(path) if path else capture_script()
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise KitError(f"cannot read the capture script {path}: {e}") from None
    try:
        start = next(i for i, s in enumerate(lines) if "# --- D: uninstrumented timing" in s)
        end = next(i for i, s in enumerate(lines) if i > start and s.strip() == "p.step()")
    except StopIteration:
        raise KitError(f"{path}: no '# --- D: uninstrumented timing' ... 'p.step()' section") from None
    # code breaks past 105 characters (a laptop's output width), not prose's 95 (issue 40)
    from ..units import wrapped
    return "\n".join(f"{i + 1:4d}  " + wrapped(lines[i], 105 - 6).replace("\n", "\n" + " " * 6)
                     for i in range(start, end + 1))


def batches_before_profiled(series: dict) -> int:
    """Batches handed out before the profiled loop: warm-up + uninstrumented + fixed (3 + 10 + 1).

    Raises KitError: ``series`` has no ``step_ms_uninstrumented``."""
    if "step_ms_uninstrumented" not in series:
        raise KitError(f"no step_ms_uninstrumented series (have: {', '.join(series)})")
    return WARMUP_BATCHES + len(series["step_ms_uninstrumented"]) + FIXED_BATCHES


def _schedule_actions(schedule: dict | None, n: int) -> list:
    """``wait``/``warmup``/``active`` for the ``n`` steps of one schedule cycle (``""`` beyond it)."""
    s = schedule or {}
    acts = ["wait"] * int(s.get("wait", 0)) + ["warmup"] * int(s.get("warmup", 0)) + \
        ["active"] * int(s.get("active", 0))
    return (acts + [""] * n)[:n]


def by_batch(capture, series: dict | None = None) -> pd.DataFrame:
    """The uninstrumented and profiled series of ``capture`` (``series``: its step times) side by
    side, indexed by ``batch_in_epoch``: ``round`` (0: built while the workers started),
    ``loader_warmup``, ``uninstrumented_epoch``, ``uninstrumented_ms``, ``profiled_epoch``,
    ``profiler_step`` and ``profiled_ms``; NaN/``""`` where a series did not time that batch.

    Raises KitError: a series is missing, or spans two epochs."""
    from ..analyses.coldstart import loader_epoch_length
    from ..analyses.dataloader import batch_positions
    series = series if series is not None else capture.step_times()
    for key in ("step_ms_uninstrumented", "step_ms_profiled_all_attribution"):
        if key not in series:
            raise KitError(f"by_batch needs {key} (have: {', '.join(series)})")
    per, workers = loader_epoch_length(capture), int(capture.workload["num_workers"])
    base, prof = series["step_ms_uninstrumented"], series["step_ms_profiled_all_attribution"]
    u = batch_positions(WARMUP_BATCHES, len(base), per, workers).assign(uninstrumented_ms=base)
    p = batch_positions(batches_before_profiled(series), len(prof), per, workers).assign(
        profiled_ms=prof, profiler_step=_schedule_actions(capture.recipe.get("schedule"), len(prof)))
    for name, t in (("step_ms_uninstrumented", u), ("step_ms_profiled_all_attribution", p)):
        if t["epoch"].nunique() > 1:
            raise KitError(f"{name} spans epochs {sorted(t['epoch'].unique())}: by_batch puts one epoch per series")
    u = u.set_index("batch_in_epoch")[["round", "loader_warmup", "epoch", "uninstrumented_ms"]].rename(
        columns={"epoch": "uninstrumented_epoch", "round": "round_u", "loader_warmup": "loader_warmup_u"})
    p = p.set_index("batch_in_epoch")[["round", "loader_warmup", "epoch", "profiler_step", "profiled_ms"]].rename(
        columns={"epoch": "profiled_epoch"})
    out = u.join(p, how="outer")
    out["round"] = out["round"].fillna(out.pop("round_u")).astype(int)
    out["loader_warmup"] = out["loader_warmup"].fillna(out.pop("loader_warmup_u")).astype(bool)
    out["profiler_step"] = out["profiler_step"].fillna("")
    cols = ["round", "loader_warmup", "uninstrumented_epoch", "uninstrumented_ms", "profiled_epoch",
            "profiler_step", "profiled_ms"]
    return out[cols].astype({"uninstrumented_epoch": "Int64", "profiled_epoch": "Int64"})


def min_p_value(n_before: int, n_after: int) -> float:
    """The smallest two-sided Mann-Whitney p-value with these sizes: 2 / C(n_before + n_after, n_before)."""
    if n_before < 1 or n_after < 1:
        raise KitError(f"min_p_value needs at least one value a side, not {n_before} and {n_after}")
    return 2 / comb(n_before + n_after, n_before)


def fix_pair(rank: int = 0, before: str = "ranks_straggler", after: str = "ranks_balanced") -> dict:
    """One rank's active profiled step times (ms) in a run and its fix (``light`` recipe on both):
    ``before``, ``after``, their ``*_file`` and ``*_raw`` text, ``schedule`` and ``removed_ms``
    (the straggler's sleep, 0 when none).

    Raises KitError: a folder, rank or ``step_ms_profiled`` series is missing."""
    from ..readers.bundle import open_capture
    out = {}
    for side, name in (("before", before), ("after", after)):
        folder = Path(open_capture(name).path)     # the recording in use (the learner's own, if set)
        path = folder / f"rank{rank}" / "step_times.json"
        try:
            raw = path.read_text()
            manifest = json.loads((folder / "manifest.json").read_text())
        except OSError as e:
            raise KitError(f"fix_pair: cannot read {path} or its manifest: {e}") from None
        times = json.loads(raw)
        if "step_ms_profiled" not in times:
            raise KitError(f"fix_pair: {path} has no step_ms_profiled (have: {', '.join(times)})")
        schedule = manifest.get("recipe", {}).get("schedule") or {}
        skip = int(schedule.get("wait", 0)) + int(schedule.get("warmup", 0))
        out[side] = list(times["step_ms_profiled"])[skip:]
        out[f"{side}_file"], out[f"{side}_raw"] = path, raw
        out["schedule"] = schedule
        if side == "before":
            out["removed_ms"] = float(manifest.get("workload", {}).get("straggler_ms") or 0)
    return out
