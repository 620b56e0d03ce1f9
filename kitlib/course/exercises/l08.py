"""Lesson 08's questions (how much arithmetic, and how fast?)."""
from __future__ import annotations

import ast

from . import Exercises, Question, misconception

#: Shares of the step's FLOPs a learner can predict that with_flops counts (upper bounds).
SHARE_CHOICES = [(0.15, "under a sixth"), (0.42, "about a third"), (0.6, "about half"), (0.85, "about two thirds"),
                 (1.01, "all of it")]
#: Shares of the steps' wall time the GPU can be busy (upper bounds).
BUSY_CHOICES = [(0.25, "under a quarter"), (0.75, "about half"), (1.01, "over three quarters")]


def _bucket(x: float, choices) -> str:
    return next(label for bound, label in choices if x < bound)


def with_flops_directions(answer: str, counted) -> list:
    """``with_flops_share``'s traps: each wrong choice, which way it is off and why, from the
    operators with_flops gave FLOPs to (``counted``), without giving the answer."""
    ops = ", ".join(counted)
    high = (f"too high: with_flops gave FLOPs only to {ops}, the forward convolutions and the linear layer's "
            "matrix products; aten::convolution_backward has no formula, so the backward convolutions "
            "(a gradient for the input, one for the weights), which FlopCounterMode counts, get none.")
    low = (f"too low: with_flops gave FLOPs to {ops}: every forward convolution, the bulk of the forward "
           "pass's arithmetic, and the linear layer's matrix products, forward and backward; of what "
           "FlopCounterMode counts, only aten::convolution_backward gets none.")
    labels = [c for _, c in SHARE_CHOICES]
    right = labels.index(answer)
    return [(c, high if i > right else low) for i, c in enumerate(labels) if i != right]


def _args(trace, row) -> tuple:
    """(stride, padding, dilation, groups) of an aten::conv2d row, from its concrete inputs."""
    ci = trace.ops.loc[row, "concrete_inputs"]
    return tuple(ast.literal_eval(v) for v in ci[3:7])


def other_conv(trace, by_event):
    """``(flops_by_event row, (stride, padding, dilation, groups))`` of the first strided 1×1
    aten::conv2d (else the last strided one): the transfer question's "another shape"."""
    convs = by_event[by_event["name"] == "aten::conv2d"]
    strided = [(r, _args(trace, r["row"])) for _, r in convs.iterrows() if _args(trace, r["row"])[0][0] > 1]
    pick = next(((r, a) for r, a in strided if r["input_dims"][1][2:] == [1, 1]), strided[-1])
    return pick


def busy_share(trace) -> tuple[int, int]:
    """``(busy_ns, wall_ns)``: the time any kernel, copy or memset ran (overlap once) from the
    first ProfilerStep's start to the last one's end, and that window's length."""
    from ...analyses.intervals import busy_ns
    s = trace.steps
    w = (int(s["start_ns"].min()), int(s["end_ns"].max()))
    gpu = trace.gpu[trace.gpu["kind"] != "gpu_annotation"]
    return busy_ns(gpu, w), w[1] - w[0]


