"""Lesson 07's questions (how much memory did this operation take?)."""
from __future__ import annotations

from . import Exercises, Question, misconception
from ..sources import B300
from ...units import bytes_to_gb, bytes_to_gib

#: The call whose raw events ``excerpt_self_mib`` shows: this operator's second (the first is the stem's).
EXCERPT_OP, EXCERPT_NTH = "aten::cudnn_batch_norm", 1
MIB = 2 ** 20


def _snapshot_capture(capture):
    """The capture's own memory snapshot, or the reference one when it has none."""
    from ...readers.bundle import open_capture
    return capture if capture.has("memory_snapshot.pickle") else open_capture("profiler_5step")


def excerpt(capture) -> list:
    """The raw events of one call of :data:`EXCERPT_OP` (:func:`kitlib.course.raw_views.call_excerpt`)."""
    from ..raw_views import call_excerpt, trace_events
    return call_excerpt(trace_events(capture), EXCERPT_OP, EXCERPT_NTH)


def _vs(peak_bytes: float, self_bytes: float) -> str:
    """Where the peak of live memory stands against a Self CUDA Mem figure (±20 % = about the same)."""
    r = peak_bytes / self_bytes if self_bytes else float("inf")
    return "higher" if r > 1.2 else "lower" if r < 0.8 else "about the same"


