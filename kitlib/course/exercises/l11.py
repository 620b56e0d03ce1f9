"""Lesson 11's questions (which tool for which question?).

The routing questions name the tool that answers a question of the earlier lessons, with
the view and why the others cannot ("both" where both timeline tools answer, differently).
The others are computed from recordings: the convolution kernels a ``conv`` name filter
selects (``profiler_5step``), whether the public CloverLeaf export recorded context switches,
and whether ``nsys_8step`` traced the loader's workers.
"""
from __future__ import annotations

import re
import sqlite3

import pandas as pd

from . import Exercises, Question

#: The tools, by the name an answer is normalised to, with the other names accepted.
#: What lesson 11's map shows, in words: printed under the map once the routing questions are
#: answered (in the lesson's prose it answered them before they were asked).
MAP_IN_WORDS = ("What the map shows in words: Nsight Systems names the operator of a kernel once emit_nvtx is "
                "on, but only torch.profiler aggregates: it groups device time by input shape and by call site, "
                "and attributes tensor memory to the operators that allocated it (in Nsight Systems each of those "
                "would be your own SQL over thousands of ranges, and tensor memory is not recorded at all). Only "
                "Nsight Systems records OS calls (waits, locks, forks) and thread scheduling; only Nsight Compute "
                "measures one kernel with hardware counters; both timeline tools record CUDA API calls per thread "
                "and GPU work per stream; and a speed-up is measured with a timer over repeated uninstrumented "
                "steps, never read off a trace.")

TOOLS = {
    "torch.profiler": ("torch.profiler", "pytorch profiler", "profiler", "kineto", "torch profiler"),
    "nsight systems": ("nsight systems", "nsys", "nsight-systems", "system profiler"),
    "nsight compute": ("nsight compute", "ncu", "nsight-compute", "kernel profiler"),
    "timer": ("timer", "timing", "stopwatch", "uninstrumented timing", "measure.compare", "time_steps"),
}
BOTH = ("torch.profiler", "nsight systems")


def tool_name(answer) -> str:
    """Normalise a tool name (``"nsys"`` → ``"nsight systems"``); unknown text is returned lower-cased."""
    s = str(answer).strip().lower()
    for tool, names in TOOLS.items():
        if s in names:
            return tool
    return s


