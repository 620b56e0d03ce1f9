"""Lesson 07's questions (how much memory did this operation take?)."""
from __future__ import annotations

from . import Exercises, Question
from ..sources import B300
from ...units import bytes_to_gb, bytes_to_gib


def _snapshot_capture(capture):
    """The capture's own memory snapshot, or the reference one when it has none."""
    from ...readers.bundle import open_capture
    return capture if capture.has("memory_snapshot.pickle") else open_capture("profiler_5step")


def questions(capture) -> Exercises:
    """Questions of lesson 07, computed from ``capture`` (a torch.profiler bundle
    recorded with ``profile_memory=True``; the memory snapshot comes from the
    capture when it has one, otherwise from the reference ``profiler_5step``)."""
    from ...analyses import memory as M
    tr = capture.trace
    by_op = M.memory_by_operator(tr)
    conv = by_op.loc["aten::cudnn_convolution"]
    tl = M.memory_timeline(tr)
    peak = M.memory_peak(tl)
    per_step = M.memory_per_step(tl)
    growth = int(per_step["end_allocated_bytes"].iloc[-1] - per_step["start_allocated_bytes"].iloc[0])
    most_neg = by_op["self_bytes"].idxmin()
    snap = _snapshot_capture(capture).memory_snapshot
    new_segments = int((snap.events["action"] == "segment_alloc").sum())
    qs = [
        Question("conv_self_gib", "Self CUDA Mem of aten::cudnn_convolution over the recorded steps, in the "
                                  "profiler's 'GB' (GiB = 2**30 bytes)?", float(round(bytes_to_gib(conv["self_bytes"]), 2)),
                 f"{int(conv['self_bytes']):,} bytes over {int(conv['calls'])} calls = "
                 f"{bytes_to_gib(conv['self_bytes']):.2f} GiB (= {bytes_to_gb(conv['self_bytes']):.2f} GB of 10⁹ bytes): "
                 f"{int(conv['self_alloc_bytes']):,} bytes allocated minus {int(conv['self_free_bytes']):,} freed "
                 "inside the operator's calls.", tolerance=0.004 / max(bytes_to_gib(conv["self_bytes"]), 1e-9),
                 traps=[(float(round(bytes_to_gb(conv["self_bytes"]), 2)), "those are decimal GB (10⁹ bytes); the "
                                                                           "profiler's 'GB' are GiB (2³⁰ bytes)."),
                        (float(B300["cudnn_conv_self_cuda_mem_gb"]), "that is the B300 figure quoted from the source "
                                                                     "texts; the question is about the capture this "
                                                                     "lesson analyses.")]),
        Question("is_peak", "Is that figure the most memory the convolutions held at one moment? (yes/no)", False,
                 f"no: it is a sum over {int(conv['calls'])} calls of what each call allocated and did not free "
                 f"itself. Live memory never went above {bytes_to_gb(peak['allocated_bytes']):.2f} GB during the whole "
                 "window; the outputs were freed later, by other operators (in backward)."),
        Question("most_negative_operator", "Which operator (or label) has the most negative Self CUDA Mem?",
                 most_neg,
                 f"{most_neg}: {bytes_to_gib(by_op.loc[most_neg, 'self_bytes']):.2f} GiB. A negative value is a net "
                 "free: it released tensors someone else allocated. (For the `backward` label, the autograd "
                 "engine's operators run on another thread, so they are not its children and all their "
                 "allocations and frees stay in its 'self'.)",
                 normalise=lambda s: str(s).strip()),
        Question("peak_phase", "In which phase (data_load, h2d, forward, backward, optimizer) was live memory "
                               "highest?", peak["phase"],
                 f"{peak['phase']}: {bytes_to_gb(peak['allocated_bytes']):.2f} GB allocated just after "
                 f"{peak['op']} in step {peak['step']}: the activations saved in forward are still live while "
                 "backward allocates the gradients that replace them.",
                 choices=["data_load", "h2d", "forward", "backward", "optimizer"]),
        Question("growth_over_window_bytes", "By how many bytes did allocated memory grow from the start of "
                                             "the first recorded step to the end of the last?", growth,
                 f"{growth:,} bytes: every step starts at {bytes_to_gb(per_step['start_allocated_bytes'].iloc[0]):.3f} GB "
                 f"and returns to it, although each forward adds "
                 f"{bytes_to_gb(per_step['forward_growth_bytes'].iloc[0]):.2f} GB. Growth inside a step is the "
                 "activations, not a leak.", tolerance=0),
        Question("new_segments", "How many new CUDA segments (cudaMalloc, 'segment_alloc') did the allocator "
                                 "make during the snapshot's history?", new_segments,
                 f"{new_segments}: {int((snap.events['action'] == 'alloc').sum()):,} tensor allocations were all "
                 f"served from the {bytes_to_gb(snap.reserved_bytes()):.2f} GB the caching allocator already held "
                 "(reserved). Freed blocks go back to its cache, not to CUDA.", tolerance=0),
    ]
    return Exercises("Lesson 07 — your turn", qs)
