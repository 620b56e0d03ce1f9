"""Lesson 08's questions (how much arithmetic, and how fast?)."""
from __future__ import annotations

from . import Exercises, Question


def questions(capture) -> Exercises:
    """Questions of lesson 08, computed from ``capture`` (a torch.profiler bundle
    recorded with ``record_shapes`` and ``with_flops``)."""
    from .. import ncu_capture, step_flop_counts
    from ...analyses import flops as F
    from ...readers.ncu import load_ncu_csv
    tr = capture.trace
    ev = F.flops_by_event(tr)
    first = ev[ev["name"] == "aten::conv2d"].iloc[0]
    counts = step_flop_counts(capture)
    per_step = F.flops_by_operator(tr, ev)["flops"].sum() / len(tr.steps)
    share = per_step / counts["total"]
    rates = F.rate_estimates(tr, counts)
    fwd = float(counts.get("by_op", {}).get("aten.convolution", 0))
    bwd = float(counts.get("by_op", {}).get("aten.convolution_backward", 0))
    conv_rate = rates["tflops_estimate"].iloc[0]
    nc = ncu_capture(capture)
    tidy = load_ncu_csv(nc.file(nc.files[0] if nc.files[0].endswith(".csv") else
                                next(f for f in nc.files if f.endswith(".csv"))))
    k0 = tidy[tidy["kernel_id"] == tidy["kernel_id"].min()].set_index("metric")["value"]
    bound = "memory" if k0["Memory Throughput"] > k0["Compute (SM) Throughput"] else "compute"
    x, w = first["input_dims"][0], first["input_dims"][1]
    ci = tr.ops.loc[first["row"], "concrete_inputs"]
    qs = [
        Question("first_conv_gflop", f"How many GFLOP (10⁹) does with_flops give the first aten::conv2d "
                                     f"(input {x}, weight {w}, stride {ci[3]}, padding {ci[4]}, dilation {ci[5]}, groups {ci[6]})?",
                 float(round(first["flops"] / 1e9, 3)),
                 f"2 · N · H_out · W_out · K_h · K_w · C_in · C_out = {first['flops']:,} FLOPs "
                 f"= {first['flops'] / 1e9:.3f} GFLOP, with H_out = (H + 2·padding − dilation·(K_h − 1) − 1) "
                 "// stride + 1.",
                 tolerance=0.01,
                 traps=[(float(round(first["flops"] / 2e9, 3)), "that is the count of multiply-adds (MACs); each "
                                                                  "is two floating-point operations, and with_flops "
                                                                  "counts FLOPs.")]),
        Question("with_flops_share", "What fraction of the whole step's FLOPs (FlopCounterMode) does "
                                     "with_flops count per step? (0–1)", float(round(share, 3)),
                 f"{per_step / 1e12:.3f} of {counts['total'] / 1e12:.3f} TFLOP = {share:.1%}: the profiler "
                 "counts aten::conv2d, addmm and mm only; convolution backward, about twice the forward work, "
                 "gets no estimate.", tolerance=0.02),
        Question("conv_tflops", "Achieved TFLOP/s estimate of the forward convolutions (their FLOPs over the "
                                "device time of their kernels)?", float(round(conv_rate, 1)),
                 f"{rates['tflop_per_step'].iloc[0]:.3f} TFLOP in {rates['device_ms_per_step'].iloc[0]:.3f} ms "
                 f"of kernels per step ≈ {conv_rate:.0f} TFLOP/s.", tolerance=0.03),
        Question("bwd_fwd_ratio", "Per FlopCounterMode, how many times the forward convolutions' FLOPs does "
                                  "convolution backward need in one step?", float(round(bwd / fwd, 2)) if fwd else 0.0,
                 f"aten.convolution_backward {bwd / 1e12:.3f} TFLOP ÷ aten.convolution {fwd / 1e12:.3f} TFLOP = "
                 f"{bwd / fwd if fwd else float('nan'):.2f}: a gradient for the input and one for the weights, each "
                 "about as much arithmetic as the forward convolution (the first layer needs no input gradient).",
                 tolerance=0.02),
        Question("is_utilization", "Is that rate divided by the datasheet peak the GPU's utilization? (yes/no)",
                 False, "no: the FLOPs are a formula on shapes (not what the kernels executed), the peak is a "
                        "dense best case at boost clock, and the time is the kernels' summed duration, whatever they were waiting on. It is an "
                        "estimate to compare runs, not a hardware measurement: ask Nsight Compute for that."),
        Question("ncu_limiter", "In the Nsight Compute report, is kernel #0 closer to its memory or its compute "
                                "peak? (memory/compute)", bound,
                 f"{bound}: memory throughput {k0['Memory Throughput']:.1f} % vs compute (SM) "
                 f"{k0['Compute (SM) Throughput']:.1f} % of peak, achieved occupancy "
                 f"{k0['Achieved Occupancy']:.1f} %.", choices=["memory", "compute"]),
    ]
    return Exercises("Lesson 08 — your turn", qs)