#: (key, question, tools that answer it, view, why) — the routing exercises of lesson 11.
#: Two tools listed = both timeline tools answer, each differently: the answer is "both".
ROUTES = [
    ("op_of_kernel", "Which PyTorch operator asked for this sm90_xmma_fprop kernel?", BOTH,
     "torch.profiler's trace: operator → launch → kernel (external id, correlation id), lesson 02; Nsight "
     "Systems with emit_nvtx: the operator's NVTX range open around the launch, lesson 09",
     "both, differently. torch.profiler stamps each launch (and through Kineto its kernel) with the operator's "
     "external id. Nsight Systems links launch and kernel by correlation id too, but knows no operators: with "
     "torch.autograd.profiler.emit_nvtx every operator pushes an NVTX range (with its input sizes), and the "
     "operator is the innermost range open on the launching thread when the launch ran"),
    ("memory_per_op", "How much GPU memory did each operator's tensors take, summed over its calls?",
     ("torch.profiler",), "profile_memory=True (Self CUDA Mem) and the memory snapshot; lesson 07",
     "tensor allocations go through PyTorch's caching allocator, and only PyTorch's tools attribute them to the "
     "operator that asked; Nsight Systems' --cuda-memory-usage follows the memory the allocator reserves from CUDA "
     "over time (reused blocks make no CUDA call at all), not which operator's tensors use it"),
    ("context_switch", "While the GPU sat idle, was the main thread switched off its CPU core (descheduled) "
                       "by the operating system?", ("nsight systems",),
     "thread state and context switches (--cpuctxsw=process-tree), lesson 09",
     "Nsight Systems records the operating system's scheduling of each thread when its context-switch collector "
     "runs; torch.profiler records what PyTorch and CUPTI report, and nothing of the scheduler"),
    ("conv_bound", "Is this convolution kernel limited by memory bandwidth or by arithmetic?", ("nsight compute",),
     "Speed Of Light section (compute vs memory throughput, % of peak); lesson 08 / the reference ncu CSV",
     "only the kernel profiler replays the kernel with hardware counters; the timeline tools know its duration, "
     "not what limited it"),
    ("backward_thread", "Which thread launches the backward kernels, and does it run while the main thread "
                        "waits?", BOTH,
     "the launching thread of each kernel: tid in torch.profiler's trace (lessons 03, 06), CUDA API rows per "
     "thread in Nsight Systems (lesson 09)",
     "both, differently: torch.profiler's trace puts the backward operators and their launches on autograd's "
     "thread beside the main thread's backward label; Nsight Systems draws each thread's CUDA calls and names "
     "the thread pt_autograd_0, with its OS calls beside them"),
    ("is_it_faster", "Did switching the loader to persistent workers make the step faster?", ("timer",),
     "repeated uninstrumented step times + kitlib.analyses.compare.compare; lesson 10",
     "every profiler adds its own cost and changes what it measures; a speed-up is claimed from repeated "
     "uninstrumented measurements with their spread, not from a trace"),
    ("host_alloc_lock", "Does the pin-memory thread's cudaHostAlloc wait on a lock that another thread holds?",
     ("nsight systems",), "OS-runtime rows per thread (pthread_mutex_lock, with backtraces), lesson 04",
     "Nsight Systems' OS-runtime trace records each thread's lock waits (pthread_mutex_lock and the like) beside "
     "its CUDA calls; torch.profiler records the cudaHostAlloc call and its duration, but not the lock it waited "
     "on"),
    ("shape_groups", "Which input shapes of aten::cudnn_convolution account for most of its device time, as a "
                     "table with one row per shape?", ("torch.profiler",),
     "key_averages(group_by_input_shape=True), lesson 05",
     "torch.profiler aggregates by input shape; Nsight Systems records each operator's input sizes in its "
     "emit_nvtx ranges (nsys_emit_nvtx: 4,686 of 5,370 operator ranges carry them) but groups nothing by shape: "
     "that table would be your own SQL"),
    ("copy_overlap", "Do the host-to-device copies overlap with kernels?", BOTH,
     "GPU rows per stream (kernels, memcpy) in either timeline; lessons 04 and 09",
     "both, differently: each records every copy and kernel with its stream, start and duration (CUPTI activity "
     "records, in either tool); torch.profiler's copy names give the memory kinds (Memcpy HtoD (Pinned -> "
     "Device)), and Nsight Systems adds the host threads' OS calls on the same clock"),
    ("occupancy", "How many warps per SM does this kernel keep resident, and what limits it (registers, shared "
                  "memory)?", ("nsight compute",), "Occupancy and Launch Statistics sections",
     "achieved occupancy is a hardware counter measured per kernel; theoretical limits come from the launch "
     "configuration and the compiled kernel's resources, which ncu reports"),
    ("line_of_code", "Which line of my Python code accounts for most device time, summed per call site?",
     ("torch.profiler",), "with_stack=True, key_averages(group_by_stack_n=N); lesson 06",
     "torch.profiler ties each kernel to the Python frames open at its operator and sums device time per call "
     "site; Nsight Systems can attach a Python backtrace to a CUDA API call (--python-backtrace=cuda) or sample "
     "Python stacks, one call at a time, without summing device time per line"),
    ("nodes_one_timeline", "A job runs on two nodes: which tool records each rank's host threads with their OS "
                           "calls and GPU streams, and can open the ranks' reports together on one timeline?",
     ("nsight systems",), "one report per rank (nsys profile -o report_%q{RANK} under torchrun), opened "
                          "together in the GUI; lesson 12",
     "Nsight Systems writes one report per rank and its GUI can open several reports on one timeline, OS calls and "
     "GPU streams included; torch.profiler writes one trace per rank, read side by side (lesson 12) without OS "
     "calls. Across nodes either timeline carries the hosts' clock difference"),
]


def tool_set(answer) -> frozenset:
    """The tools named in an answer: ``"nsys"`` → {nsight systems}; ``"both"`` → {"both"};
    ``"torch.profiler and nsys"`` → both tools. Unknown text gives an empty set."""
    s = str(answer).strip().lower()
    if s in ("both", "either", "both, differently"):
        return frozenset({"both"})
    parts = [p.strip() for chunk in s.replace(" and ", ",").replace(" or ", ",").replace("+", ",").split(",")
             for p in [chunk] if p.strip()]
    tools = {tool_name(p) for p in parts}
    return frozenset(t for t in tools if t in TOOLS)


def _accepts(tools):
    """A judge for one route: exactly the tools that answer it; "both" where the two timeline tools do."""
    want = frozenset(tools)

    def accept(given) -> bool:
        got = tool_set(given)
        if got == {"both"}:
            return want == frozenset(BOTH)
        return got == want
    return accept


