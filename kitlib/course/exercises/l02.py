"""Lesson 02's questions."""
from __future__ import annotations

from . import Exercises, Question
from ...units import ns_to_us


def questions(capture) -> Exercises:
    """Questions of lesson 02 (which operation asked for this kernel?), from ``capture``.

    The operator studied is the first ``aten::cudnn_convolution`` of the capture's
    first recorded step (``ProfilerStep#2`` in the reference).
    """
    from ...analyses.chain import first_op, launches_of
    from ...plots import short_name
    tr = capture.trace
    step = int(tr.steps["step"].iloc[0]) if len(tr.steps) else None
    row = first_op(tr, "aten::cudnn_convolution", step=step)
    ls = launches_of(tr, row)
    longest = int(ls.loc[ls["gpu_dur_ns"].idxmax(), "launch_index"])
    last = ls.iloc[-1]
    delay_us = ns_to_us(last["gpu_start_ns"] - last["launch_start_ns"])
    op_us = ns_to_us(tr.ops.loc[row, "dur_ns"])
    op_end = int(tr.ops.loc[row, "start_ns"] + tr.ops.loc[row, "dur_ns"])
    first_gpu_after_us = ns_to_us(int(ls["gpu_start_ns"].min()) - op_end)
    when = (f"here the first of its GPU events starts {first_gpu_after_us:,.1f} µs after the operator's host "
            "interval has ended, so the two do not even overlap" if first_gpu_after_us > 0 else
            f"here its first GPU event starts {-first_gpu_after_us:,.1f} µs before the operator's host interval ends")
    from_end_us = ns_to_us(last["gpu_start_ns"] - last["launch_start_ns"] - last["launch_dur_ns"])
    qs = [
        Question("launch_count", "How many CUDA launches did this convolution operator make?", len(ls),
                 f"its external id appears on {len(ls)} launches: "
                 + ", ".join(f"{r.launch_name} {ns_to_us(r.launch_dur_ns):.3f} µs" for r in ls.itertuples()) + ".",
                 tolerance=0),
        Question("longest_kernel_launch", "Which launch (1, 2, 3, …) produced the longest GPU event?", longest,
                 f"launch #{longest}: its kernel ran {ns_to_us(ls['gpu_dur_ns'].max()):.3f} µs on the GPU; the others: "
                 + ", ".join(f"#{r.launch_index} {short_name(r.gpu_name, 40)} {ns_to_us(r.gpu_dur_ns):.3f} µs"
                             for r in ls.itertuples() if r.launch_index != longest) + ".", tolerance=0),
        Question("launch_to_kernel_id", "Which id links a launch to the kernel it started: 'correlation' or "
                                        "'external'?", "correlation",
                 "CUPTI gives the API call and its GPU activity the same correlation id; the external id "
                 "is the profiler's link from both to the operator (Kineto writes it on the launch and on the "
                 "kernel). Two events that share an external id need not be launch and kernel of each other.",
                 normalise=lambda s: str(s).strip().lower().replace(" id", "").replace("_id", ""),
                 choices=["correlation", "external"]),
        Question("add_host_and_device", f"Is {op_us:.3f} µs (operator, host) + {ns_to_us(ls['gpu_dur_ns'].sum()):.3f} µs "
                                        "(its kernels, device) the operator's cost? (yes/no)", False,
                 f"no: the operator's host interval is the CPU thread's time, its kernels' durations are the GPU's; "
                 f"{when}. A sum of the two measures no resource's time. Report host and device time separately."),
        Question("queue_delay_us", f"How many µs after launch #{len(ls)} began did its kernel start on the GPU?",
                 round(delay_us, 3),
                 f"gpu start − launch start = {delay_us:,.3f} µs: the kernel waited in the stream's queue "
                 "behind earlier work. A launch returning is not the kernel running.", tolerance=0.01,
                 traps=[(round(from_end_us, 3), "you measured from the launch's end; the question asks from the "
                                                "moment the launch began.")]),
    ]
    return Exercises("Lesson 02 — your turn", qs)
