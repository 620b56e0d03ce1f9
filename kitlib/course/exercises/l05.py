"""Lesson 05's questions (is it many small calls or a few large ones?)."""
from __future__ import annotations

import statistics

from . import Exercises, Question
from ...units import ns_to_ms, ns_to_us

#: The CPU measurement of record_shapes' cost (tools/measure_record_shapes.py), in the reference folder.
RECORD_SHAPES_RESULT = ("record_shapes_cpu", "result.json")


def record_shapes_cost() -> dict:
    """The record_shapes measurement's figures per setting (False/True): ``runs``, ``median_step_ms``,
    ``rss_growth_mib`` (median peak-RSS growth, MiB) and its mean, ``peak_allocated_bytes`` (max),
    ``copy_events`` and ``json_mb`` (median compact-JSON size, MB)."""
    from ...readers.bundle import reference_dir
    from ...readers.files import read_json_file
    doc = read_json_file(reference_dir().joinpath(*RECORD_SHAPES_RESULT))
    out = {"runs": doc["runs"], "settings": doc["settings"], "machine": doc["machine"]}
    for on in (False, True):
        runs = [r for r in doc["runs"] if r["record_shapes"] is on]
        out.setdefault("median_step_ms", {})[on] = statistics.median(t / 1e6 for r in runs for t in r["step_ns"])
        growth = [(r["peak_rss_kib"]["recording"] - r["peak_rss_kib"]["before_profiler"]) / 1024 for r in runs]
        out.setdefault("rss_growth_mib", {})[on] = statistics.median(growth)
        out.setdefault("rss_growth_mean_mib", {})[on] = statistics.mean(growth)
        out.setdefault("peak_allocated_bytes", {})[on] = max(r["peak_allocated_bytes"] for r in runs)
        out.setdefault("copy_events", {})[on] = sorted({r["copy_events"] for r in runs})
        out.setdefault("json_mb", {})[on] = statistics.median(r["json_bytes"] / 1e6 for r in runs)
    return out


#: The recording whose printed by-shape table opens the lesson (another recording than the one asked about).
OTHER_TABLE = "profiler_5step"


def _other_top_ms(capture):
    """Device ms of aten::cudnn_convolution's most expensive shape in :data:`OTHER_TABLE`, or None
    when ``capture`` is that recording."""
    from ...analyses.chain import chain
    from ...analyses.events import op_events
    from ...analyses.grouping import shape_table
    from ...readers.bundle import open_capture
    if capture.name == OTHER_TABLE:
        return None
    tr = open_capture(OTHER_TABLE).trace
    table = shape_table(tr, "aten::cudnn_convolution", events=op_events(tr, chain(tr)))
    return ns_to_ms(table.iloc[0]["device_total_ns"])


