"""Lesson 11's questions (which tool for which question?).

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


#: (key, question, tools that answer it, view, why) — the routing exercises of lesson 11.
#: Where two tools can answer, both are listed, the more direct first; either is accepted.
ROUTES = [
    ("op_of_kernel", "Which PyTorch operator asked for this sm90_xmma_fprop kernel?",
     ("torch.profiler", "nsight systems"),
     "torch.profiler's trace: operator → launch → kernel (external id, correlation id), lesson 02; or Nsight "
     "Systems with emit_nvtx ranges around each operator, lesson 09",
     "the framework profiler records operators and stamps their launches (and, through Kineto, the kernels) with "
     "the operator's external id; Nsight Systems sees the kernel and its launch, and names the operator only when "
     "torch.autograd.profiler.emit_nvtx pushes one NVTX range per operator"),
    ("line_of_code", "Which line of my Python code is responsible for most device time?",
     ("torch.profiler", "nsight systems"),
     "torch.profiler with with_stack=True, grouped by call site (lesson 06); Nsight Systems with Python "
     "backtraces on CUDA API calls (--python-backtrace=cuda) or Python sampling",
     "torch.profiler records every Python call and ties each kernel to the frames open at its operator, so device "
     "time sums per line; Nsight Systems can attach a Python backtrace to each CUDA API call (and so, through the "
     "correlation id, to each kernel) or sample Python stacks, at the cost of a heavier capture"),
    ("memory_per_op", "How much GPU memory did each operator allocate, and when was the peak?", ("torch.profiler",),
     "profile_memory=True (Self CUDA Mem), the memory snapshot; lesson 07",
     "allocations go through PyTorch's caching allocator, which only PyTorch's own tools record per operator; "
     "Nsight Systems' --cuda-memory-usage follows the device memory the allocator reserves over time, not which "
     "operator asked for it"),
    ("idle_before_first_step", "During the second before the first step, while the GPU sits idle, what are the "
                               "training process's threads doing (forking workers, waiting, allocating pinned "
                               "memory)?", ("nsight systems",),
     "OS-runtime and CUDA API rows per thread, with thread names; lesson 04",
     "Nsight Systems traces the OS-runtime and CUDA API calls of each thread of the process it started "
     "(fork, the main thread's waits on semaphores and locks, pt_data_pin's cudaHostAlloc); torch.profiler records "
     "the CUDA API calls of every thread (cold_start_8step has the pin-memory thread's cudaHostAlloc calls) but "
     "no OS calls, so it cannot show forking, waiting or lock contention. Neither saw the DataLoader workers "
     "here: they are forked without exec, which Nsight Systems follows only with --trace-fork-before-exec=true"),
    ("backward_thread", "Which thread launches the backward kernels, and does it run while the main thread "
                        "waits?", ("torch.profiler", "nsight systems"),
     "the launching thread of each kernel: tid in torch.profiler's trace (lessons 03, 06), CUDA API rows per "
     "thread in Nsight Systems (lesson 09)",
     "both record the thread of every launch: torch.profiler's trace puts the backward operators and their "
     "launches on autograd's thread beside the main thread's backward label; Nsight Systems draws each thread's "
     "CUDA calls and names the thread pt_autograd_0"),
    ("copy_overlap", "Do the host-to-device copies overlap with kernels?", ("torch.profiler", "nsight systems"),
     "GPU rows per stream (kernels, memcpy) in either timeline; lessons 04 and 09",
     "both timelines record each copy and kernel with its stream, start and duration (CUPTI activity records, "
     "in either tool); Nsight Systems adds the copy's source memory kind (pageable or pinned) and the host "
     "threads' OS calls on the same clock"),
    ("conv_bound", "Is this convolution kernel limited by memory bandwidth or by arithmetic?", ("nsight compute",),
     "Speed Of Light section (compute vs memory throughput, % of peak); lesson 08 / the reference ncu CSV",
     "only the kernel profiler replays the kernel with hardware counters; the timeline tools know its duration, "
     "not what limited it"),
    ("occupancy", "How many warps per SM does this kernel keep resident, and what limits it (registers, shared "
                  "memory)?", ("nsight compute",), "Occupancy and Launch Statistics sections",
     "achieved occupancy is a hardware counter measured per kernel; theoretical limits come from the launch "
     "configuration and the compiled kernel's resources, which ncu reports"),
    ("is_it_faster", "Did switching the loader to persistent workers make the step faster?", ("timer",),
     "repeated uninstrumented step times + kitlib.analyses.compare.compare; lesson 10",
     "every profiler adds its own cost and changes what it measures; a speed-up is claimed from repeated "
     "uninstrumented measurements with their spread, not from a trace"),
]


def tool_set(answer) -> frozenset:
    """The tools named in an answer: ``"nsys"`` → {nsight systems}; ``"both"`` → {"both"};
    ``"torch.profiler and nsys"`` → both tools. Unknown text gives an empty set."""
    s = str(answer).strip().lower()
    if s in ("both", "either"):
        return frozenset({"both"})
    parts = [p.strip() for chunk in s.replace(" and ", ",").replace(" or ", ",").replace("+", ",").split(",")
             for p in [chunk] if p.strip()]
    tools = {tool_name(p) for p in parts}
    return frozenset(t for t in tools if t in TOOLS)


def _accepts(tools):
    """A judge for one route: any tool of ``tools``, several of them, or "both" where two answer."""
    want = frozenset(tools)

    def accept(given) -> bool:
        got = tool_set(given)
        if got == {"both"}:
            return len(want) == 2
        return bool(got) and got <= want
    return accept


def route_table() -> pd.DataFrame:
    """The routes as a table for the lesson's picture: one row per question.

    Returns
    -------
    DataFrame
        ``key``, ``question``, and one boolean column per tool of :data:`TOOLS`
        (True where that tool answers the question), in :data:`ROUTES` order.
    """
    rows = [{"key": key, "question": q, **{t: t in tools for t in TOOLS}} for key, q, tools, _, _ in ROUTES]
    return pd.DataFrame(rows)


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
    """Questions of lesson 11: route each question to a tool (see :data:`ROUTES`).

    ``capture`` is accepted for symmetry with the other lessons and not used: the
    answers are facts about the tools. Where two tools answer, either one, both names,
    or "both" is right, and the explanation says what each shows.
    """
    qs = []
    for key, q, tools, view, why in ROUTES:
        both = len(tools) == 2
        traps = [] if both else [(t, f"{t} does not answer this one directly. Ask what it records.")
                                 for t in TOOLS if t not in tools]
        # the choices are listed once, by ``show()`` and the answer form, not in the prompt too
        qs.append(Question(key, q, " and ".join(tools),
                           f"{' and '.join(tools)} — view: {view}. Why: {why}.", normalise=lambda a: tool_set(a),
                           choices=list(TOOLS) + ["both"], traps=traps, accept=_accepts(tools),
                           offered=lambda a: bool(tool_set(a))))
    return Exercises("Lesson 11 — your turn", qs)
