"""Lesson 00's questions."""
from __future__ import annotations

import pandas as pd

from . import Exercises, Question


def questions(capture, cold=None) -> Exercises:
    """Questions of lesson 00 (what are we profiling, and on what?), from ``capture``; ``cold``: the
    transfer question's eight steps from a fresh DataLoader (default ``cold_start_8step``)."""
    from ...analyses.host_calls import cuda_api_time_in_label
    from ...analyses.steps import PHASES, step_measures
    from ...units import in_units
    tr = capture.trace
    st = in_units(step_measures(tr), "ms")
    phase_cols = [f"{ph}_ms" for ph in PHASES if f"{ph}_ms" in st.columns]
    at = min(1, len(st) - 1)
    second = st.iloc[at]
    step = int(second["step"])
    longest = max(phase_cols, key=lambda c: (float(second[c]) if pd.notna(second[c]) else -1.0))[:-3]
    qs = []
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
                           "operators' host code, and the profiler's own recording.", kind="predict",
                           where="the cuda_api_share column of the table of forward's host time"))
    qs.append(Question("longest_phase", f"In step {step}, which labelled phase took the longest on the host "
                                        "(data_load, h2d, forward, backward or optimizer)?", longest,
                       "read it off the step table: " + ", ".join(f"{c[:-3]} {second[c]:.3f} ms" for c in phase_cols
                                                                   if pd.notna(second[c])) + ".",
                       choices=[c[:-3] for c in phase_cols], kind="compute",
                       where=f"the step table, row step {step}, the five phase columns (_ms)"))
    if "device_busy_ms" in st.columns and pd.notna(second["device_busy_ms"]):
        idle = lambda r: round(float(r["wall_ms"] - r["device_busy_ms"]), 3)   # noqa: E731
        traps = [(idle(st.iloc[i]), f"that is step {int(st.iloc[i]['step'])}'s row; the question asks about "
                                    f"step {step}.") for i in (at - 1, at + 1) if 0 <= i < len(st)]
        traps.append((round(float(second["device_busy_ms"]), 3), "that is the time the GPU was busy; idle is "
                                                                 "the rest of the step: wall − busy."))
        qs.append(Question("gpu_idle_ms", f"For how many ms of step {step}'s wall time did the GPU run nothing at "
                                          "all?", idle(second),
                           f"wall_ms − device_busy_ms = {second['wall_ms']:.3f} − {second['device_busy_ms']:.3f} = "
                           f"{idle(second):.3f} ms: inside the step's host interval, no kernel, copy or set was "
                           "running for that long. It is where to look for a GPU waiting on the host.",
                           kind="compute", unit="ms", where=f"the step table, row step {step}: wall_ms − device_busy_ms",
                           traps=traps))
    if cold is None:
        from .. import replay_capture
        cold = replay_capture("cold_start_8step")
    cst = in_units(step_measures(cold.trace), "ms")
    first = cst.iloc[0]
    cold_cols = [c for c in phase_cols if c in cst.columns and pd.notna(first[c])]
    ranked = sorted(cold_cols, key=lambda c: -float(first[c]))
    cold_longest = ranked[0][:-3]
    qs.append(Question("cold_first_phase", "Another recording, not shown here: cold_start_8step ran the same "
                                           "workload with a DataLoader whose workers had just been started. In its "
                                           "first step, which phase took the longest on the host?", cold_longest,
                       f"{cold_longest}: in that first step "
                       + ", ".join(f"{c[:-3]} {first[c]:,.1f} ms" for c in ranked) + ". The first batch from fresh "
                       "workers waits for them to start and decode it (and the first forward pass loads cuDNN and "
                       "its kernels); later steps take tens of ms.",
                       choices=[c[:-3] for c in phase_cols], kind="transfer",
                       where="what a fresh DataLoader does on its first batch (the profiled series' slow first step "
                             "above)",
                       traps=[(ranked[1][:-3], f"{ranked[1][:-3]} was long too in that step "
                                               f"({first[ranked[1]]:,.0f} ms, one-time start-up work), but another "
                                               "phase was longer: which one waits for worker processes to start?")]))
    return Exercises("Lesson 00 — your turn", qs)
