"""Lesson 06's questions (which line of my code is responsible?)."""
from __future__ import annotations

from . import Exercises, Question
from ...units import ns_to_ms, ns_to_us


def questions(capture) -> Exercises:
    """Questions of lesson 06, computed from ``capture`` (a torch.profiler bundle
    recorded with ``with_stack``)."""
    from ...analyses.callsites import callsites, group_by_callsite, kernel_callsites
    from ...analyses.chain import chain
    from ...analyses.events import op_events
    tr = capture.trace
    c = chain(tr)
    table = callsites(tr, op_events(tr, c))
    k = kernel_callsites(tr, table, c)
    k = k[k["module_type"].notna()]
    hot = k.loc[k["gpu_dur_ns"].idxmax()]
    sites = group_by_callsite(tr, table=table)
    sites = sites[sites["user_frame"] != "(none)"]
    top = sites.iloc[0]
    bw = table[table["name"] == "aten::convolution_backward"]
    bw_tids = sorted(set(bw["tid"]))
    py = tr.ops[tr.ops["kind"] == "python"]
    frames_on_bw = int(py["tid"].isin(bw_tids).sum())
    qs = [
        Question("hot_kernel_module", "The longest GPU event launched inside a module: which kind of nn.Module launched it "
                                      "(e.g. Conv2d, BatchNorm2d, ReLU)?", hot["module_type"] or "(none)",
                 f"the kernel ({ns_to_us(hot['gpu_dur_ns']):,.1f} µs) was launched by {hot['op_name']}, called at "
                 f"{hot['user_frame']} inside {hot['module_path']}.",
                 normalise=lambda s: str(s).strip().lower().removeprefix("nn.").split("_")[0]),
        Question("top_line", "The call site with the most device time is a frame 'file(N): function'. "
                             "What is N?", int(top["user_frame"].split("(")[1].split(")")[0]),
                 f"{top['user_frame']}: {ns_to_ms(top['device_self_ns']):,.1f} ms of device time from "
                 f"{top['gpu_events']} GPU events. N is the first line of the function, not the statement: the "
                 "module frames inside it say which layer; and one function stands for every block that runs it.",
                 tolerance=0),
        Question("backward_python_frames", "How many Python frames did the profiler record on the thread that "
                                           "ran aten::convolution_backward?", frames_on_bw,
                 f"{frames_on_bw}: the backward pass runs on autograd's own thread (tid {bw_tids}), where no "
                 "Python runs. The stack of a backward operator is borrowed from the forward operator with the "
                 "same sequence number.", tolerance=0),
    ]
    return Exercises("Lesson 06 — your turn", qs)
