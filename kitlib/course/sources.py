"""Figures quoted from the course's source texts (B300 captures by others): the kit's only
typed-in numbers, shown *beside* the learner's or the H200 reference figures, never instead.

Source: "PyTorch Profiler vs Nsight Systems" (seed 000; ResNet-50, Food-101, batch 128, B300),
quoting "Reading torch.profiler Correctly" (5 active steps) and "Nsight Systems: Finding Where
the GPU Sits Idle" (8 steps); the two captures were not matched, their software not fully recorded."""
from __future__ import annotations

B300 = {
    "machine": "NVIDIA B300 (source texts; software versions incompletely recorded)",
    # lesson 02: the first convolution of one recorded step
    "conv_op_us": 120.501,
    "conv_launch_us": 9.329,
    "conv_kernel_us": 549.827,
    "conv_launch_index": 3,
    "conv_launch_count": 3,
    # lesson 04: the cold-start data_load range (Nsight, starts relative to the first torch_step)
    "first_data_load_ms": 535.258,
    "first_data_load_end_ms": 535.267,
    "first_h2d_copy_end_ms": 536.216,
    # lesson 07
    "cudnn_conv_self_cuda_mem_gb": 26.54,
    "cudnn_conv_calls": 265,
    "profiler_active_steps": 5,
    "nsys_steps": 8,
}

CITATION = ("B300 figures: course source text 'PyTorch Profiler vs Nsight Systems' (seed 000), "
            "quoting 'Reading torch.profiler Correctly' and 'Nsight Systems: Finding Where the GPU Sits Idle'.")