def questions(capture) -> Exercises:
    """Questions of lesson 07 from ``capture`` (recorded with ``profile_memory=True``), the
    ``fixed_batch`` recording and a memory snapshot (the capture's, else ``profiler_5step``'s)."""
    from .. import replay_capture
    from ..raw_views import self_and_total
    from ...analyses import memory as M
    tr = capture.trace
    by_op = M.memory_by_operator(tr)
    conv = by_op.loc["aten::cudnn_convolution"]
    tl = M.memory_timeline(tr)
    peak = M.memory_peak(tl)
    per_step = M.memory_per_step(tl)
    vs = _vs(peak["allocated_bytes"], conv["self_bytes"])
    exc = excerpt(capture)
    self_b, total_b = self_and_total(exc)
    kids_b = total_b - self_b
    mem = [e for e in exc if e["ph"] == "i"]
    kids = [e for e in exc[1:] if e["ph"] == "X"]
    in_kids = sum(any(k["ts"] <= m["ts"] <= k["ts"] + k["dur"] for k in kids) for m in mem)
    own = ("What is left is negative: a free the operator did itself, of memory one of its children allocated. "
           "That is how an operator gets a negative Self CUDA Mem." if self_b < 0 else
           "What is left is what the operator allocated (or freed) itself, outside its children.")
    fixed = replay_capture("fixed_batch")
    fconv = M.memory_by_operator(fixed.trace).loc["aten::cudnn_convolution"]
    f_gib = bytes_to_gib(fconv["self_bytes"])
    start, top = float(per_step["start_allocated_bytes"].iloc[0]), float(per_step["peak_allocated_bytes"].iloc[0])
    doubled = start + 2 * (top - start)
    snap = _snapshot_capture(capture).memory_snapshot
    new_segments = int((snap.events["action"] == "segment_alloc").sum())
    gb, gib = bytes_to_gb, bytes_to_gib
    qs = [
        Question("excerpt_self_mib", f"From the raw events of that one call of {EXCERPT_OP} (the JSON above): what "
                                     "is its Self CUDA Mem, in MiB (2**20 bytes)? Mind the sign.",
                 float(self_b / MIB),
                 f"{self_b / MIB:.2f} MiB ({self_b:,} bytes). Its interval holds {len(mem)} memory events adding up to "
                 f"{total_b:,} bytes (its total, 'CUDA Mem'); {in_kids} of them lie inside its children "
                 f"({', '.join(sorted({k['name'] for k in kids}))}), whose totals ({kids_b:,} bytes) are taken away. "
                 + own,
                 kind="transfer", unit="MiB",
                 where="the excerpt's memory events (args['Bytes']) inside the operator's [ts, ts + dur] and not "
                       "inside any of its children's",
                 traps=[(float(total_b / MIB), "that is its total (the profiler's 'CUDA Mem'): the bytes inside its "
                                               "children count for them, and self = total minus the children's "
                                               "totals."),
                        (float(-self_b / MIB), "right size, wrong sign: a free has negative Bytes, and an operator "
                                               "whose only own event is a free has a negative self."),
                        (0.0, "not zero: one memory event lies inside the operator but inside none of its children.")]),
        Question("fixed_batch_conv_gib", "Rebuild aten::cudnn_convolution's Self CUDA Mem by hand on the fixed_batch "
                                         "recording (course.replay_capture('fixed_batch')). What does it come to, in "
                                         "the profiler's 'GB' (GiB), 2 decimals as the profiler prints it?",
                 float(round(f_gib, 2)),
                 f"{f_gib:.2f} GiB ({int(fconv['self_bytes']):,} bytes over {int(fconv['calls'])} calls). The same "
                 f"calls on the same shapes allocate almost the same bytes in both recordings "
                 f"({int(conv['self_bytes'] - fconv['self_bytes']):+,} bytes in {capture.name}); the B300 source's "
                 f"figure, {B300['cudnn_conv_self_cuda_mem_gb']:.2f} GB (GiB, as printed), is this one to two decimals: "
                 "the convolutions' outputs are set by the shapes, which are the same on both machines.",
                 kind="compute", unit="GiB", tolerance=0.0051 / max(round(f_gib, 2), 1e-9),
                 tolerance_why="the profiler prints two decimals, and the two H200 recordings differ in the second",
                 where="the [memory] events of fixed_batch's trace inside its aten::cudnn_convolution calls",
                 traps=[(float(round(gib(conv["self_bytes"]), 2)),
                         f"that is {capture.name}'s figure, the one rebuilt above; run the same cell on fixed_batch."),
                        (float(round(gb(fconv["self_bytes"]), 2)), "those are decimal GB (10⁹ bytes); the profiler's "
                                                                    "'GB' are GiB (2³⁰ bytes).")]),
        Question("self_mem_vs_peak", "Predict: compared with aten::cudnn_convolution's Self CUDA Mem, the most memory "
                                     "live tensors held at any one moment of the window is ...", vs,
                 f"{vs}: live tensors never held more than {gb(peak['allocated_bytes']):.2f} GB "
                 f"({gib(peak['allocated_bytes']):.2f} GiB) at once, while the convolution's Self CUDA Mem adds up "
                 f"{gib(conv['self_bytes']):.2f} GiB: what each of its {int(conv['calls'])} calls allocated and did not "
                 "free itself (mostly its output), summed, though most of those outputs were freed a few milliseconds "
                 "later, by other operators.",
                 kind="predict", choices=["higher", "about the same", "lower"],
                 traps=[misconception("self_mem_is_peak", "about the same",
                                      f"Here: {gib(conv['self_bytes']):.2f} GiB summed over "
                                      f"{int(conv['calls'])} calls."),
                        ("higher" if vs != "higher" else "lower",
                         "the curve of allocated memory below says otherwise: compare its top with the figure.")]),
        Question("peak_phase", "Predict: in which phase of a step is live (allocated) memory highest?", peak["phase"],
                 f"{peak['phase']}: {gb(peak['allocated_bytes']):.2f} GB allocated just after {peak['op']} in step "
                 f"{peak['step']}: the activations saved in forward are still live while backward allocates the "
                 "gradients that replace them, and they are freed only as backward walks back through the network.",
                 kind="predict", choices=["data_load", "h2d", "forward", "backward", "optimizer"]),
        Question("batch_doubled_peak_gb", "What if the batch doubled (256 images a step)? Estimate the peak of allocated "
                                          "memory in GB (10⁹ bytes), assuming what a step holds at its start stays the "
                                          "same and everything allocated above that level doubles.",
                 float(gb(doubled)),
                 f"{gb(start):.3f} + 2 × ({gb(top):.3f} − {gb(start):.3f}) = {gb(doubled):.2f} GB. An estimate from a "
                 "model, not a measurement: the weight gradients sit above the starting level but do not grow with the "
                 "batch, the input batch held at the start does, and cuDNN may choose other algorithms and workspaces. "
                 "Record one step at batch 256 with profile_memory=True to know.",
                 kind="transfer", unit="GB",
                 where="the per-step table: start_allocated_bytes and peak_allocated_bytes (GB)",
                 traps=[(float(gb(2 * top)), "you doubled the starting level too: parameters and momentum buffers do "
                                             "not grow with the batch."),
                        (float(gb(top)), "the activations saved for backward are one per image: they grow with the "
                                         "batch.")]),
        Question("new_segments", "How many new CUDA segments (cudaMalloc, 'segment_alloc') did the allocator make "
                                 "during the snapshot's history?", new_segments,
                 f"{new_segments}: {int((snap.events['action'] == 'alloc').sum()):,} tensor allocations were all "
                 f"served from the {gb(snap.reserved_bytes()):.2f} GB the caching allocator already held "
                 "(reserved). Freed blocks go back to its cache, not to CUDA.", tolerance=0, kind="compute",
                 where="the snapshot's events, column action (a count of 'segment_alloc' rows; absent = 0)"),
    ]
    return Exercises("Lesson 07 — your turn", qs)
