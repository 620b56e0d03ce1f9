"""Will the workload fit this GPU? The check every live run makes before it starts.

The course workload (ResNet-50, batch 128, 224 px) peaks at 13.35 GB reserved on the
reference H200; a student's GPU may have less free memory. Every path that runs it live
on a GPU asks :func:`live_memory_plan` first, with the free memory of the moment, and
runs the batch the plan gives (the same rule everywhere, so each lesson decides alone
and they agree when the GPU's free memory has not changed):

* the lessons' captures and measurements (:mod:`kitlib.course`: ``lesson_capture``,
  ``measured``, ``live_recipe_captures``, ``lesson_nsys_capture``, lesson 12's
  ``ranks.record_live`` for NCCL ranks): a smaller batch with a warning, or the
  recording instead (Gloo ranks on the CPU for lesson 12) when not even
  :data:`MIN_LIVE_BATCH` fits;
* ``python -m kitlib profile`` on a GPU: a smaller batch with a warning, or an error
  that says what to do (``--no-memory-check`` skips the check).

The estimate is scaled from the reference recording (ResNet-50 only: ``small_cnn`` is
not checked) and is an estimate, not a promise.
"""
from __future__ import annotations

#: The reference workload's GPU memory (``profiler_5step``: batch 128, 224 px, ResNet-50,
#: channels-last, SGD with momentum): the most the caching allocator held reserved
#: (``total_reserved``) and allocated (``total_allocated``) at any allocator event of the
#: trace, in bytes. ``tests/course/test_classroom.py`` recomputes both from the recording.
REFERENCE_PEAK_RESERVED_BYTES = 13_352_566_784
REFERENCE_PEAK_ALLOCATED_BYTES = 11_462_948_352
#: What does not grow with the batch: fp32 weights, gradients and momentum of ResNet-50's
#: 23.7 million parameters (101 classes), 3 × 4 bytes each, rounded up.
FIXED_BYTES = 300_000_000
#: Below this batch a live capture says too little about the reference workload: replay instead.
MIN_LIVE_BATCH = 16


def free_gpu_bytes(devices=None) -> int:
    """Free memory of the GPU(s) a live run will use, in bytes: the least of
    ``torch.cuda.mem_get_info(d)[0]`` over ``devices`` (default: the current GPU).

    This process's own cached blocks are released first (``torch.cuda.empty_cache()``),
    so a lesson that already recorded in this kernel does not count its allocator's cache
    as taken."""
    import torch
    torch.cuda.empty_cache()
    devs = [None] if devices is None else list(devices)
    return min(int(torch.cuda.mem_get_info(d)[0]) for d in devs)


def live_memory_plan(free_bytes: int | None = None, batch_size: int = 128, image_size: int = 224,
                     margin: float = 1.15) -> dict:
    """Whether the workload fits this GPU's free memory, and the batch that would.

    The need is scaled from the reference recording's peak reserved memory
    (:data:`REFERENCE_PEAK_RESERVED_BYTES` at batch 128, 224 px): a fixed part
    (:data:`FIXED_BYTES`) plus a part proportional to images × pixels, times ``margin``
    for the allocator's rounding and cuDNN's workspaces. An estimate, not a promise.

    Parameters
    ----------
    free_bytes : int, optional
        Free device memory in bytes; default :func:`free_gpu_bytes` (the current GPU).
    batch_size, image_size : int
        The planned workload.
    margin : float
        Safety factor on the estimate.

    Returns
    -------
    dict
        ``free_bytes``, ``need_bytes`` (the estimate for ``batch_size``), ``batch_size``
        (the planned batch when it fits; else the largest power of two at least
        :data:`MIN_LIVE_BATCH` that fits; else ``None``: replay) and ``message`` (one
        sentence saying what was decided and why).
    """
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
