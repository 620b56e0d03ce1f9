"""Lesson 09's questions (what does the system view add?)."""
from __future__ import annotations

from . import Exercises, Question
from ...units import ns_to_us


def questions(capture, emit=None) -> Exercises:
    """Questions of lesson 09, from an Nsight Systems capture (``nsys_8step`` or a live one).

    Parameters
    ----------
    capture : kitlib.readers.bundle.Capture
        An ``nsys`` bundle with ``torch_step`` / phase NVTX ranges.
    emit : kitlib.readers.bundle.Capture, optional
        An ``emit_nvtx`` bundle (``nsys_emit_nvtx``); adds a question on it.
    """
    import numpy as np

    from ...analyses.align import launch_threads, operator_ranges
    from ...readers.nsys import load_nsys, nvtx_gpu_projection
    rep = load_nsys(capture)
    proj = nvtx_gpu_projection(rep)
    bwd = proj[proj["name"] == "backward"]
    th = launch_threads(rep)
    dark = th[th["labelled_ranges"] == 0].iloc[0] if (th["labelled_ranges"] == 0).any() else th.iloc[-1]
    total_k = int(th["kernels"].sum())
    col = capture.recipe.get("collectors", {})
    qs = [
        Question("backward_gpu_ops", "Nsight's NVTX GPU projection matches launches to ranges by thread. How many GPU "
                                     f"operations does it credit to all {len(bwd)} backward ranges together?",
                 int(bwd["gpu_ops"].sum()),
                 f"{int(bwd['gpu_ops'].sum())} operations projecting to {ns_to_us(bwd['proj_dur_ns'].sum()):,.3f} µs in "
                 f"total (nsys stats nvtx_gpu_proj_sum says the same), although the backward pass is the longest "
                 "part of the step's GPU work: the range's own thread only calls loss.backward() and waits.",
                 tolerance=0),
        Question("dark_thread", "Which thread (its name in the report) launches GPU work but carries no NVTX range?",
                 str(dark["thread"]),
                 f"{dark['thread']} (tid {int(dark['tid'])}) launched {int(dark['kernels']):,} of the {total_k:,} "
                 "kernels. Autograd runs the backward pass on its own thread, so no range pushed on the main "
                 "thread can enclose those launches.", normalise=lambda s: str(s).strip().lower()),
        Question("dark_thread_kernels", "How many kernels did that thread launch?", int(dark["kernels"]),
                 f"{int(dark['kernels']):,} kernels = {dark['kernel_share']:.1%} of all kernels; "
                 "attribute them by time (kitlib.align attribution='time') to credit them to backward.",
                 tolerance=0),
        Question("cpu_sampling", "Was CPU sampling on in this capture? (yes/no)", bool(col.get("cpu_sampling")),
                 "the manifest's collectors: " + ", ".join(f"{k}={v}" for k, v in col.items())
                 + ". With sampling and context switches off, the report cannot say what a thread computed "
                   "between its calls, nor when it was descheduled."),
    ]
    if emit is not None:
        er = load_nsys(emit)
        ops = operator_ranges(er)
        at = launch_threads(er)
        auto = at.iloc[int(np.argmax(at["thread"].str.contains("autograd")))] if at["thread"].str.contains(
            "autograd").any() else at.iloc[0]
        n_auto = int((ops["tid"] == auto["tid"]).sum())
        qs.append(Question("emit_nvtx_autograd_ranges",
                           "With emit_nvtx, how many operator NVTX ranges sit on the autograd thread?", n_auto,
                           f"{n_auto:,} of {len(ops):,} operator ranges are on {auto['thread']} (tid "
                           f"{int(auto['tid'])}): emit_nvtx pushes a range for every operator on the thread that "
                           "runs it, so backward operators get ranges on the autograd thread and Nsight's "
                           "projection can credit their kernels.", tolerance=0))
    return Exercises("Lesson 09 — your turn", qs)