def questions(capture) -> Exercises:
    """Questions of lesson 05 from ``capture`` (recorded with ``record_shapes``) and the record_shapes
    CPU measurement: ``aten::cudnn_convolution``, ``aten::add_`` and the first not channels-last
    ``aten::threshold_backward``."""
    from ...analyses.chain import chain, first_op
    from ...analyses.events import op_events
    from ...analyses.grouping import conv_inputs, memory_layout, shape_table
    tr = capture.trace
    ev = op_events(tr, chain(tr))
    conv = shape_table(tr, "aten::cudnn_convolution", events=ev)
    add = shape_table(tr, "aten::add_", events=ev)
    step = int(tr.steps["step"].iloc[0]) if len(tr.steps) else None
    first = conv_inputs(tr, first_op(tr, "aten::cudnn_convolution", step=step))
    x, w = first.loc["input", "shape"], first.loc["weight", "shape"]
    top, second = conv.iloc[0], conv.iloc[min(1, len(conv) - 1)]
    busiest = conv.sort_values("device_per_call_ns", ascending=False).iloc[0]
    many = add.sort_values("count", ascending=False).iloc[0]
    big = add.iloc[0]
    ratio = big["device_per_call_ns"] / many["device_per_call_ns"] if many["device_per_call_ns"] else float("nan")
    # the lesson opens on another recording's printed table (OTHER_TABLE), whose convolution row is that
    # recording's most expensive shape: the figure a learner copies from the wrong table
    other = _other_top_ms(capture)
    qs = [
        Question("conv_shapes", f"Predict: ResNet-50 runs {int(conv['count'].sum()) // max(len(tr.steps), 1)} "
                                "convolutions a step. Into how many distinct input-shape groups do "
                                "aten::cudnn_convolution's calls fall (layers with identical shapes merge)?",
                 len(conv), f"group_ops(by='input_shape') gives {len(conv)} rows for it: one name, "
                 f"{int(conv['count'].sum())} calls spread over {len(conv)} shapes. ResNet-50 repeats its "
                 "bottleneck blocks, so many layers share a shape.", kind="predict",
                 where="the by-hand grouping's row count"),
        Question("first_conv_filters", "How many filters does the first convolution's weight hold?", int(w[0]),
                 f"the weight's shape is {w}: {w[0]} filters, each {w[1]} channels × {w[2]}×{w[3]}; the input "
                 f"{x} is {x[0]} images of {x[1]} channels, {x[2]}×{x[3]} pixels.", kind="recall",
                 where="the first convolution's Input Dims, second entry (the weight)"),
        Question("top_shape_ms", "How many ms of device time did aten::cudnn_convolution's most expensive "
                                 "shape (by total device time) take over the recording? The table shows count "
                                 "and time per call.", round(ns_to_ms(top["device_total_ns"]), 3),
                 f"{top['first_input']}…: {top['count']} calls × {ns_to_us(top['device_per_call_ns']):,.1f} µs = "
                 f"{ns_to_ms(top['device_total_ns']):,.3f} ms, {top['device_share']:.1%} of the operator's device time.",
                 kind="compute", unit="ms", where="the shape table's first row: count × device_per_call_us",
                 traps=[(round(ns_to_ms(top["device_per_call_ns"]), 3), "that is one call; multiply by the count."),
                        (round(ns_to_ms(second["device_total_ns"]), 3), "that is the second row; the table is "
                                                                        "sorted by total device time.")]
                 + ([(round(other, 3), f"that is {OTHER_TABLE}'s figure, the recording with the data loader whose "
                                       "printed table opens the lesson; the question asks about this lesson's "
                                       f"recording, {capture.name}: its shape table's first row.")]
                    if other is not None else [])),
        Question("add_call_ratio", "aten::add_: how many times longer on the GPU is one call of its most "
                                   "expensive shape (by total device time) than one call of its most frequent "
                                   "shape?", round(float(ratio), 1),
                 f"most expensive by total device time {big['first_input']}: {ns_to_us(big['device_per_call_ns']):,.1f} "
                 f"µs per call ({big['count']} calls); most frequent {many['first_input']}: "
                 f"{ns_to_us(many['device_per_call_ns']):,.2f} µs per call ({many['count']} calls). Same name, "
                 "different problems: a few large calls and many tiny ones.", kind="compute",
                 where="the aten::add_ shape table, column device_per_call_us: first row ÷ the row with the "
                       "largest count"),
    ]
    ops = tr.ops[tr.ops["name"] == "aten::add_"]
    tensor = ops[ops["input_dims"].map(lambda d: bool(d) and d[0] != [])]
    bw_tids = set(tr.ops.loc[tr.ops["name"] == "aten::convolution_backward", "tid"])
    n_steps = max(len(tr.steps), 1)
    on_autograd = int(tensor["tid"].isin(bw_tids).sum())
    if bw_tids and len(tensor):
        qs.append(Question("add_autograd_per_step", "Per step, how many tensor (not 0-d scalar) aten::add_ calls "
                                                    "run on the autograd thread?",
                           on_autograd // n_steps if on_autograd % n_steps == 0 else round(on_autograd / n_steps, 2),
                           f"{on_autograd} of {len(tensor)} tensor calls over {n_steps} steps = "
                           f"{on_autograd / n_steps:g} per step: not residual additions of the forward pass (those "
                           "run on the main thread, one per bottleneck block) but gradient sums in backward, where "
                           "a tensor that fed two paths receives a gradient from each.", kind="compute",
                           where="the crosstab's autograd-thread column, All row, divided by the steps",
                           traps=[(round(len(tensor) / n_steps, 2), "that counts both threads; the question asks "
                                                                     "about the autograd thread only."),
                                  (on_autograd, "that is the whole recording; the question asks per step.")]))
    tb = tr.ops[(tr.ops["name"] == "aten::threshold_backward")
                & tr.ops["input_strides"].map(lambda s: bool(s) and s[0] is not None and len(s[0]) == 4)]
    if len(tb):
        layouts = [memory_layout(d[0], s[0]) for d, s in zip(tb["input_dims"], tb["input_strides"])]
        i = next((k for k, lay in enumerate(layouts) if lay != "channels_last"), 0)
        shape, strides = tb["input_dims"].iloc[i][0], tb["input_strides"].iloc[i][0]
        lay = layouts[i]
        n, ch, h, wd = shape
        qs.append(Question("grad_layout", f"Another tensor of this recording: an aten::threshold_backward call "
                                          f"(the backward of a ReLU) received a first input of shape {shape} with "
                                          f"Input Strides {strides}. How is it laid out in memory? "
                                          "('channels_last', 'contiguous' or 'other')", lay,
                           f"strides {strides}: channels-last would be {[h * wd * ch, 1, wd * ch, ch]} (C's stride "
                           f"1), contiguous NCHW {[ch * h * wd, h * wd, wd, 1]} (W's stride 1). "
                           + ("So even in a channels-last model, some gradients arrive NCHW-contiguous (here the "
                              "average pool's backward expands its gradient into a fresh contiguous tensor)."
                              if lay == "contiguous" else ""),
                           choices=["channels_last", "contiguous", "other"], kind="transfer",
                           where="the strides: which dimension has stride 1?",
                           traps=[("channels_last", f"the model is channels-last, but this tensor's channel stride "
                                                    f"is {strides[1]}, not 1: read the strides, not the model's "
                                                    "setting.")] if lay != "channels_last" else []))
    try:
        cost = record_shapes_cost()
    except Exception:          # noqa: BLE001 — the measurement file is optional in a live run's folder
        cost = None
    if cost:
        grew = cost["peak_allocated_bytes"][True] > cost["peak_allocated_bytes"][False]
        g = cost["rss_growth_mib"]
        rss = g[True] - g[False]
        mean_rss = cost["rss_growth_mean_mib"][True] - cost["rss_growth_mean_mib"][False]
        qs.append(Question("shapes_allocator_peak", "Predict: PyTorch's documentation warns that with "
                                                    "record_shapes=True the profiler holds references to tensors, "
                                                    "which may add tensor copies. In the CPU measurement, is the "
                                                    "allocator's peak (profile_memory's largest Total Allocated) "
                                                    "higher with shapes than without? (yes/no)", bool(grew),
                           f"peak allocated {cost['peak_allocated_bytes'][False]:,} bytes without shapes, "
                           f"{cost['peak_allocated_bytes'][True]:,} with; aten::copy_/clone events "
                           f"{cost['copy_events'][False]} vs {cost['copy_events'][True]}. "
                           + ("In this workload the tensors the step allocates were not held longer and no copies "
                              "were added. What did grow is the process's resident memory while recording: "
                              f"{g[False]:,.0f} MiB without shapes, {g[True]:,.0f} MiB with (medians)."
                              if not grew else "Recording shapes kept tensors alive longer here."),
                           kind="predict", where="the measurement table's peak_allocated_MB and copy_events columns"))
        qs.append(Question("shapes_rss_mib", "From the measurement's table: by how many MiB more did the process's "
                                             "resident memory grow while recording with record_shapes=True than "
                                             "without? (the median of each setting's runs, then the difference)",
                           round(rss, 1),
                           f"medians {g[True]:,.1f} − {g[False]:,.1f} MiB = {rss:,.1f} MiB. The likely holder is the "
                           f"profiler's own records: with shapes, each of the {cost['runs'][0]['events']:,} events "
                           "carries its inputs' shapes, strides and types (a hypothesis: recording twice as many "
                           "steps would settle it, if the difference doubles).", kind="compute",
                           unit="MiB", where="the measurement table's rss_growth_mib column: the median per setting",
                           traps=[(round(mean_rss, 1), "that difference is of the means; the question asks for the "
                                                       "medians (with four runs: the mean of the middle two).")]
                           if abs(mean_rss - rss) > 0.002 * abs(rss) else []))
    return Exercises("Lesson 05 — your turn", qs)
