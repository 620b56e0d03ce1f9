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
    from ...analyses.host_calls import cuda_api_time_in_label
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
    try:
        api = cuda_api_time_in_label(tr, "forward")
    except Exception:   # a capture without the workload's labels
        api = None
    if api is not None and len(api):
        share = api["cuda_api_ns"].sum() / api["label_ns"].sum()
        qs.append(Question("forward_mostly_api", "Predict before the table that answers it: is most of the host's "
                                                 "time inside the forward label spent in CUDA API calls (launches, "
                                                 "memsets, attribute queries)? (yes/no)", bool(share > 0.5),
                           f"{'yes' if share > 0.5 else 'no'}: over the recorded steps, "
                           f"{api['cuda_api_ns'].sum() / 1e6:,.2f} ms of {api['label_ns'].sum() / 1e6:,.2f} ms "
                           f"({share:.0%}) is inside CUDA API calls; the rest is Python, PyTorch's dispatcher and "
                           "operators' host code, and the profiler's own recording."))
    return Exercises("Lesson 00 — your turn", qs)