def _route_traps(tools) -> list:
    """Feedback for each wrong tool answer of a route (checked before the generic hints)."""
    if frozenset(tools) == frozenset(BOTH):
        return [(t, f"{t} does answer it, but is it the only recording that holds these facts? Read again "
                    "what the section above found in the other kind of timeline, and how the question asks "
                    "you to answer where more than one tool does.") for t in BOTH] + \
               [(t, f"{t} does not answer this one: ask what it records.") for t in TOOLS if t not in BOTH]
    traps = [(t, f"{t} does not answer this one directly: ask what it records.") for t in TOOLS if t not in tools]
    if set(tools) <= set(BOTH):
        traps.append(("both", f"only {tools[0]} answers this one: ask what the other records."))
    else:
        traps.append(("both", f"neither timeline tool answers this one: {tools[0]} does."))
    return traps


def route_table() -> pd.DataFrame:
    """The routes for the lesson's picture: per :data:`ROUTES` entry ``key``, ``question`` and a
    boolean column per tool of :data:`TOOLS` (True where it answers)."""
    rows = [{"key": key, "question": q, **{t: t in tools for t in TOOLS}} for key, q, tools, _, _ in ROUTES]
    return pd.DataFrame(rows)


def tool_table() -> pd.DataFrame:
    """The framework → system → kernel workflow: per tool (index) ``level``, ``answers``,
    ``views``, ``cost``."""
    rows = [
        ("torch.profiler", "framework (macro)", "what ran and where in the model: operators and their kernels; "
         "device time grouped by shape and by call site; tensor memory per operator; FLOP estimates",
         "trace (Perfetto), key_averages tables, memory views",
         "grows with attribution (shapes, memory, stacks, FLOPs); keep explanation runs short"),
        ("nsight systems", "system", "how host threads, the OS, copies and GPU streams interact over time; "
         "operators and their input sizes only through emit_nvtx ranges, ungrouped",
         "timeline: NVTX, CUDA API per thread, OS runtime, kernels/copies per stream; nsys stats; SQLite",
         "low with cuda,nvtx; more with osrt, CPU sampling, context switches, memory usage"),
        ("nsight compute", "kernel (micro)", "why one kernel takes the time it does: throughput, occupancy, "
         "stalls", "sections per kernel (Speed Of Light, Occupancy, Launch Statistics)",
         "very high: each profiled kernel is replayed many times; select a few kernels"),
        ("timer", "measurement", "whether a change made the step faster", "repeated step times with their "
         "spread, compared (kitlib.analyses.compare.compare)",
         "a synchronisation per step removes the host's run-ahead: fair for comparing two settings; time many "
         "steps with one synchronisation for the real loop's rate"),
    ]
    return pd.DataFrame(rows, columns=["tool", "level", "answers", "views", "cost"]).set_index("tool")


#: Kernel names of a convolution's own work (cuDNN/CUTLASS implicit GEMM, Winograd, FFT, direct).
CONV_KERNEL = re.compile(r"fprop|dgrad|wgrad|implicit_?gemm|ImplicitGemmConvolution|winograd|fft|conv2d_",
                         re.IGNORECASE)

#: Shares of a step's convolution kernels whose name matches 'conv' a learner can predict (upper bounds).
CONV_SHARE_CHOICES = [(1e-9, "none"), (0.2, "a few"), (0.7, "about half"), (1.01, "most")]
#: The operators whose kernels are the convolutions' (forward, and both gradients in backward).
CONV_OPS = ("aten::cudnn_convolution", "aten::convolution_backward")


def conv_kernels_named_conv(trace) -> dict:
    """The kernels :data:`CONV_OPS` launched in a trace, and those named ``conv`` (what ``ncu -k
    regex:conv`` selects): dict of ``kernels``, ``named_conv``, ``steps``, ``share``
    (named_conv / kernels), ``names`` (``{short name: count}`` of those named ``conv``)."""
    from ...analyses.chain import chain
    ch = chain(trace)
    k = ch[(ch["gpu_kind"] == "kernel") & ch["op_name"].isin(CONV_OPS)]
    hit = k[k["gpu_name"].str.contains("conv", regex=False)]
    short = hit["gpu_name"].map(lambda n: re.sub(r"[<(].*", "", str(n)).replace("void ", "").split("::")[-1]
                                if not str(n).startswith("_Z") else
                                next(iter(re.findall(r"\d+(ImplicitGemmConvolution)", str(n))), str(n)[:40]))
    return {"kernels": len(k), "named_conv": len(hit), "steps": max(len(trace.steps), 1),
            "share": len(hit) / len(k) if len(k) else 0.0, "names": short.value_counts().to_dict()}


