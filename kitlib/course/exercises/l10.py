"""Lesson 10's questions (did my change make it faster?)."""
from __future__ import annotations

from . import Exercises, Question


def _verdict_norm(s):
    s = str(s).strip().lower()
    return "no difference beyond the noise" if s.startswith("no") or "noise" in s else s


def questions(capture, series: dict | None = None, trace_capture=None, num_workers: int | None = None,
              batches_per_epoch: int | None = None) -> Exercises:
    """Questions of lesson 10, from a bundle's ``step_times.json`` (or ``series``).

    Parameters
    ----------
    capture : kitlib.readers.bundle.Capture
        A bundle with ``step_times.json`` (``profiler_5step`` in replay).
    series : dict, optional
        Step times in ms per series (e.g. live from
        :func:`kitlib.capture.experiments.overhead_series`); replaces the bundle's.
    trace_capture : Capture, optional
        A torch.profiler capture with full attribution (``profiler_5step``): adds the
        question on the GPU's idle share of a profiled step.
    num_workers, batches_per_epoch : int, optional
        The loader's settings, for the warm-up/steady split of the uninstrumented
        series (:func:`kitlib.analyses.dataloader.split_warmup`; 3 batches precede it);
        by default from ``capture``'s manifest.
    """
    from ...analyses.compare import compare, settings_present
    from ...analyses.coldstart import loader_epoch_length
    from ...analyses.dataloader import split_warmup
    from ...analyses.steps import active_step_times, step_measures
    if series is None and capture is None and trace_capture is not None:
        capture = trace_capture   # e.g. after a kernel restart in live mode: the profiled capture's own times
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
                   tolerance=0.01, traps=[(round(sum(base) / len(base), 2), "that is the mean, pulled up by one slow "
                                           "step; the question asks for the median.")])]
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
    if full_key and (capture is not None or (num_workers and batches_per_epoch)):
        w = num_workers or int(capture.workload.get("num_workers", 0) or 0)
        per = batches_per_epoch or loader_epoch_length(capture)
        if w > 0:
            steady = split_warmup(base, 3, per, w)["steady"]
            if len(steady) >= 2:
                c = compare(steady, st[full_key])
                qs.append(Question("steady_verdict", "Predict before running the comparison: against the "
                                                     "uninstrumented steps *after* the loader's warm-up only, are "
                                                     "the active profiled steps 'slower', 'faster' or 'no "
                                                     "difference beyond the noise'?", c.verdict,
                                   c.text + " The baseline decides the verdict: the whole series mixes in the "
                                            "loader's warm-up, whose spread hides the profiler's cost.",
                                   normalise=_verdict_norm, choices=["slower", "faster",
                                                                     "no difference beyond the noise"]))
    if trace_capture is not None:
        sm = step_measures(trace_capture.trace)
        last = sm.iloc[-1]
        share = float(last["idle_ns"] / last["wall_ns"])
        qs.append(Question("idle_share", f"In the last profiled step of {trace_capture.name} (step "
                                         f"{int(last['step'])}), what fraction of the step's wall time was the GPU "
                                         "idle? (0–1, from the wall and idle columns)", round(share, 3),
                           f"idle {last['idle_ns'] / 1e6:.2f} ms of {last['wall_ns'] / 1e6:.2f} ms = {share:.1%}, "
                           f"with data_load only {last['data_load_ns'] / 1e6:.2f} ms: the GPU waited for the host's "
                           "launches, not for data.", tolerance=0.03,
                           traps=[(round(1 - share, 3), "that is the busy share; the question asks how much of the "
                                                         "step the GPU was idle.")]))
    if "step_ms_fixed_batch" in st:
        c = compare(base, st["step_ms_fixed_batch"])
        qs.append(Question("fixed_batch_verdict", "Is the fixed-batch step (no loader) faster than the "
                                                  "uninstrumented step with the loader, beyond the noise? Answer "
                                                  "'faster', 'slower' or 'no difference beyond the noise'.",
                           c.verdict, c.text + " (Different workloads: this says the loader costs time, not "
                                               "that a change helped.)", normalise=_verdict_norm,
                           choices=["slower", "faster", "no difference beyond the noise"]))
    return Exercises("Lesson 10 — your turn", qs)
