"""FLOPs per byte: a convolution's arithmetic intensity beside a GPU's ridge point (lesson 08).

Roofline (Williams, Waterman and Patterson, CACM 2009): a kernel's rate is at most
``min(peak FLOP/s, intensity × peak bandwidth)``, intensity = FLOPs / DRAM bytes; the ridge
point = peak FLOP/s / peak bandwidth. Shapes give the *least* traffic (input and weight read
once, output written once), so the *highest* intensity; the real bytes are a hardware counter
(Nsight Compute's ``dram__bytes_read.sum``), not in a trace. FLOP/s peaks:
:data:`kitlib.analyses.flops.PEAK_TFLOPS`."""
from __future__ import annotations

from ..errors import KitError

__all__ = ["PEAK_TB_PER_S", "conv_out_size", "conv_flops", "conv_min_bytes", "intensity", "ridge_point"]

#: Peak DRAM bandwidth in TB/s (10¹² bytes per second), with where it comes from.
PEAK_TB_PER_S = {
    "H200": (4.8, "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM: GPU memory bandwidth 4.8 TB/s: "
                  "https://www.nvidia.com/en-us/data-center/h200/"),
    "H100": (3.35, "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: GPU memory bandwidth 3.35 TB/s: "
                   "https://www.nvidia.com/en-us/data-center/h100/"),
}


def conv_out_size(size: int, kernel: int, stride: int = 1, padding: int = 0, dilation: int = 1) -> int:
    """Output length of a convolution along one axis (PyTorch's ``Conv2d`` formula).

    >>> conv_out_size(224, 7, stride=2, padding=3)
    112
    """
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def conv_flops(x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups: int = 1) -> int:
    """FLOPs of a 2-D convolution as ``with_flops`` counts them: 2 · N · H_out · W_out ·
    K_h · K_w · C_in · C_out / groups (one multiply and one add per weight per output).

    ``x`` = [N, C_in, H, W], ``w`` = [C_out, C_in/groups, K_h, K_w].

    >>> conv_flops([128, 3, 224, 224], [64, 3, 7, 7], (2, 2), (3, 3))
    30211571712
    """
    n, c_in, h, wd = x
    c_out, _, kh, kw = w
    ho = conv_out_size(h, kh, stride[0], padding[0], dilation[0])
    wo = conv_out_size(wd, kw, stride[1], padding[1], dilation[1])
    return 2 * n * ho * wo * kh * kw * c_in * c_out // groups


def conv_min_bytes(x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), bytes_per_element: int = 4) -> int:
    """The least DRAM traffic of a convolution: input and weight read once, output written
    once (fp32: 4 bytes an element).

    >>> conv_min_bytes([128, 3, 224, 224], [64, 3, 7, 7], (2, 2), (3, 3))
    488149760
    """
    n, c_in, h, wd = x
    c_out, c_w, kh, kw = w
    ho = conv_out_size(h, kh, stride[0], padding[0], dilation[0])
    wo = conv_out_size(wd, kw, stride[1], padding[1], dilation[1])
    elements = n * c_in * h * wd + c_out * c_w * kh * kw + n * c_out * ho * wo
    return elements * bytes_per_element


def intensity(flops: float, nbytes: float) -> float:
    """Arithmetic intensity in FLOP per byte.

    Raises KitError: ``nbytes`` is not positive."""
    if not nbytes or nbytes <= 0:
        raise KitError(f"bytes moved must be positive, not {nbytes!r}")
    return float(flops) / float(nbytes)


def ridge_point(gpu: str = "H200", precision: str = "TF32") -> tuple[float, dict]:
    """The ridge point of ``gpu`` in FLOP per byte, and ``{peak_tflops, peak_tb_per_s, sources}``.

    Raises KitError: a GPU or precision without both figures in the kit.

    >>> round(ridge_point("H200", "TF32")[0], 1)
    103.0"""
    from ..analyses.flops import PEAK_TFLOPS
    if gpu not in PEAK_TFLOPS or gpu not in PEAK_TB_PER_S or precision not in PEAK_TFLOPS[gpu]:
        raise KitError(f"no peak FLOP/s and bandwidth for {gpu} {precision} in the kit "
                       f"(known: {sorted(set(PEAK_TFLOPS) & set(PEAK_TB_PER_S))})")
    tflops, tbs = PEAK_TFLOPS[gpu][precision], PEAK_TB_PER_S[gpu][0]
    return tflops / tbs, {"peak_tflops": tflops, "peak_tb_per_s": tbs,
                          "sources": [PEAK_TFLOPS[gpu]["source"], PEAK_TB_PER_S[gpu][1]]}
