"""Lesson 03's questions (which number answers my question?)."""
from __future__ import annotations

from . import Exercises, Question, misconception
from ...units import ns_to_ms


def questions(capture) -> Exercises:
    """Questions of lesson 03 (which number answers my question?), from ``capture`` (with
    ``record_function`` labels): its first recorded step; ``idle_ms`` its third (or last);
    ``excerpt_busy_us`` the public NCCL trace (:func:`kitlib.course.raw_views.nccl_excerpt`)."""
    import pandas as pd

    from ...analyses.chain import chain
    from ...analyses.four_measures import annotation_device_time, four_measures, self_total
    from ...analyses.intervals import busy_ns
    from ..raw_views import nccl_excerpt
    tr = capture.trace
    c = chain(tr)
    m = four_measures(tr, chain_df=c).set_index("measure")["value_ns"]
    steps = [int(s) for s in tr.steps["step"]] if len(tr.steps) else [None]
    step = steps[0]
    other = steps[min(2, len(steps) - 1)]
    mo = four_measures(tr, step=other, chain_df=c).set_index("measure")["value_ns"]
    idle, idle_sum, idle_kern = (ns_to_ms(mo["wall"] - mo[k]) for k in ("device_busy", "gpu_sum", "kernel_sum"))
    wall_o, busy_o = round(ns_to_ms(mo["wall"]), 3), round(ns_to_ms(mo["device_busy"]), 3)
    st = self_total(tr, kinds=("op",))
    op = "aten::convolution_backward" if (st["name"] == "aten::convolution_backward").any() else st["name"].iloc[0]
    row = st[st["name"] == op].iloc[0]
    # as the printed table shows them (ms to 3 decimals, i.e. µs): the answer is their difference,
    # so the explanation's arithmetic holds on the figures it prints
    total_ms, self_ms = round(ns_to_ms(row["total_ns"]), 3), round(ns_to_ms(row["self_ns"]), 3)
    children = round(total_ms - self_ms, 3)
    a = annotation_device_time(tr, c)
    fw = a[a["name"] == "forward"]
    span_ms, busy_ms = round(ns_to_ms(fw["span_ns"].sum()), 3), round(ns_to_ms(fw["busy_ns"].sum()), 3)
    more = "busy" if m["device_busy"] > m["gpu_sum"] else "sum" if m["gpu_sum"] > m["device_busy"] else "equal"
    work = tr.kernels
    w_sum, w_busy = int(work["dur_ns"].sum()), int(busy_ns(work))
    w_sum_ms, w_busy_ms = round(ns_to_ms(w_sum), 3), round(ns_to_ms(w_busy), 3)    # as printed
    ex = nccl_excerpt()
    ex_spans = pd.DataFrame({"start_ns": [round(e["ts"] * 1000) for e in ex],    # the raw µs, as whole ns
                             "dur_ns": [round(e["dur"] * 1000) for e in ex]})
    ex_union, ex_sum, ex_long = busy_ns(ex_spans) / 1000, sum(e["dur"] for e in ex), max(e["dur"] for e in ex)
    qs = [
        Question("total_sum_exceeds_wall", f"Predict: in step {step}, is the sum of every operator's total host "
                                           "time larger than the step's wall time? (yes/no)",
                 bool(m["host_ops_total_sum"] > m["wall"]),
                 f"summed totals {ns_to_ms(m['host_ops_total_sum']):,.3f} ms vs wall {ns_to_ms(m['wall']):,.3f} ms: "
                 "a total includes the operators it called, so nested work is added again for every "
                 f"enclosing operator (self times summed: {ns_to_ms(m['host_ops_self_sum']):,.3f} ms).",
                 kind="predict", where="the four measures table's host_ops_total_sum and wall rows"),
        Question("busy_or_sum", "Predict: for the GPU work of that step (kernels, copies and memsets), which is "
                                "larger: the device busy time (union) or the summed durations? "
                                "('busy', 'sum' or 'equal')", more,
                 f"busy {ns_to_ms(m['device_busy']):,.3f} ms, summed {ns_to_ms(m['gpu_sum']):,.3f} ms: the union counts "
                 "an overlap once; a sum can only be equal or larger"
                 + (f" (here on {c['stream'].nunique()} stream(s): some kernels start before the previous one "
                    "has ended)." if more == "sum" else "."), choices=["busy", "sum", "equal"], kind="predict",
                 traps=[("busy", "the union can never exceed the sum: it counts each moment once, the sum "
                                 "counts each event's whole duration.")]),
        Question("idle_ms", f"Step {other}: how many ms of its wall time was the GPU not busy with the work the "
                            "step launched (wall time minus device busy time)?", round(wall_o - busy_o, 3),
                 f"wall {wall_o:,.3f} ms − busy {busy_o:,.3f} ms = {wall_o - busy_o:,.3f} ms. "
                 f"Subtracting the summed durations instead ({ns_to_ms(mo['gpu_sum']):,.3f} ms) counts the "
                 "overlapping moments twice and leaves less idle time than there was.",
                 kind="compute", unit="ms", where="the per-step table's wall_ms and device_busy_ms columns",
                 traps=[misconception("busy_is_kernel_sum", round(idle_sum, 3),
                                      f"wall − summed GPU-event durations = {idle_sum:,.3f} ms; use the union."),
                        (round(idle_kern, 3), "that subtracts only the kernels' summed time: copies and memsets "
                                              "keep the GPU busy too, and the union counts overlaps once.")]),
        Question("children_ms", f"{op}, over the whole trace: how many ms of its total host time were spent in "
                                "what it called (nested operators and CUDA API calls), not in itself?",
                 children,
                 f"total {total_ms:,.3f} ms − self {self_ms:,.3f} ms = {children:,.3f} ms over {int(row['calls'])} calls: the total holds its children, the self time "
                 "does not.", kind="compute", unit="ms",
                 where="the profiler's printed table, columns 'CPU total' and 'Self CPU'",
                 traps=[(total_ms, "that is its total host time, children included; subtract the self time."),
                        (self_ms, "that is its self time: the time in itself, the opposite of what the "
                                  "question asks.")]),
        Question("forward_gpu_work_ms", f"The forward label's GPU-side spans add up to {span_ms:,.3f} ms. How many "
                                        "ms of that did its kernels actually keep the GPU busy?", round(busy_ms, 3),
                 f"{busy_ms:,.3f} ms: the span runs from the first to the last GPU operation launched under the "
                 f"label, so it also holds {span_ms - busy_ms:,.3f} ms of idle time between kernels.",
                 kind="compute", unit="ms", where="the per-span table's busy_ms column (add the spans)",
                 traps=[(round(span_ms, 3), "that is the spans' length, idle time included; the question asks for "
                                            "the time the kernels kept the GPU busy.")]),
        Question("gpu_overlap_ms", "Over the whole trace: the summed duration of the GPU events (kernels, "
                                   "copies, memsets) minus their union, in ms?",
                 round(w_sum_ms - w_busy_ms, 3),
                 f"summed {w_sum_ms:,.3f} ms − union {w_busy_ms:,.3f} ms = {w_sum_ms - w_busy_ms:,.3f} ms: the time during which GPU events overlapped, which a sum "
                 "counts twice.", kind="compute", unit="ms",
                 where="the whole-trace lines: summed GPU-event time and device busy (union)",
                 traps=[(w_sum_ms, "that is the sum itself; subtract the union."),
                        (w_busy_ms, "that is the union itself; the question asks for sum − union.")]),
        Question("excerpt_busy_us", "The ten raw GPU events shown above come from another trace (an A100 in a "
                                    "128-GPU NCCL job, two streams). How many µs was that GPU busy during them "
                                    "(device busy time)?", round(ex_union, 1),
                 f"the union of their [ts, ts + dur) intervals is {ex_union:,.0f} µs. The collective on stream "
                 f"{ex[0]['args']['stream']} covers most of the compute kernels of stream 7, which count once; "
                 f"their durations summed give {ex_sum:,.0f} µs, more time than passed.",
                 kind="transfer", unit="µs", where="the excerpt's ts and dur fields (merge the intervals)",
                 traps=[misconception("busy_is_kernel_sum", round(ex_sum, 1),
                                      f"summed, the ten durations give {ex_sum:,.0f} µs."),
                        (round(ex_long, 1), "that is the longest event alone; the kernels that run on after it "
                                            "ends keep the GPU busy too.")]),
    ]
    return Exercises("Lesson 03 — your turn", qs)
