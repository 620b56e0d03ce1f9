"""Lesson 09's questions (did my change make it faster?)."""
from __future__ import annotations

from . import Exercises, Question


def _verdict_norm(s):
    s = str(s).strip().lower()
    return "no difference beyond the noise" if s.startswith("no") or "noise" in s else s


def questions(capture, series: dict | None = None) -> Exercises:
    """Questions of lesson 09, from a bundle's ``step_times.json`` (or ``series``).

    Parameters
    ----------
    capture : kitlib.bundle.Capture
        A bundle with ``step_times.json`` (``profiler_5step`` in replay).
    series : dict, optional
        Step times in ms per series (e.g. live from
        :func:`kitlib.measure.overhead_series`); replaces the bundle's.
    """
    from ..measure import compare, settings_present
    st = series if series is not None else capture.step_times()
    st = active_step_times(capture, st) if capture is not None else st   # profiled: active steps only
    present = settings_present(st)
    four = present.iloc[:4]
    base = st["step_ms_uninstrumented"]
    qs = [Question("settings_recorded", "Of the four settings (uninstrumented, NVTX only, profiler without "
                                        "attribution, full attribution), how many have step times here?",
                   int(four["present"].sum()),
                   "present: " + ", ".join(f"{s} ({r.series}, n={r.n})" for s, r in four.iterrows() if r.present)
                   + "; absent: " + (", ".join(s for s, r in four.iterrows() if not r.present) or "none")
                   + ". A claim about an absent setting cannot be checked against this recording.", tolerance=0),
          Question("median_uninstrumented_ms", "Median uninstrumented step time, in ms?",
                   round(float(present.loc["uninstrumented", "median_ms"]), 2),
                   f"median of {len(base)} steps = {present.loc['uninstrumented', 'median_ms']:,.2f} ms; the mean "
                   f"({sum(base) / len(base):,.2f} ms) is pulled up by the slowest step ({max(base):,.2f} ms).",
                   tolerance=0.01)]
    full_key = present.loc["torch.profiler, shapes+memory+stacks+FLOPs", "series"]
    if full_key:
        full = st[full_key]
        c = compare(base, full)
        qs.append(Question("full_attribution_verdict", "Are the active steps under full attribution slower "
                                                       "than the uninstrumented steps, beyond the noise? Answer "
                                                       "'slower', "
                                                       "'faster' or 'no difference beyond the noise'.",
                           c.verdict, c.text, normalise=_verdict_norm,
                           choices=["slower", "faster", "no difference beyond the noise"]))
    if "step_ms_fixed_batch" in st:
        c = compare(base, st["step_ms_fixed_batch"])
        qs.append(Question("fixed_batch_verdict", "Is the fixed-batch step (no loader) faster than the "
                                                  "uninstrumented step with the loader, beyond the noise? Answer "
                                                  "'faster', 'slower' or 'no difference beyond the noise'.",
                           c.verdict, c.text + " (Different workloads: this says the loader costs time, not "
                                               "that a change helped.)", normalise=_verdict_norm,
                           choices=["slower", "faster", "no difference beyond the noise"]))
    return Exercises("Lesson 09 — your turn", qs)


def active_step_times(capture, series: dict | None = None) -> dict:
    """Step times with the profiled series cut to the profiler schedule's active steps.

    The reference recording timed every step under ``torch.profiler`` with
    ``schedule(wait=1, warmup=1, active=5)``: ``step_ms_profiled_all_attribution``
    holds 7 values, the first two being the ``wait`` and ``warmup`` steps (the
    ``wait`` step also began a new loader epoch). Only the active steps recorded
    with full attribution; comparing them with the uninstrumented steps is the
    like-for-like comparison.

    Parameters
    ----------
    capture : kitlib.bundle.Capture or None
        The bundle whose manifest gives ``recipe.schedule`` (``wait``, ``warmup``,
        ``active``). ``None`` (live series from :func:`kitlib.measure.overhead_series`,
        already active-only) leaves the series unchanged.
    series : dict, optional
        Step times in ms per series; default ``capture.step_times()``.

    Returns
    -------
    dict of str -> list of float
        The same keys; profiled series (``step_ms_profiled*``) keep only their last
        ``active`` values when they hold ``wait + warmup + active`` values.

    Raises
    ------
    KitError
        Neither ``capture`` nor ``series`` given.

    Source: the recording script ``data/reference/how_captured/capture.py`` (timed loop
    around ``prof.step()``) and the bundle manifest's ``recipe.schedule``.
    """
    from ..errors import KitError
    if series is None:
        if capture is None:
            raise KitError("active_step_times: need a capture or a series")
        series = capture.step_times()
    sched = (capture.recipe or {}).get("schedule") if capture is not None else None
    out = {k: list(v) for k, v in series.items()}
    if not sched:
        return out
    skip, active = int(sched.get("wait", 0)) + int(sched.get("warmup", 0)), int(sched.get("active", 0))
    for k, v in out.items():
        if k.startswith("step_ms_profile") and len(v) == skip + active:
            out[k] = v[skip:]
    return out


def slowest_step_position(series_ms, first_batch: int, batches_per_epoch: int) -> dict:
    """Where in the loader's epochs the slowest step of a series fell.

    Parameters
    ----------
    series_ms : sequence of float
        Step wall times in ms, in order.
    first_batch, batches_per_epoch : int
        As in :func:`kitlib.coldstart.epoch_positions` (reference uninstrumented
        series: 3 warm-up batches before it, 14 batches per epoch).

    Returns
    -------
    dict
        ``step_index``, ``step_ms``, ``median_ms``, ``epoch``, ``batch_in_epoch``,
        ``epoch_start`` (bool: whether its ``next()`` began a new epoch, i.e. a
        worker restart with ``persistent_workers=False``).
    """
    import numpy as np
    from ..coldstart import epoch_positions
    v = np.asarray(list(series_ms), dtype=float)
    pos = epoch_positions(first_batch, len(v), batches_per_epoch)
    i = int(v.argmax())
    r = pos.iloc[i]
    return {"step_index": i, "step_ms": float(v[i]), "median_ms": float(np.median(v)), "epoch": int(r["epoch"]),
            "batch_in_epoch": int(r["batch_in_epoch"]), "epoch_start": bool(r["epoch_start"])}