def questions(capture) -> Exercises:
    """Questions of lesson 08 from ``capture`` (recorded with ``record_shapes`` and ``with_flops``),
    its FlopCounterMode count, and ``profiler_5step`` (the transfer)."""
    from .. import replay_capture, step_flop_counts
    from ..roofline import conv_flops, conv_min_bytes, ridge_point
    from ...analyses import flops as F
    from ...analyses.flop_rates import matched_rates
    tr = capture.trace
    ev = F.flops_by_event(tr)
    counts = step_flop_counts(capture)
    by_op = F.flops_by_operator(tr, ev)
    per_step = by_op["flops"].sum() / len(tr.steps)
    share = per_step / counts["total"]
    fwd = float(counts.get("by_op", {}).get("aten.convolution", 0))
    bwd = float(counts.get("by_op", {}).get("aten.convolution_backward", 0))
    rates = matched_rates(tr, counts)
    row, (stride, pad, dil, groups) = other_conv(tr, ev)
    x, w = row["input_dims"][0], row["input_dims"][1]
    o_flops = int(row["flops"])
    no_stride = conv_flops(x, w, (1, 1), pad, dil, groups)
    other = replay_capture("profiler_5step")
    o_rates = matched_rates(other.trace, step_flop_counts(other))
    o_rate = float(o_rates.loc["forward convolutions", "tflops_estimate"])
    mine = float(rates.loc["forward convolutions", "tflops_estimate"])
    busy, wall = busy_share(tr)
    b_share = busy / wall
    whole_rate = float(rates.loc["whole step", "tflops_estimate"])
    ridge, parts = ridge_point("H200", "TF32")
    gpu_key, gpu_peaks = F.peak_for(capture.provenance.get("gpu"))
    gpu_key, peak_tf32 = (gpu_key, gpu_peaks["TF32"]) if gpu_peaks else ("H200", parts["peak_tflops"])
    conv_ms = float(rates.loc["convolutions, forward + backward", "device_ms_per_step"])
    busy_ms = busy / len(tr.steps) / 1e6
    row_ms = float(rates.loc["whole step", "device_ms_per_step"])
    stem = ev[ev["name"] == "aten::conv2d"].iloc[0]
    s_args = _args(tr, stem["row"])
    s_x, s_w = stem["input_dims"][0], stem["input_dims"][1]
    s_bytes = conv_min_bytes(s_x, s_w, *s_args[:3])
    s_ai = float(stem["flops"]) / s_bytes
    n_x, n_w = s_x[0] * s_x[1] * s_x[2] * s_x[3], s_w[0] * s_w[1] * s_w[2] * s_w[3]
    qs = [
        Question("with_flops_share", "Predict: what share of a whole training step's FLOPs (forward and backward, as "
                                     "FlopCounterMode counts them) does with_flops count?", _bucket(share, SHARE_CHOICES),
                 f"{_bucket(share, SHARE_CHOICES)}: {per_step / 1e12:.3f} of {counts['total'] / 1e12:.3f} TFLOP "
                 f"= {share:.1%}. Here with_flops counted only {', '.join(by_op.index)}; aten::convolution_backward, "
                 "about twice the forward convolutions' arithmetic, has no formula and gets no count.",
                 kind="predict", choices=[c for _, c in SHARE_CHOICES],
                 traps=with_flops_directions(_bucket(share, SHARE_CHOICES), by_op.index),
                 explain_when_wrong=False,
                 where="FlopCounterMode's table below (column pass) and the with_flops line under it"),
        Question("bwd_fwd_ratio", "Per FlopCounterMode, how many times the forward convolutions' FLOPs does "
                                  "convolution backward need in one step?", float(bwd / fwd) if fwd else 0.0,
                 f"aten.convolution_backward {bwd / 1e12:.3f} TFLOP ÷ aten.convolution {fwd / 1e12:.3f} TFLOP = "
                 f"{bwd / fwd if fwd else float('nan'):.2f}: a gradient for the input and one for the weights, each "
                 "about as much arithmetic as the forward convolution (the first layer needs no input gradient).",
                 kind="compute", where="FlopCounterMode's table, column flops (aten.convolution_backward and "
                                       "aten.convolution)",
                 traps=[(float(fwd / bwd) if bwd else 0.0, "that is forward ÷ backward, the other way round.")]),
        Question("other_conv_gflop", f"Another convolution of the same network: input {x}, weight {w}, stride "
                                     f"{list(stride)}, padding {list(pad)}, dilation {list(dil)}, groups {groups}. "
                                     "How many GFLOP (10⁹) does with_flops give one call of it?",
                 o_flops / 1e9,
                 f"H_out = W_out = ({x[2]} + 2·{pad[0]} − {dil[0]}·({w[2]} − 1) − 1) // {stride[0]} + 1 = "
                 f"{(x[2] + 2 * pad[0] - dil[0] * (w[2] - 1) - 1) // stride[0] + 1}; 2 · {x[0]} · H_out · W_out · "
                 f"{w[2]} · {w[3]} · {x[1]} · {w[0]} / {groups} = {o_flops:,} FLOPs = {o_flops / 1e9:.2f} GFLOP "
                 "(the profiler's own figure for it in the trace).",
                 kind="transfer", unit="GFLOP", where="the convolution formula, with H_out from the stride",
                 traps=[(o_flops / 2e9, "that is the count of multiply-adds (MACs); each is two floating-point "
                                        "operations, and with_flops counts FLOPs."),
                        (no_stride / 1e9, f"the output is smaller than the input: with stride {stride[0]}, "
                                          "H_out and W_out are halved, a quarter of the positions.")]),
        Question("conv_tflops_5step", "The recording with the data loader (profiler_5step) ran the same convolutions: "
                                      "what achieved TFLOP/s estimate do its forward convolutions reach? Take the "
                                      "FLOPs per step from this lesson and the convolutions' device time (CUDA total) "
                                      "from that recording's own printed table below.", o_rate,
                 f"{rates.loc['forward convolutions', 'tflop_per_step']:.3f} TFLOP per step (same shapes, same "
                 f"FLOPs) in {o_rates.loc['forward convolutions', 'device_ms_per_step']:.3f} ms of kernels per step "
                 f"= {o_rate:.1f} TFLOP/s, beside {mine:.1f} here: same arithmetic, nearly the same kernel time. "
                 "The pair is FLOPs and the device time of the kernels that did them, not the step's wall time "
                 "and not the operators' CPU time.",
                 kind="compute", unit="TFLOP/s",
                 where="aten::cudnn_convolution's CUDA total (5 steps) in profiler_5step's printed table, and the "
                       "with_flops FLOPs per step",
                 traps=[(mine, "that is this lesson's recording (fixed_batch); the question is about profiler_5step."),
                        (counts["total"] / (float(o_rates.loc["forward convolutions", "device_ms_per_step"]) * 1e-3)
                         / 1e12, "those are the whole step's FLOPs over the forward convolutions' time: the FLOPs of "
                                 "one set of work over the time of another.")]),
        Question("gpu_busy_share", f"Predict: the whole step's achieved TFLOP/s is a fraction of the {gpu_key}'s "
                                   "dense TF32 peak. For what share of the profiled steps' wall time was the GPU "
                                   "running at least one kernel, copy or memset?", _bucket(b_share, BUSY_CHOICES),
                 f"{_bucket(b_share, BUSY_CHOICES)}: busy {busy / 1e6:.1f} ms of {wall / 1e6:.1f} ms = {b_share:.0%}. "
                 f"The GPU was nearly always doing something, yet far from its arithmetic peak: of {busy_ms:.1f} ms busy "
                 f"a step (that busy time ÷ {len(tr.steps)} steps: every GPU event from the first step's start to the "
                 f"last step's end; the rates table's whole-step row divides by {row_ms:.1f} ms, the busy time of the "
                 f"GPU events with a launch in the trace), the convolutions' kernels (forward and backward) take "
                 f"{conv_ms:.1f} ms, and the rest goes "
                 "mostly to kernels with no counted FLOPs (normalisation, activations, the optimizer). A rate against a "
                 "datasheet peak is not the busy share.",
                 kind="predict", choices=[c for _, c in BUSY_CHOICES],
                 traps=[misconception("flops_is_utilisation", _bucket(whole_rate / peak_tf32, BUSY_CHOICES),
                                      "Busy (what nvidia-smi's 'utilization' samples) and rate are different "
                                      "measures.")]
                 if _bucket(whole_rate / peak_tf32, BUSY_CHOICES) != _bucket(b_share, BUSY_CHOICES) else []),
        Question("stem_intensity", "Arithmetic intensity of the first convolution (the stem, computed above): its FLOPs "
                                   "over the least bytes it must move (read input and weight once, write the output "
                                   "once, 4 bytes an fp32 element), in FLOP per byte?", s_ai,
                 f"{int(stem['flops']):,} FLOPs ÷ {s_bytes:,} bytes = {s_ai:.1f} FLOP/byte, below the H200's TF32 "
                 f"ridge point ({ridge:.0f}): even moving each byte once, the roofline caps it at "
                 f"{s_ai * parts['peak_tb_per_s']:.0f} TFLOP/s, under the {parts['peak_tflops']} peak. With 3 input "
                 "channels there is little arithmetic per byte. Whether the kernel is in fact limited by memory is for "
                 "Nsight Compute's counters (DRAM throughput) to say.",
                 kind="compute", unit="FLOP/byte",
                 where="the stem's FLOPs (above) and the element counts of its input, weight and output",
                 traps=[(float(stem["flops"]) / ((n_x + n_w) * 4), "the output is written to memory too: count its "
                                                                   "bytes."),
                        (float(stem["flops"]) / (s_bytes / 4), "those are elements, not bytes: an fp32 element is 4 "
                                                               "bytes.")]),
    ]
    return Exercises("Lesson 08 — your turn", qs)
