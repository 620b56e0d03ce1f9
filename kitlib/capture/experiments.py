"""Live measurements that run the workload several times: step times (ms per series) for
:func:`kitlib.analyses.coldstart.step_time_stats` and
:func:`kitlib.analyses.compare.compare_series`, FlopCounterMode counts for
:func:`kitlib.analyses.flops.flop_counter_table`."""
from __future__ import annotations

from ..analyses.steps import active_steps
from .recipes import RECIPES, capture
from .workload import NUM_CLASSES, WorkloadConfig, build_workload, make_model, resolve_device, time_steps


def measure_loader_settings(settings: dict, steps: int = 30, warmup: int = 3, base=None,
                            progress: bool = True) -> dict:
    """Uninstrumented step times (ms) under several DataLoader settings: ``{name: overrides}`` →
    ``{name: [ms, ...]}``, each a fresh workload over ``base`` (default
    :meth:`WorkloadConfig.for_device`) timed by :func:`kitlib.capture.workload.time_steps` after
    ``warmup`` steps. Raises :class:`KitError` for bad settings."""
    import dataclasses
    base = base or WorkloadConfig.for_device()
    out = {}
    for name, over in settings.items():
        cfg = dataclasses.replace(base, **over).validate()
        with build_workload(cfg, progress=progress) as wl:
            out[name] = time_steps(wl, steps, warmup=warmup, progress=progress)
    return out


def overhead_series(config=None, steps: int = 10, warmup: int = 3, progress: bool = True) -> dict:
    """The same workload's step times (ms) under :data:`kitlib.analyses.compare.SETTINGS`:
    uninstrumented, with the phase labels on, and the active steps of the ``light`` and
    ``full`` recipes."""
    import tempfile

    config = config or WorkloadConfig.for_device()
    out = {}
    with build_workload(config, progress=progress) as wl:
        out["step_ms_uninstrumented"] = time_steps(wl, steps, warmup=warmup, annotate=False, progress=progress)
        out["step_ms_nvtx_only"] = time_steps(wl, steps, warmup=1, annotate=True, progress=progress)
    for key, name in (("step_ms_profiler_light", "light"), ("step_ms_profiler_full", "full")):
        rec = RECIPES[name].replace(active=steps, pre_steps=warmup)
        with tempfile.TemporaryDirectory() as d:
            cap = capture(config, rec, f"{d}/{name}", progress=progress)
            out[key] = active_steps(cap.step_times()["step_ms_profiled"], cap.recipe.get("schedule"))
    return out


def flop_counter_step(model, optimizer, images, labels) -> dict:
    """``FlopCounterMode`` over one training step (it updates the weights):
    ``{"total": int, "by_op": {"aten.convolution": int, …}}``, the schema of the reference
    ``flop_counter_one_step.json``."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    fc = FlopCounterMode(display=False)
    with fc:
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return {"total": int(fc.get_total_flops()),
            "by_op": {str(k): int(v) for k, v in fc.get_flop_counts().get("Global", {}).items()}}


def workload_step_flops(config=None, device: str | None = None) -> dict:
    """:func:`flop_counter_step` of the course model on a random batch of the configured shape
    (FLOPs depend on shapes only)."""
    import torch
    config = config or WorkloadConfig.for_device()
    dev = resolve_device(device or config.device)
    model, opt = make_model(config, dev)
    x = torch.randn(config.batch_size, 3, config.image_size, config.image_size, device=dev)
    if config.channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, NUM_CLASSES, (config.batch_size,), device=dev)
    return flop_counter_step(model, opt, x, y)
