"""Lesson 06's questions (which line of my code is responsible?)."""
from __future__ import annotations

import re

from . import Exercises, Question
from ...units import ns_to_us

#: Ten raw events of another recording, for the transfer question: the Python frames open
#: around one ``aten::linear`` of a BERT forward pass (and one frame that had already ended),
#: copied field for field from AMD-AGI/TraceLens @ 674f3878 :
#: tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz (MIT licence; torch 2.6 on
#: an H100; ``Ev Idx`` left out). Also in ``tests/data/public-traces``.
BERT_EXCERPT = [
    {"ph": "X", "cat": "python_function", "name": "transformers/models/bert/modeling_bert.py(505): forward",
     "tid": 19392, "ts": 1419247333845.386, "dur": 508.907, "args": {"Python parent id": 222, "Python id": 224}},
    {"ph": "X", "cat": "python_function", "name": "nn.Module: BertSdpaSelfAttention_0", "tid": 19392,
     "ts": 1419247333848.706, "dur": 354.815, "args": {"Python parent id": 224, "Python id": 226, "Python module id": 0}},
    {"ph": "X", "cat": "python_function", "name": "torch/nn/modules/module.py(1743): _call_impl", "tid": 19392,
     "ts": 1419247333849.566, "dur": 353.545, "args": {"Python parent id": 226, "Python id": 227}},
    {"ph": "X", "cat": "python_function", "name": "transformers/models/bert/modeling_bert.py(364): forward",
     "tid": 19392, "ts": 1419247333853.936, "dur": 347.055, "args": {"Python parent id": 227, "Python id": 229}},
    {"ph": "X", "cat": "python_function", "name": "torch/nn/modules/module.py(1915): __getattr__", "tid": 19392,
     "ts": 1419247333857.016, "dur": 0.55, "args": {"Python parent id": 229, "Python id": 231}},
    {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear_0", "tid": 19392, "ts": 1419247333862.806,
     "dur": 75.641, "args": {"Python parent id": 229, "Python id": 232, "Python module id": 0}},
    {"ph": "X", "cat": "python_function", "name": "torch/nn/modules/module.py(1743): _call_impl", "tid": 19392,
     "ts": 1419247333863.706, "dur": 74.201, "args": {"Python parent id": 232, "Python id": 233}},
    {"ph": "X", "cat": "python_function", "name": "torch/nn/modules/linear.py(124): forward", "tid": 19392,
     "ts": 1419247333865.666, "dur": 71.831, "args": {"Python parent id": 233, "Python id": 235}},
    {"ph": "X", "cat": "python_function", "name": "<built-in function linear>", "tid": 19392,
     "ts": 1419247333867.796, "dur": 69.531, "args": {"Python parent id": 235, "Python id": 238}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "tid": 19392, "ts": 1419247333870.846, "dur": 65.361,
     "args": {"External id": 43}},
]

#: What lesson 06 says under the count of Python frames per thread, held back with it until
#: ``backward_python_frames`` is predicted (in the lesson's prose it gave the count away).
BACKWARD_CALL_SITES = (
    "Autograd's thread runs the backward pass in C++: unless a model writes a backward in Python (a custom "
    "autograd.Function), no Python frame opens there, and a backward operator has no stack of its own. Like the "
    "profiler, kitlib gives an operator inside an autograd node (ConvolutionBackward0) the stack of the forward "
    "operator with the same sequence number, so a backward convolution points at the forward layer it "
    "differentiates. The other GPU events without a call site (by operator, below) come from backward operators "
    "outside any autograd node: the aten::add_ that sum gradients (lesson 05) run inside an "
    "'autograd::engine::evaluate_function: ConvolutionBackward0' wrapper but outside the node itself, so there "
    "is no forward operator to borrow a stack from.")