def readable_kernel_name(name: str, width: int = 90) -> str:
    """A kernel name for a table (:func:`kitlib.course.diff_rows.short_name`); a mangled C++
    symbol (``_ZN17cutlass__5x_cudnn6KernelINS_4conv6kernel23ImplicitGemm…``) as the names it
    nests, templates as ``<…>``: ``cutlass__5x_cudnn::Kernel<conv::kernel::ImplicitGemmConvolution<…>>``."""
    from ..diff_rows import short_name
    s = str(name)
    if not s.startswith("_ZN"):
        return short_name(s, width)
    i, levels = 3, [[]]
    while i < len(s) and len(levels) <= 2:
        ch = s[i]
        if ch.isdigit():
            j = i
            while j < len(s) and s[j].isdigit():
                j += 1
            n = int(s[i:j])
            levels[-1].append(s[j:j + n])
            i = j + n
        elif ch == "I":                       # a template's arguments open
            levels.append([])
            i += 1
        elif ch == "S":                       # a substitution (S_, S0_…): a name given before
            i = s.find("_", i) + 1 or len(s)
        else:                                 # N (a nested name), L (a literal)…: nothing to show
            i += 1
    outer, *inner = ["::".join(p) for p in levels if p]
    shown = outer + "".join(f"<{n}" for n in inner) + ("<…>" if inner else "") + ">" * len(inner)
    return shown if len(shown) <= width else shown[:width - 1] + "…"


#: The kernel names the forward convolutions run as in profiler_5step (cuDNN's implicit GEMM).
FPROP = "xmma_fprop"


def show_conv_kernel_names(trace) -> None:
    """Print what ``ncu -k regex:conv`` would select in ``trace`` (lesson 11's outcome of
    ``conv_kernels_named_conv``): the kernel names containing ``conv`` with their launches
    (readable names; the mangled symbol the trace stores named under), the forward
    convolutions' own kernels (:data:`FPROP`) and how many of them say ``conv``, the convolution
    operators' kernels per step (:func:`conv_kernels_named_conv`), and a filter written from the
    names."""
    from ..labels import print_table
    from ...units import print_wrapped
    kernels = trace.gpu[trace.gpu["kind"] == "kernel"]
    per_name = kernels["name"].value_counts()
    named = per_name[per_name.index.str.contains("conv", regex=False)]
    print_table(named.rename(readable_kernel_name).rename_axis("kernel names with 'conv' (launches)"))
    for n in (n for n in named.index if str(n).startswith("_Z")):
        print_wrapped(f"{readable_kernel_name(n)} is stored in the trace as a mangled C++ symbol "
                      f"({n[:32]}…): c++filt prints it whole")
    fprop = per_name[per_name.index.str.contains(FPROP, regex=False)]
    print(f"{FPROP} kernels (forward convolutions): {len(fprop)} names, {fprop.sum()} "
          f"launches; names with 'conv' among them: {fprop.index.str.contains('conv', regex=False).sum()}")
    c = conv_kernels_named_conv(trace)
    print_wrapped(f"kernels the convolution operators launched: {c['kernels'] / c['steps']:g} a step; "
                  f"with 'conv' in their name: {c['named_conv'] / c['steps']:g} a step, "
                  f"{c['names']} over {c['steps']} steps")
    print_wrapped(f"a filter written from these names, for the hot forward convolution: ncu -k regex:{FPROP} "
                  "--launch-skip 100 --launch-count 1 --section SpeedOfLight --section Occupancy python train.py")
    print_wrapped("Read it: kitlib/course/exercises/l11.py::show_conv_kernel_names (the names: "
                  "trace.gpu's kernels, value_counts() of their names, those that contain 'conv' and "
                  f"'{FPROP}'; the operators' kernels: conv_kernels_named_conv, the chain of lesson 02)")


#: How Nsight Systems ties a kernel to its operator (the "both, differently" follow-up).
HOW_CHOICES = ["the external id", "the NVTX range open on the launching thread",
               "the kernel's name", "the stream the kernel ran on", "nothing: Nsight Systems cannot tie them"]


