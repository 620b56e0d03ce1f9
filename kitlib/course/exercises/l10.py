"""Lesson 10's questions (which tool for which question?).

Each question is one a learner meets in the earlier lessons or in the course's
source texts; the answer is the tool that answers it, and the explanation names
the view and why the other tools cannot. These are facts about the tools, not
figures of a capture.
"""
from __future__ import annotations

import pandas as pd

from . import Exercises, Question

#: The tools, by the name an answer is normalised to, with the other names accepted.
TOOLS = {
    "torch.profiler": ("torch.profiler", "pytorch profiler", "profiler", "kineto", "torch profiler"),
    "nsight systems": ("nsight systems", "nsys", "nsight-systems", "system profiler"),
    "nsight compute": ("nsight compute", "ncu", "nsight-compute", "kernel profiler"),
    "timer": ("timer", "timing", "stopwatch", "uninstrumented timing", "measure.compare", "time_steps"),
}


def tool_name(answer) -> str:
    """Normalise a tool name (``"nsys"`` → ``"nsight systems"``); unknown text is returned lower-cased."""
    s = str(answer).strip().lower()
    for tool, names in TOOLS.items():
        if s in names:
            return tool
    return s


#: (key, question, tool, view, why) — the routing exercises of lesson 10.
ROUTES = [
    ("op_of_kernel", "Which PyTorch operator asked for this sm80_xmma_fprop kernel?", "torch.profiler",
     "trace: operator → launch → kernel (external id, correlation id); lesson 01",
     "only the framework profiler records operators and stamps their launches with the operator's external id; "
     "Nsight sees the kernel and the launch but not the operator unless emit_nvtx adds a range per operator"),
    ("line_of_code", "Which line of my Python code is responsible for most device time?", "torch.profiler",
     "with_stack=True, key_averages(group_by_stack_n=5); lesson 05",
     "the Python call stack is recorded by torch.profiler's tracer; the system and kernel profilers see native "
     "threads, not Python frames"),
    ("memory_per_op", "How much GPU memory did each operator allocate, and when was the peak?", "torch.profiler",
     "profile_memory=True (Self CUDA Mem), the memory snapshot; lesson 06",
     "allocations go through PyTorch's caching allocator, which only PyTorch's own tools see as per-operator "
     "events"),
    ("idle_before_first_step", "What is the process doing during the second before the first step, while the "
                               "GPU sits idle (workers starting, files opened)?", "nsight systems",
     "OS runtime rows and threads of every process, CUDA API rows; lesson 03",
     "Nsight Systems traces the OS runtime calls and the threads of every process, including the DataLoader "
     "workers; torch.profiler records only the training process's operators"),
    ("backward_thread", "Which thread launches the backward kernels, and does it run while the main thread "
                        "waits?", "nsight systems",
     "CUDA API rows per thread beside the NVTX rows; lesson 08",
     "the system timeline shows every thread's CUDA calls on one clock; that autograd's pt_autograd_0 thread "
     "launches the backward kernels is plain there"),
    ("copy_overlap", "Do the host-to-device copies overlap with kernels on another stream?", "nsight systems",
     "GPU rows per stream (kernels, memcpy) and the copies' source memory kind; lessons 03 and 08",
     "stream-level concurrency of copies and kernels is a system question; Nsight draws each stream and copy "
     "engine on the same timeline as the host threads"),
    ("conv_bound", "Is this convolution kernel limited by memory bandwidth or by arithmetic?", "nsight compute",
     "Speed Of Light section (compute vs memory throughput, % of peak); lesson 07 / the reference ncu CSV",
     "only the kernel profiler replays the kernel with hardware counters; the timeline tools know its duration, "
     "not what limited it"),
    ("occupancy", "How many warps per SM does this kernel keep resident, and what limits it (registers, shared "
                  "memory)?", "nsight compute", "Occupancy and Launch Statistics sections",
     "achieved occupancy is a hardware counter measured per kernel; theoretical limits come from the launch "
     "configuration and the compiled kernel's resources, which ncu reports"),
    ("is_it_faster", "Did switching the loader to persistent workers make the step faster?", "timer",
     "repeated uninstrumented step times + kitlib.analyses.compare.compare; lesson 09",
     "every profiler adds its own cost and changes what it measures; a speed-up is claimed from repeated "
     "uninstrumented measurements with their spread, not from a trace"),
]


def tool_table() -> pd.DataFrame:
    """The framework → system → kernel workflow as a table: per tool, what it answers,
    the views it offers and what it costs.

    Returns
    -------
    DataFrame indexed by tool
        ``level``, ``answers``, ``views``, ``cost``.
    """
    rows = [
        ("torch.profiler", "framework (macro)", "what ran and where in the model: operators, their kernels, "
         "shapes, memory, stacks, FLOP estimates", "trace (Perfetto), key_averages tables, memory views",
         "grows with attribution (shapes, memory, stacks, FLOPs); keep explanation runs short"),
        ("nsight systems", "system", "how host, threads, OS, copies and GPU streams interact over time",
         "timeline: NVTX, CUDA API per thread, OS runtime, kernels/copies per stream; nsys stats; SQLite",
         "low with cuda,nvtx; more with osrt, CPU sampling, context switches, memory usage"),
        ("nsight compute", "kernel (micro)", "why one kernel takes the time it does: throughput, occupancy, "
         "stalls", "sections per kernel (Speed Of Light, Occupancy, Launch Statistics)",
         "very high: each profiled kernel is replayed many times; select a few kernels"),
        ("timer", "measurement", "whether a change made the step faster", "repeated step times with their "
         "spread, compared (kitlib.analyses.compare.compare)", "none beyond a synchronisation per step"),
    ]
    return pd.DataFrame(rows, columns=["tool", "level", "answers", "views", "cost"]).set_index("tool")


def questions(capture=None) -> Exercises:
    """Questions of lesson 10: route each question to a tool (see :data:`ROUTES`).

    ``capture`` is accepted for symmetry with the other lessons and not used: the
    answers are facts about the tools.
    """
    qs = [Question(key, q + " (torch.profiler / nsight systems / nsight compute / timer)", tool,
                   f"{tool} — view: {view}. Why: {why}.", normalise=tool_name, choices=list(TOOLS))
          for key, q, tool, view, why in ROUTES]
    return Exercises("Lesson 10 — your turn", qs)
