"""Lesson 10's raw views of repeated step times: how the reference numbers were made,
where each timed step sat in the loader's epoch, and what a handful of steps can say.

The H200 reference series (``profiler_5step/step_times.json``) were timed by
``data/reference/how_captured/capture.py``: one iterator over one DataLoader feeds, in
this order, 3 warm-up steps, the 10 uninstrumented timed steps, one batch taken for the
fixed-batch timing, and the 7 steps of the profiled loop (``schedule(wait=1, warmup=1,
active=5)``). Each step is timed as ``t = stamp(); step(...); sync(); times.append(...)``;
in the profiled loop ``p.step()`` comes after the clock has stopped, so the profiler's own
start-up and trace export are outside every timed interval. The DataLoader has
``persistent_workers=False``: each new epoch (14 batches of 128 of 1,792 images) forks its
workers again.

Lesson 12's two-rank CPU runs are a before/after pair of a fix: in ``ranks_straggler``
rank 1 sleeps 500 ms at the start of every step, ``ranks_balanced`` is the same job
without it (:func:`fix_pair`).

Sources: the capture script itself; ``data/reference/PROVENANCE.md``; SciPy's
``mannwhitneyu`` (its exact two-sided p-value for small samples); PyTorch docs,
``torch.utils.data.DataLoader`` (``persistent_workers``).
"""
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
#: Batches it draws between the uninstrumented loop and the profiled loop (``x, y = next(it)`` for
#: the fixed-batch timing, which then reuses that one batch).
FIXED_BATCHES = 1


def capture_script() -> Path:
    """``data/reference/how_captured/capture.py``: the script that recorded the H200 references."""
    return reference_dir() / "how_captured" / "capture.py"


def timed_loops(path=None) -> str:
    """The lines of the capture script that time steps, numbered as in the file (a line too
    long for a notebook's output continues on the next, indented, unnumbered).

    From the comment ``# --- D: uninstrumented timing`` to the profiled loop's
    ``p.step()``: the warm-up steps, the uninstrumented loop, the fixed batch and its
    loop, and the profiled loop with its schedule.

    Parameters
    ----------
    path : path, optional
        The script (default :func:`capture_script`).

    Raises
    ------
    KitError
        The file is missing or no longer holds those two markers.
    """
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
    # a line too long for a notebook's output (105 characters at a laptop's width: code is only
    # broken past that, not at the kit's 95 for prose) goes on under its code, unnumbered (issue 40)
    from ..units import wrapped
    return "\n".join(f"{i + 1:4d}  " + wrapped(lines[i], 105 - 6).replace("\n", "\n" + " " * 6)
                     for i in range(start, end + 1))


def batches_before_profiled(series: dict) -> int:
    """Batches the loader had handed out before the profiled loop's first step.

    ``WARMUP_BATCHES + len(series["step_ms_uninstrumented"]) + FIXED_BATCHES``
    (14 for the reference: 3 + 10 + 1).

    Raises
    ------
    KitError
        ``series`` has no ``step_ms_uninstrumented``.
    """
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
    """The uninstrumented and the profiled series side by side, by batch of their epoch.

    Parameters
    ----------
    capture : kitlib.readers.bundle.Capture
        The reference ``profiler_5step`` bundle (its manifest gives the loader's
        ``num_workers``, the epoch length and the profiler's schedule).
    series : dict, optional
        Its ``step_times.json`` (default: the bundle's own), with
        ``step_ms_uninstrumented`` and ``step_ms_profiled_all_attribution``.

    Returns
    -------
    DataFrame indexed by ``batch_in_epoch`` (every batch either series timed)
        ``round`` (``batch_in_epoch // num_workers``: 0 = built while the workers
        started), ``loader_warmup`` (the rule of
        :func:`kitlib.analyses.dataloader.batch_positions`), ``uninstrumented_ms`` and
        its ``uninstrumented_epoch``, ``profiler_step`` (``wait``/``warmup``/``active``)
        and ``profiled_ms`` with its ``profiled_epoch``; NaN/``""`` where a series did
        not time that batch.

    Raises
    ------
    KitError
        A series is missing, or one series spans two epochs (two steps would share a row).
    """
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
    """The smallest two-sided p-value the Mann-Whitney U test can give with these sizes.

    The exact test ranks all ``n_before + n_after`` values together; under "no
    difference" each of the ``C(n_before + n_after, n_before)`` ways of choosing which
    ranks belong to ``before`` is equally likely. The most extreme outcome (every
    ``after`` value above every ``before`` value, or every one below) is 2 of them.
    """
    if n_before < 1 or n_after < 1:
        raise KitError(f"min_p_value needs at least one value a side, not {n_before} and {n_after}")
    return 2 / comb(n_before + n_after, n_before)


def fix_pair(rank: int = 0, before: str = "ranks_straggler", after: str = "ranks_balanced") -> dict:
    """A before/after pair of a fix: one rank's active profiled step times in two runs.

    Both runs timed every step of the profiler's ``light`` recipe (no attribution, the
    same instrument on both sides); the schedule's last ``active`` steps are kept.

    Parameters
    ----------
    rank : int
    before, after : str
        Recordings, opened with :func:`kitlib.readers.bundle.open_capture` (default: the
        straggler run, and the same job without the straggler's sleep).

    Returns
    -------
    dict
        ``before``, ``after`` (lists of ms), ``before_file``, ``after_file`` (paths of the
        ``step_times.json`` read), ``before_raw``, ``after_raw`` (their text, as
        recorded), ``schedule`` (the recipe's), ``removed_ms`` (the straggler's sleep, from
        the ``before`` manifest; 0 when none).

    Raises
    ------
    KitError
        A folder, a rank or a ``step_ms_profiled`` series is missing.
    """
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