def ncu_kernel_names(path=None) -> list:
    """The kernel names of the ``ncu`` reference CSV, one per profiled kernel, in order."""
    from ...readers.bundle import open_capture
    from ...readers.ncu import load_ncu_csv
    path = path or open_capture("ncu").file("conv_kernels_speed_of_light.csv")
    tidy = load_ncu_csv(path)
    return tidy.groupby("kernel_id", sort=True)["kernel_name"].first().tolist()


def report_collectors(sqlite_path=None) -> dict:
    """What an Nsight Systems export (default ``nsys_8step``'s) can answer, from its SQLite: dict of
    ``context_switches`` (a ``SCHED_EVENTS`` table), ``sched_events`` (its rows), ``ctxsw``
    (``LINUX_PERF_OPTIONS:COLLECT_CPU_CTXSW_TRACE`` or None), ``fork_before_exec``
    (``TRACE_AFTER_FORK_BEFORE_EXEC``), ``workers`` (``pt_data_worker`` pids), ``traced_pids``
    (with OS-runtime or CUDA API rows), ``workers_traced``."""
    from ...readers.bundle import open_capture
    path = sqlite_path or open_capture("nsys_8step").file("report.sqlite")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        meta = dict(con.execute("SELECT name, value FROM META_DATA_CAPTURE").fetchall())
        workers = {pid for pid, name in con.execute("SELECT pid, name FROM PROCESSES") if name == "pt_data_worker"}
        sched = con.execute("SELECT COUNT(*) FROM SCHED_EVENTS").fetchone()[0] if "SCHED_EVENTS" in tables else 0
        traced = set()
        for t in ("OSRT_API", "CUPTI_ACTIVITY_KIND_RUNTIME"):
            if t in tables:
                traced |= {r[0] for r in con.execute(f"SELECT DISTINCT (globalTid >> 24) & 16777215 FROM {t}")}
    finally:
        con.close()
    return {"context_switches": "SCHED_EVENTS" in tables, "sched_events": sched,
            "ctxsw": meta.get("LINUX_PERF_OPTIONS:COLLECT_CPU_CTXSW_TRACE"),
            "fork_before_exec": meta.get("TRACE_AFTER_FORK_BEFORE_EXEC") == "true",
            "workers": sorted(workers), "traced_pids": sorted(traced), "workers_traced": bool(workers & traced)}


