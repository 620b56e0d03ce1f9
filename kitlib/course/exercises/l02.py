"""Lesson 02's questions (which operation asked for this kernel?)."""
from __future__ import annotations

import functools

from . import Exercises, Question, misconception
from ...units import ns_to_us


@functools.lru_cache(maxsize=2)
def transfer_excerpt(path: str | None = None) -> tuple:
    """``(events, correlation)`` of the transfer question (:func:`kitlib.course.raw_views.time_trap_excerpt`),
    from ``fixed_batch`` by default; kept once read."""
    from ..raw_views import time_trap_excerpt, trace_events
    if path is None:                 # the recording in use: $KITLIB_REPLAY_DIR's, else the kit's
        from ...readers.bundle import find_recording
        path = str(find_recording("fixed_batch")[0] / "trace.json.gz")
    events, corr = time_trap_excerpt(trace_events(path))
    return tuple(events), int(corr)


def _op_name(s) -> str:
    """An operator name as typed: lower case, no quotes, ``aten::`` optional."""
    s = str(s).strip().strip("'\"").strip().lower()
    return s[6:] if s.startswith("aten::") else s


def questions(capture, excerpt: tuple | None = None) -> Exercises:
    """Questions of lesson 02 (which operation asked for this kernel?), from ``capture``: its first
    ``aten::cudnn_convolution`` of the first recorded step; ``excerpt`` as :func:`transfer_excerpt`."""
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
    api_calls = int((tr.launches["external_id"] == tr.ops.loc[row, "external_id"]).sum())
    device_us = round(float(ns_to_us(ls["gpu_dur_ns"].sum())), 3)
    launch_us = round(float(ns_to_us(ls["launch_dur_ns"].sum())), 3)
    long_row = ls.loc[ls["gpu_dur_ns"].idxmax()]
    after = bool(long_row["gpu_start_ns"] > op_end)
    gap_us = ns_to_us(long_row["gpu_start_ns"] - op_end)
    iv = sorted(zip(ls["gpu_start_ns"], ls["gpu_start_ns"] + ls["gpu_dur_ns"]))
    overlap_text = ("They ran one after another, without overlapping, so here the sum is also how long the device "
                    "was busy with them." if all(b[0] >= a[1] for a, b in zip(iv, iv[1:])) else
                    "Some of them overlap, so the device was busy with them for less than the sum (lesson 03).")
    events, corr = excerpt if excerpt is not None else transfer_excerpt()
    kernel = next(e for e in events if e.get("cat") != "cuda_runtime" and e.get("args", {}).get("correlation") == corr
                  and e.get("cat") != "cpu_op")
    launch = next(e for e in events if e.get("cat") == "cuda_runtime" and e["args"].get("correlation") == corr)
    owner = next(e for e in events if e.get("cat") == "cpu_op" and e["args"]["External id"] == launch["args"]["External id"])
    by_time = next((e for e in events if e.get("cat") == "cpu_op" and e is not owner
                    and e["ts"] <= kernel["ts"] <= e["ts"] + e["dur"]), None)
    time_traps = [(by_time["name"], f"that is what the host was running ({by_time['name']}) when the kernel started "
                                    f"({kernel['ts'] - launch['ts']:,.1f} µs after its launch): a match by time. "
                                    "Kernels run later than the call that launched them; follow the ids instead.")
                  ] if by_time is not None else []
    qs = [
        Question("launch_count", "Predict, before you read the raw events: how many kernel launches "
                                 "(cudaLaunchKernel…) did this one convolution operator make?", len(ls),
                 f"{len(ls)}: its external id appears on {len(ls)} launches: "
                 + ", ".join(f"{r.launch_name} {ns_to_us(r.launch_dur_ns):.3f} µs" for r in ls.itertuples())
                 + f". cuDNN converts the input's layout in small kernels before the convolution proper, so one "
                   "operator asked for several kernels.", kind="predict",
                 where="the raw events: the cuda_runtime events whose args.correlation reappears on a kernel",
                 traps=[misconception("one_op_one_kernel", 1, f"This operator made {len(ls)}."),
                        (api_calls, f"that counts every CUDA API call carrying the operator's external id "
                                    f"({api_calls}, error checks such as cudaGetErrorString included); only "
                                    f"{len(ls)} of them started GPU work: their correlation id reappears on a "
                                    "kernel.")]),
        Question("kernel_after_op", "Predict: does the convolution's longest kernel start on the GPU only after the "
                                    "operator has returned on the host? (yes/no)", after,
                 ("yes" if after else "no") + f": it starts {abs(gap_us):,.1f} µs "
                 + ("after" if after else "before") + " the operator's host interval ends. A launch only queues "
                 "work: the GPU runs it when the stream reaches it, here behind the work queued before it.",
                 kind="predict"),
        Question("longest_kernel_launch", "Which launch (1, 2, 3, …, in the order the host made them) produced the "
                                          "longest GPU event?", longest,
                 f"launch #{longest}: its kernel ran {ns_to_us(ls['gpu_dur_ns'].max()):.3f} µs on the GPU; the others: "
                 + ", ".join(f"#{r.launch_index} {short_name(r.gpu_name, 40)} {ns_to_us(r.gpu_dur_ns):.3f} µs"
                             for r in ls.itertuples() if r.launch_index != longest) + ".", kind="compute",
                 where="your joined table: the kernel's dur beside each launch, launches in order of ts"),
        Question("launch_to_kernel_id", "Which id links a launch to the kernel it started: 'correlation' or "
                                        "'external'?", "correlation",
                 "CUPTI gives the API call and its GPU activity the same correlation id; the external id "
                 "is the profiler's link from both to the operator (Kineto writes it on the launch and on the "
                 "kernel). Two events that share an external id need not be launch and kernel of each other.",
                 normalise=lambda s: str(s).strip().lower().replace(" id", "").replace("_id", ""),
                 choices=["correlation", "external"], kind="recall",
                 where="the raw events: which id does a launch share with exactly one kernel, and which one with "
                       "the operator and all its calls?"),
        Question("device_time_us", "How many µs did this operator's GPU events run on the device, all its launches "
                                   "together?", device_us,
                 f"{device_us:,.3f} µs: the durations of its {len(ls)} GPU events added up ("
                 + " + ".join(f"{ns_to_us(d):.3f}" for d in ls["gpu_dur_ns"]) + "). " + overlap_text, kind="compute",
                 unit="µs", where="the kernels' dur (µs) in the raw events, or gpu_us in the chain table",
                 traps=[misconception("launch_is_kernel_time", launch_us,
                                      f"{launch_us:,.3f} µs is the launches' host time; add up the GPU events' "
                                      "durations instead."),
                        misconception("one_op_one_kernel", round(float(ns_to_us(ls["gpu_dur_ns"].max())), 3),
                                      "That is launch #%d's kernel alone; the question asks for all %d." % (
                                          longest, len(ls))),
                        (round(float(op_us), 3), "that is the operator's host interval: CPU time, not device time.")]),
        Question("add_host_and_device", "Is the operator's host interval plus its GPU events' durations the "
                                        "operator's cost? (yes/no)", False,
                 f"no: the operator's host interval ({op_us:.3f} µs) is the CPU thread's time, its GPU events' "
                 f"durations ({device_us:,.3f} µs) are the GPU's; {when}. A sum of the two measures no resource's "
                 "time. Report host and device time separately.", kind="recall",
                 where="the Perfetto-style picture: the operator's slice on the thread track, its kernels on the "
                       "stream track"),
        Question("queue_delay_us", "How many µs after the operator's last launch began did that launch's "
                                   "kernel start on the GPU?",
                 round(delay_us, 3),
                 f"GPU start − launch start = {delay_us:,.3f} µs: the kernel waited in the stream's queue "
                 "behind earlier work. A launch returning is not the kernel running.", kind="compute", unit="µs",
                 where="the chain table: gpu_at_us − launch_at_us of the last launch (or the two ts in the raw events)",
                 traps=[(round(from_end_us, 3), "you measured from the launch's end; the question asks from the "
                                                "moment the launch began.")]),
        Question("kernel_operator_transfer", f"In the excerpt of another recording (fixed_batch), which operator "
                                             f"launched the GPU event with correlation {corr}?", owner["name"],
                 f"{owner['name']}: the GPU event's correlation {corr} is also on a {launch['name']} call, whose "
                 f"External id {launch['args']['External id']} is the operator's ({owner['name']}). The kernel "
                 f"carries that External id itself, so one id would do.", kind="transfer",
                 normalise=_op_name, where="the excerpt: correlation → the cuda_runtime event → its External id → "
                                           "the cpu_op with that External id",
                 traps=time_traps),
    ]
    return Exercises("Lesson 02 — your turn", qs)
