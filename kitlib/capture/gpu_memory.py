"""Will the workload fit this GPU? The check every live run makes before it starts.

Every path that runs the workload live on a GPU (the lessons' captures, ``python -m kitlib
profile``, lesson 12's NCCL ranks) asks :func:`live_memory_plan` with the free memory of the
moment and runs the batch it gives, or replays (``profile``: an error; ``--no-memory-check``
skips it). ResNet-50 only; an estimate, not a promise.

Sources: docs/SOURCES.md#gpu-memory-estimate"""
from __future__ import annotations

#: The reference's peak reserved and allocated bytes (``profiler_5step``; tests/course/test_classroom.py).
REFERENCE_PEAK_RESERVED_BYTES = 13_352_566_784
REFERENCE_PEAK_ALLOCATED_BYTES = 11_462_948_352
#: Weights, gradients and momentum of ResNet-50's 23.7 M parameters: what does not grow with the batch.
FIXED_BYTES = 300_000_000
#: Below this batch a live capture says too little about the reference workload: replay instead.
MIN_LIVE_BATCH = 16


def free_gpu_bytes(devices=None) -> int:
    """The least free memory (bytes) of ``devices`` (default the current GPU), after
    ``torch.cuda.empty_cache()`` so this process's cache does not count as taken."""
    import torch
    torch.cuda.empty_cache()
    devs = [None] if devices is None else list(devices)
    return min(int(torch.cuda.mem_get_info(d)[0]) for d in devs)


def live_memory_plan(free_bytes: int | None = None, batch_size: int = 128, image_size: int = 224,
                     margin: float = 1.15) -> dict:
    """Whether the workload fits ``free_bytes`` (default :func:`free_gpu_bytes`), and the batch
    that would: the need is :data:`FIXED_BYTES` plus the reference's per-image share, scaled by
    pixels, times ``margin``.

    Returns ``free_bytes``, ``need_bytes``, ``batch_size`` (the planned one when it fits, else
    the largest power of two from :data:`MIN_LIVE_BATCH` that fits, else ``None``: replay) and
    ``message`` (one sentence)."""
    if free_bytes is None:
        free_bytes = free_gpu_bytes()
    per_image = (REFERENCE_PEAK_RESERVED_BYTES - FIXED_BYTES) / 128 * (image_size / 224) ** 2

    def need(b):
        return int((FIXED_BYTES + per_image * b) * margin)

    gib = lambda b: f"{b / 2**30:.1f} GiB"  # noqa: E731
    plan = {"free_bytes": int(free_bytes), "need_bytes": need(batch_size)}
    if need(batch_size) <= free_bytes:
        return {**plan, "batch_size": batch_size,
                "message": f"batch {batch_size} needs about {gib(need(batch_size))}; {gib(free_bytes)} free: fits."}
    b = 1 << (max(batch_size, 1).bit_length() - 1)
    while b >= MIN_LIVE_BATCH and need(b) > free_bytes:
        b //= 2
    if b >= MIN_LIVE_BATCH:
        return {**plan, "batch_size": b,
                "message": f"this GPU has {gib(free_bytes)} free, batch {batch_size} needs about "
                           f"{gib(need(batch_size))}: recording with batch {b} instead (about "
                           f"{gib(need(b))}); your figures are for batch {b}, not the reference's {batch_size}."}
    return {**plan, "batch_size": None,
            "message": f"this GPU has {gib(free_bytes)} free, too little for even batch {MIN_LIVE_BATCH} "
                       f"(about {gib(need(MIN_LIVE_BATCH))}; batch {batch_size} needs {gib(need(batch_size))})."}


__all__ = ["REFERENCE_PEAK_RESERVED_BYTES", "REFERENCE_PEAK_ALLOCATED_BYTES", "FIXED_BYTES", "MIN_LIVE_BATCH",
           "free_gpu_bytes", "live_memory_plan"]