def questions(capture=None, ncu_csv=None, nsys_sqlite=None, public_path=None) -> Exercises:
    """Questions of lesson 11 (``capture`` ignored) from the ``ncu`` CSV and ``nsys_8step`` SQLite
    (default: the references), the transfer on ``public_path`` (default lesson 09's; left out when absent)."""
    names = ncu_kernel_names(ncu_csv)
    holds_conv = any(CONV_KERNEL.search(n) for n in names)
    shown = ", ".join(dict.fromkeys(re.sub(r"\(.*", "", n).replace("void ", "") for n in names))
    from ...readers.bundle import open_capture
    c = conv_kernels_named_conv(open_capture("profiler_5step").trace)
    bucket = next(label for bound, label in CONV_SHARE_CHOICES if c["share"] < bound)
    per = lambda n: f"{n / c['steps']:g}"  # noqa: E731
    named = ", ".join(f"{name} ({per(n)} a step)" for name, n in c["names"].items())
    qs = [Question(
        "conv_kernels_named_conv", f"The ncu recording's filter, -k regex:conv, caught {len(names)} launches of "
                                   f"{shown}: {'a convolution' if holds_conv else 'no convolution'} (lesson 08). "
                                   "Predict: of the kernels the convolution operators (aten::cudnn_convolution "
                                   "forward, aten::convolution_backward) launch in a training step, how many have "
                                   "'conv' in their name? ("
                                   + ", ".join(f"'{label}'" for _, label in CONV_SHARE_CHOICES[:-1])
                                   + f" or '{CONV_SHARE_CHOICES[-1][1]}')", bucket,
        f"{bucket}: {per(c['named_conv'])} of {per(c['kernels'])} a step ({c['share']:.1%}) in profiler_5step: "
        f"{named}. The kernels that compute a convolution are named after their algorithm "
        "(sm90_xmma_fprop_implicit_gemm_…, …dgrad…, …wgrad…, cutlass and GEMM kernels): a name filter "
        "matches names, not work. Write a kernel filter from the names the timeline shows.",
        kind="predict", choices=[label for _, label in CONV_SHARE_CHOICES],
        where="profiler_5step's kernels launched by the two convolution operators, by name",
        traps=[(t, m) for t, m in [
            ("none", f"some do: {named}; the ncu recording stopped after the first {len(names)} matches."),
            ("about half", f"fewer: {per(c['named_conv'])} of {per(c['kernels'])} a step."),
            ("most", "the kernels that compute a convolution are named after their algorithm (xmma_fprop, dgrad, "
                     "wgrad, gemm), not 'conv'.")] if t != bucket])]
    for key, q, tools, view, why in ROUTES:
        both = frozenset(tools) == frozenset(BOTH)
        answer = "both" if both else tools[0]
        qs.append(Question(key, q, answer, f"{answer} — view: {view}. Why: {why}.", kind="recall",
                           normalise=lambda a: tool_set(a), choices=list(TOOLS) + ["both"],
                           traps=_route_traps(tools), accept=_accepts(tools), offered=lambda a: bool(tool_set(a))))
    qs.insert(2, Question(
        "op_of_kernel_how", "A kernel in an Nsight Systems report recorded with emit_nvtx: what, if "
                            "anything, ties it to the PyTorch operator that asked for it?",
        HOW_CHOICES[1], "the correlation id links launch and kernel in both tools; the external id exists only in "
                        "torch.profiler's trace. emit_nvtx pushes one NVTX range per operator on the thread that "
                        "runs it, so the operator of a kernel is the innermost range open on the launching thread "
                        "when its launch ran (lesson 09's nsys_emit_nvtx).",
        kind="compute", choices=HOW_CHOICES,
        traps=[(HOW_CHOICES[0], "Nsight Systems' export has no external ids: those are torch.profiler's."),
               (HOW_CHOICES[2], "a kernel's name says which library code ran, not which operator asked for it."),
               (HOW_CHOICES[3], "many operators' kernels share one stream."),
               (HOW_CHOICES[4], "the nsys_emit_nvtx export above holds one NVTX range per operator, on the "
                                "thread that runs it: what is open there when a kernel's launch runs?")]))
    rep = report_collectors(nsys_sqlite)
    from .l09 import public_export_path
    pub_path = public_path if public_path is not None else public_export_path()
    if pub_path is not None and __import__("pathlib").Path(pub_path).exists():
        pub = report_collectors(pub_path)
        qs.append(Question(
            "public_context_switches", "Transfer, to a report the lesson has not opened: the public CloverLeaf "
                                       "export of lesson 09 (l09.public_export_path()). From its own capture "
                                       "settings and tables, can it say when its threads were descheduled? "
                                       "(yes/no)", pub["context_switches"],
            ("yes: " if pub["context_switches"] else "no: ") + "its export has "
            + (f"a SCHED_EVENTS table ({pub['sched_events']:,} rows), and its META_DATA_CAPTURE has "
               f"LINUX_PERF_OPTIONS:COLLECT_CPU_CTXSW_TRACE = {pub['ctxsw']}: it was recorded with context switches "
               "on" if pub["context_switches"] else "no SCHED_EVENTS table: it was recorded without context switches")
            + (", unlike nsys_8step (--cpuctxsw=none, no such table)." if not rep["context_switches"] else "."),
            kind="transfer", where="the export's tables (sqlite_master) and META_DATA_CAPTURE",
            traps=[(not pub["context_switches"],
                    "that is nsys_8step's answer; read this export's own tables: look for SCHED_EVENTS and the "
                    "capture setting COLLECT_CPU_CTXSW_TRACE." if pub["context_switches"] else
                    "look for the table context switches would fill (SCHED_EVENTS) among the export's tables.")]))
    qs.append(Question(
        "nsys8_worker_calls", "From the table above: does the nsys_8step report hold the OS-runtime or CUDA "
                              "calls of the DataLoader's worker processes? (yes/no)", rep["workers_traced"],
        f"the export lists {len(rep['workers'])} pt_data_worker processes, but only process(es) "
        f"{', '.join(map(str, rep['traced_pids']))} have OS-runtime or CUDA rows: the workers are forked without "
        "exec, and TRACE_AFTER_FORK_BEFORE_EXEC is "
        + ("true" if rep["fork_before_exec"] else "false") + ". nsys profile --trace-fork-before-exec=true "
        "would trace them; torch.profiler records only the process it runs in.", kind="compute",
        traps=[(not rep["workers_traced"], "the processes are listed (PROCESSES), but are any of their calls "
                                           "there? Compare the pids with rows in OSRT_API.")]))
    return Exercises("Lesson 11 — your turn", qs)