#: What lesson 06 says under the five longest GPU events, held back with them until
#: ``hot_kernel_module`` is predicted (in the lesson's prose it pointed at the answer).
LONGEST_IN_A_TIE = (
    "Size alone does not make it the longest. The tensor the longest event launched inside a module writes, "
    "[128, 64, 112, 112], holds 102,760,448 values, exactly as many as each [128, 256, 56, 56] tensor of layer1 "
    "(the two products are equal), so it is the largest only in a tie. A call site can cost little in total and "
    "still hold the longest single kernel.")

_SOURCE_FRAME = re.compile(r"^(\S+)\((\d+)\): ")


def excerpt_callsite(events=BERT_EXCERPT) -> str:
    """The call site of the excerpt's operator: the innermost source-line frame open around it
    on its thread outside ``torch/`` (:mod:`kitlib.analyses.callsites`' rule)."""
    op = next(e for e in events if e["cat"] == "cpu_op")
    open_ = [e for e in events if e["cat"] == "python_function" and e["tid"] == op["tid"]
             and e["ts"] <= op["ts"] and e["ts"] + e["dur"] >= op["ts"] + op["dur"]]
    user = [e for e in open_ if _SOURCE_FRAME.match(e["name"]) and not e["name"].startswith("torch/")]
    return max(user, key=lambda e: e["ts"])["name"]


def _file_line(s) -> str:
    """``modeling_bert.py(364)`` from any answer naming a frame (a path, a function after it);
    else the answer lower-cased and stripped."""
    m = re.search(r"([\w.-]+\.py\(\d+\))", str(s))
    return m.group(1) if m else str(s).strip().lower()


