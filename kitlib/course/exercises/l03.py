"""Lesson 03's questions."""
from __future__ import annotations

from . import Exercises, Question
from ...units import ns_to_ms


def questions(capture) -> Exercises:
    """Questions of lesson 03 (which number answers my question?), from ``capture``.

    Parameters
    ----------
    capture : kitlib.readers.bundle.Capture
        A torch.profiler capture with ``record_function`` labels (live or recorded).
        The step studied is the capture's first recorded step.
    """
    from ...analyses.chain import chain
    from ...analyses.four_measures import annotation_device_time, four_measures, self_total
    tr = capture.trace
    c = chain(tr)
    m = four_measures(tr, chain_df=c).set_index("measure")["value_ns"]
    step = int(tr.steps["step"].iloc[0]) if len(tr.steps) else None
    st = self_total(tr, kinds=("op",))
    op = "aten::convolution_backward" if (st["name"] == "aten::convolution_backward").any() else st["name"].iloc[0]
    row = st[st["name"] == op].iloc[0]
    a = annotation_device_time(tr, c)
    fw = a[a["name"] == "forward"]
    span_ms, busy_ms = ns_to_ms(fw["span_ns"].sum()), ns_to_ms(fw["busy_ns"].sum())
    more = "busy" if m["device_busy"] > m["gpu_sum"] else "sum" if m["gpu_sum"] > m["device_busy"] else "equal"
    from ...analyses.intervals import busy_ns
    k = tr.kernels
    k_sum, k_busy = int(k["dur_ns"].sum()), int(busy_ns(k))
    qs = [
        Question("total_sum_exceeds_wall", f"In step {step}, is the sum of every operator's total host time "
                                           "larger than the step's wall time? (yes/no)",
                 bool(m["host_ops_total_sum"] > m["wall"]),
                 f"summed totals {ns_to_ms(m['host_ops_total_sum']):,.3f} ms vs wall {ns_to_ms(m['wall']):,.3f} ms: "
                 "a total includes the operators it called, so nested work is added again for every "
                 f"enclosing operator (self times summed: {ns_to_ms(m['host_ops_self_sum']):,.3f} ms)."),
        Question("busy_or_sum", "For the GPU work of that step, which is larger: the device busy time (union) or "
                                "the summed durations? ('busy', 'sum' or 'equal')", more,
                 f"busy {ns_to_ms(m['device_busy']):,.3f} ms, summed {ns_to_ms(m['gpu_sum']):,.3f} ms: the union counts "
                 "an overlap once; a sum can only be equal or larger"
                 + (f" (here on {c['stream'].nunique()} stream(s): some kernels start before the previous one "
                    "has ended)." if more == "sum" else "."), choices=["busy", "sum", "equal"]),
        Question("self_ms", f"What is the self host time of {op} over the whole trace, in ms?",
                 round(ns_to_ms(row["self_ns"]), 3),
                 f"total {ns_to_ms(row['total_ns']):,.3f} ms minus the time in what it called (nested operators and "
                 f"CUDA API calls) {ns_to_ms(row['children_ns']):,.3f} ms = {ns_to_ms(row['self_ns']):,.3f} ms over "
                 f"{int(row['calls'])} calls: the profiler table's 'Self CPU'."),
        Question("forward_gpu_work_ms", f"The forward label's GPU-side spans add up to {span_ms:,.3f} ms. How many "
                                        "ms of that did its kernels actually keep the GPU busy?", round(busy_ms, 3),
                 f"{busy_ms:,.3f} ms: the span runs from the first to the last GPU operation launched under the "
                 f"label, so it also holds {span_ms - busy_ms:,.3f} ms of idle time between kernels.",
                 traps=[(round(span_ms, 3), "that is the spans' length, idle time included; the question asks for "
                                            "the time the kernels kept the GPU busy.")]),
        Question("kernel_overlap_ms", "Over the whole trace, by how many ms does the summed kernel time exceed the "
                                      "kernels' union (the time two kernels ran at once, counted once more)?",
                 round(ns_to_ms(k_sum - k_busy), 3),
                 f"summed {ns_to_ms(k_sum):,.3f} ms − union {ns_to_ms(k_busy):,.3f} ms = "
                 f"{ns_to_ms(k_sum - k_busy):,.3f} ms: the time during which kernels overlapped, which a sum counts "
                 "twice.", tolerance=0.01,
                 traps=[(round(ns_to_ms(k_sum), 3), "that is the sum itself; subtract the union."),
                        (round(ns_to_ms(k_busy), 3), "that is the union itself; the question asks for sum − union.")]),
    ]
    return Exercises("Lesson 03 — your turn", qs)
