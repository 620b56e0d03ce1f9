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
    capture : kitlib.readers.bundle.Capture
        A bundle with ``step_times.json`` (``profiler_5step`` in replay).
    series : dict, optional
        Step times in ms per series (e.g. live from
        :func:`kitlib.capture.experiments.overhead_series`); replaces the bundle's.
    """
    from ...analyses.compare import compare, settings_present
    from ...analyses.steps import active_step_times
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