def questions(capture) -> Exercises:
    """Questions of lesson 06 from ``capture`` (recorded ``with_stack``) and ``profiler_5step``
    (the share of the trace Python frames make)."""
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
    all_dev = float(sites["device_self_ns"].sum())
    named = sites[sites["user_frame"] != "(none)"]
    top = named.iloc[0]
    share = 100 * float(top["device_self_ns"]) / all_dev
    bw = table[table["name"] == "aten::convolution_backward"]
    bw_tids = sorted(set(bw["tid"]))
    py = tr.ops[tr.ops["kind"] == "python"]
    frames_on_bw = int(py["tid"].isin(bw_tids).sum())
    site = excerpt_callsite()
    qs = [
        Question("hot_kernel_module", "Predict: of the GPU events launched inside a module (one launched before "
                                      "the recording began has no operator, so no module, and is left out), "
                                      "which kind of nn.Module launched the longest (e.g. Conv2d, BatchNorm2d, "
                                      "ReLU, MaxPool2d)?",
                 hot["module_type"] or "(none)",
                 f"the kernel ({ns_to_us(hot['gpu_dur_ns']):,.1f} µs) was launched by {hot['op_name']}, called at "
                 f"{hot['user_frame']} inside {hot['module_path']}. The heaviest layer in total (the convolutions) "
                 "need not launch the single longest kernel.",
                 normalise=lambda s: str(s).strip().lower().removeprefix("nn.").split("_")[0], kind="predict",
                 where="the five longest GPU events, column module_path",
                 traps=[("Conv2d", "the convolutions take the most device time in total, over many kernels; the "
                                   "single longest kernel is another layer's.")]
                 if (hot["module_type"] or "") != "Conv2d" else []),
        Question("backward_python_frames", "Predict: how many Python frames did the profiler record on the thread "
                                           "that ran aten::convolution_backward?", frames_on_bw,
                 f"{frames_on_bw}: the backward pass runs on autograd's own thread (tid {bw_tids}), where no "
                 "Python runs. The stack of a backward operator is borrowed from the forward operator with the "
                 "same sequence number.", kind="predict", where="the threads table, column python_frames"),
        Question("top_site_share", "What share (%) of all the device time grouped by call site comes from the call "
                                   "site at the top of the table?", round(share, 1),
                 f"{top['user_frame']}: {float(top['device_self_ns']) / 1e6:,.1f} ms of "
                 f"{all_dev / 1e6:,.1f} ms = {share:.1f} %. One function (a residual block's forward) stands for "
                 "every block that runs it: a line is not a layer.", kind="compute", unit="%",
                 where="the by-call-site table, column device_self_us: first row ÷ the column's sum, the row "
                       "(none) under it included",
                 traps=[(round(100 * float(top["ops"]) / float(sites["ops"].sum()), 1),
                         "that is its share of the operators (column ops); the question asks about device time."),
                        (round(100 * float(top["host_self_ns"]) / float(sites["host_self_ns"].sum()), 1),
                         "that is its share of host self time; the question asks about device time.")]),
        Question("excerpt_callsite", "The ten raw events shown above come from another recording (a BERT model on "
                                     "an H100). Which frame is the call site of its aten::linear: the innermost "
                                     "open frame of the model's own code? Answer 'file(N)' or the whole frame name.",
                 site, f"{site}: the frames open when aten::linear began are those whose interval contains it; the "
                 "innermost ones (linear.py, module.py) are PyTorch's own code, and the module pseudo-frame "
                 "(nn.Module: Linear_0) names the layer, not a line. __getattr__ had already returned.",
                 normalise=_file_line, kind="transfer",
                 where="the excerpt: the frames whose [ts, ts + dur] contains the operator's, innermost first",
                 traps=[("torch/nn/modules/linear.py(124): forward", "that is PyTorch's own nn.Linear.forward, "
                                                                     "the library, not the model's code."),
                        ("transformers/models/bert/modeling_bert.py(505): forward", "that frame is open too, but "
                                                                                   "further out: a deeper frame of "
                                                                                   "the model's code called it."),
                        ("torch/nn/modules/module.py(1915): __getattr__", "that frame had returned before the "
                                                                          "operator began (its ts + dur is "
                                                                          "earlier).")]),
    ]
    stack_share = _python_frames_gzip_share()
    if stack_share is not None:
        qs.append(Question("stacks_share", "In the trace-size table (profiler_5step), what share (%) of the "
                                           "compressed trace do the Python frames (with_stack) make?",
                           round(100 * stack_share["bytes"], 1),
                           f"1 − {1 - stack_share['bytes']:.3f} = {100 * stack_share['bytes']:.1f} % of the gzip "
                           f"bytes ({100 * stack_share['events']:.1f} % of the events): the largest of the three "
                           "options' shares, yet about a third of the file; the events that no option adds "
                           "(operators, launches, GPU events) weigh more.", kind="compute", unit="%",
                           where="the size table, column share_of_gzip, row 'without Python frames (with_stack)'",
                           traps=[(round(100 * (1 - stack_share["bytes"]), 1), "that is what remains without the "
                                                                              "frames; subtract it from 100 %."),
                                  (round(100 * stack_share["events"], 1), "that is their share of the events; the "
                                                                          "question asks about bytes.")]))
    return Exercises("Lesson 06 — your turn", qs)


def _python_frames_gzip_share():
    """``{"bytes", "events"}``: the shares of ``profiler_5step``'s trace (zlib level 6 of compact
    JSON, as :func:`kitlib.analyses.grouping.attribution_bytes`) its ``python_function`` events
    make; None when that recording is absent."""
    import zlib

    import orjson

    from ...readers.bundle import open_capture
    from ...readers.files import read_json_file
    try:
        full = open_capture("profiler_5step")
    except Exception:      # noqa: BLE001 — a learner's own folder may lack it
        return None
    doc = read_json_file(full.file("trace.json.gz"))
    events = doc["traceEvents"]
    kept = [e for e in events if e.get("cat") != "python_function"]
    gz_all = len(zlib.compress(orjson.dumps(doc), 6))
    gz_kept = len(zlib.compress(orjson.dumps(dict(doc, traceEvents=kept)), 6))
    return {"bytes": 1 - gz_kept / gz_all, "events": 1 - len(kept) / len(events)}
