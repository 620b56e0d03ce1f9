"""Lesson 00's questions."""
from __future__ import annotations

import pandas as pd

from . import Exercises, Question


def questions(capture) -> Exercises:
    """Questions of lesson 00 (what are we profiling, and on what?), from ``capture``.

    Parameters
    ----------
    capture : kitlib.readers.bundle.Capture
        A torch.profiler capture of the workload (live or recorded).
    """
    from ...analyses.steps import PHASES, step_measures
    from ...units import in_units
    tr = capture.trace
    st = in_units(step_measures(tr), "ms")
    batch = capture.workload.get("batch_size")
    phase_cols = [f"{ph}_ms" for ph in PHASES if f"{ph}_ms" in st.columns]
    second = st.iloc[min(1, len(st) - 1)]
    longest = max(phase_cols, key=lambda c: (float(second[c]) if pd.notna(second[c]) else -1.0))[:-3]
    qs = [
        Question("images_per_step", "How many images does one training step process?", int(batch),
                 f"the batch size in the capture's manifest is {batch}: each step's data_load returns "
                 f"one batch of {batch} images."),
        Question("steps_recorded", "How many training steps did the profiler record (active steps)?", len(st),
                 f"the trace holds {len(st)} step annotations ({', '.join(tr.steps['name']) or 'none'}); "
                 "the schedule's wait and warm-up steps run but are not recorded."),
        Question("longest_phase", f"In step {int(second['step'])}, which labelled phase took the longest on the "
                                   "host (data_load, h2d, forward, backward or optimizer)?", longest,
                 "read it off the step table: " + ", ".join(f"{c[:-3]} {second[c]:.3f} ms" for c in phase_cols
                                                             if pd.notna(second[c])) + ".",
                 choices=[c[:-3] for c in phase_cols]),
        Question("gpu_events_per_step", f"How many GPU events (kernels, copies, sets) did step "
                                        f"{int(second['step'])} launch?", int(second["gpu_launched"]),
                 f"the step table's gpu_launched column: {int(second['gpu_launched'])} events whose launch lies "
                 "inside the step's host interval.", tolerance=0),
    ]
    return Exercises("Lesson 00 — your turn", qs)
