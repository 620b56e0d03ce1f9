"""Lesson 05's questions (is it many small calls or a few large ones?)."""
from __future__ import annotations

from . import Exercises, Question
from ...units import ns_to_ms, ns_to_us


def questions(capture) -> Exercises:
    """Questions of lesson 05, computed from ``capture`` (a torch.profiler bundle
    recorded with ``record_shapes``).

    The operators studied: ``aten::cudnn_convolution`` (its first call in the first
    recorded step) and ``aten::add_``.
    """
    from ...analyses.chain import chain, first_op
    from ...analyses.events import op_events
    from ...analyses.grouping import conv_inputs, shape_table
    tr = capture.trace
    ev = op_events(tr, chain(tr))
    conv = shape_table(tr, "aten::cudnn_convolution", events=ev)
    add = shape_table(tr, "aten::add_", events=ev)
    step = int(tr.steps["step"].iloc[0]) if len(tr.steps) else None
    first = conv_inputs(tr, first_op(tr, "aten::cudnn_convolution", step=step))
    x, w = first.loc["input", "shape"], first.loc["weight", "shape"]
    top = conv.iloc[0]
    many = add.sort_values("count", ascending=False).iloc[0]
    big = add.iloc[0]
    ratio = big["device_per_call_ns"] / many["device_per_call_ns"] if many["device_per_call_ns"] else float("nan")
    qs = [
        Question("conv_shapes", "How many distinct input-shape groups does aten::cudnn_convolution have?",
                 len(conv), f"group_ops(by='input_shape') gives {len(conv)} rows for it: one name, "
                 f"{int(conv['count'].sum())} calls spread over {len(conv)} shapes.", tolerance=0),
        Question("first_conv_filters", "How many filters does the first convolution's weight hold?", int(w[0]),
                 f"the weight's shape is {w}: {w[0]} filters, each {w[1]} channels × {w[2]}×{w[3]}; the input "
                 f"{x} is {x[0]} images of {x[1]} channels, {x[2]}×{x[3]} pixels.", tolerance=0),
        Question("first_conv_channels_last", "Is the first convolution's input stored channels-last? (yes/no)",
                 first.loc["input", "layout"] == "channels_last",
                 f"its strides are {first.loc['input', 'strides']}: the channel stride is "
                 f"{first.loc['input', 'strides'][1] if first.loc['input', 'strides'] else '?'}, so the channels of "
                 "one pixel sit next to each other in memory. The shape alone could not tell you."),
        Question("top_shape_ms", "How many ms of device time did aten::cudnn_convolution's most expensive "
                                 "shape take in total?", round(ns_to_ms(top["device_total_ns"]), 3),
                 f"{top['first_input']}…: {top['count']} calls × {ns_to_us(top['device_per_call_ns']):,.1f} µs = "
                 f"{ns_to_ms(top['device_total_ns']):,.3f} ms, {top['device_share']:.1%} of the operator's device time.",
                 tolerance=0.02),
        Question("add_call_ratio", "aten::add_: how many times longer on the GPU is one call of its most "
                                   "expensive shape (by total device time) than one call of its most frequent "
                                   "shape?",
                 round(float(ratio), 1),
                 f"most expensive by total device time {big['first_input']}: {ns_to_us(big['device_per_call_ns']):,.1f} µs per call "
                 f"({big['count']} calls); most frequent {many['first_input']}: "
                 f"{ns_to_us(many['device_per_call_ns']):,.2f} µs per call ({many['count']} calls). Same name, "
                 "different problems: a few large calls and many tiny ones.", tolerance=0.05),
    ]
    ops = tr.ops[tr.ops["name"] == "aten::add_"]
    tensor = ops[ops["input_dims"].map(lambda d: bool(d) and d[0] != [])]
    bw_tids = set(tr.ops.loc[tr.ops["name"] == "aten::convolution_backward", "tid"])
    n_steps = max(len(tr.steps), 1)
    on_autograd = int(tensor["tid"].isin(bw_tids).sum())
    if bw_tids and len(tensor):
        qs.append(Question("add_autograd_per_step", "Per step, how many tensor (not 0-d scalar) aten::add_ calls "
                                                    "run on the autograd thread?", round(on_autograd / n_steps, 2),
                           f"{on_autograd} of {len(tensor)} tensor calls over {n_steps} steps = "
                           f"{on_autograd / n_steps:g} per step: not residual additions of the forward pass (those "
                           "run on the main thread, one per bottleneck block) but gradient sums in backward, where "
                           "a tensor that fed two paths receives a gradient from each.", tolerance=0,
                           traps=[(round(len(tensor) / n_steps, 2), "that counts both threads; the question asks "
                                                                     "about the autograd thread only."),
                                  (on_autograd, "that is the whole recording; the question asks per step.")]))
    return Exercises("Lesson 05 — your turn", qs)
