"""Live measurements: run the workload several times and time or count it.

Not analyses (they run the model), so they live in the capture layer; what they
return is plain data that the analyses take as input: step times in ms per series
for :func:`kitlib.analyses.coldstart.step_time_stats` and
:func:`kitlib.analyses.compare.compare_series`, FlopCounterMode counts for
:func:`kitlib.analyses.flops.flop_counter_table`.
"""
from __future__ import annotations

from ..analyses.steps import active_steps
from .recipes import RECIPES, capture
from .workload import NUM_CLASSES, WorkloadConfig, build_workload, make_model, resolve_device, time_steps


def measure_loader_settings(settings: dict, steps: int = 30, warmup: int = 3, base=None,
                            progress: bool = True) -> dict:
    """Live: time the workload, uninstrumented, under several DataLoader settings.

    Each setting gets a fresh workload (new loader, new workers), ``warmup``
    untimed steps, then ``steps`` timed with :func:`kitlib.capture.workload.time_steps`
    (``perf_counter_ns`` around the step and ``synchronize``). Choose ``steps``
    larger than an epoch so the epoch boundary is inside the timed steps.

    Parameters
    ----------
    settings : dict of str -> dict
        Name -> :class:`~kitlib.capture.workload.WorkloadConfig` overrides, e.g.
        ``{"reference": {}, "persistent": {"persistent_workers": True}}``.
    steps, warmup : int
    base : WorkloadConfig, optional
        Settings shared by all (default :meth:`WorkloadConfig.for_device`).
    progress : bool

    Returns
    -------
    dict of str -> list of float
        Step times in ms per setting, in order (feed :func:`step_time_stats`).

    Raises
    ------
    KitError
        Bad settings (see :meth:`WorkloadConfig.validate`).
    """
    import dataclasses
    base = base or WorkloadConfig.for_device()
    out = {}
    for name, over in settings.items():
        cfg = dataclasses.replace(base, **over).validate()
        with build_workload(cfg, progress=progress) as wl:
            out[name] = time_steps(wl, steps, warmup=warmup, progress=progress)
    return out


def overhead_series(config=None, steps: int = 10, warmup: int = 3, progress: bool = True) -> dict:
    """Live: the same workload's step times under the four settings of :data:`kitlib.analyses.compare.SETTINGS`.

    Not an analysis (it runs the workload): uninstrumented steps
    (:func:`kitlib.capture.workload.time_steps` with ``annotate=False``), the same with the
    phase labels on (``annotate=True``: NVTX and ``record_function`` ranges, which
    cost next to nothing when no tool listens), then the ``light`` and ``full``
    recipes of :func:`kitlib.capture.recipes.capture` (their ``step_ms_profiled``, the
    active steps only).

    Parameters
    ----------
    config : kitlib.capture.workload.WorkloadConfig, optional
    steps, warmup : int
        Timed steps per setting; warm-up steps first.
    progress : bool

    Returns
    -------
    dict
        ``{series key: [step ms, ...]}`` with the keys of :data:`kitlib.analyses.compare.SETTINGS`.
    """
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
    """Count the FLOPs of one training step with ``torch.utils.flop_counter.FlopCounterMode``.

    Runs forward, cross-entropy loss, ``zero_grad``, backward and ``optimizer.step()``
    once, on whatever device the model and batch are (it changes the weights, as
    a training step does).

    Parameters
    ----------
    model : torch.nn.Module
    optimizer : torch.optim.Optimizer
    images, labels : torch.Tensor
        One batch, on the model's device.

    Returns
    -------
    dict
        ``{"total": int, "by_op": {"aten.convolution": int, …}}`` — the schema of
        the reference ``flop_counter_one_step.json``.
    """
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
    """FlopCounterMode over one training step of the course workload (live mode).

    The model comes from :func:`kitlib.capture.workload.make_model` and the batch is random
    data of the configured shape (``batch_size`` × 3 × ``image_size``²): FLOPs
    depend on shapes only, so no dataset is needed.

    Parameters
    ----------
    config : kitlib.capture.workload.WorkloadConfig, optional
        Default: :meth:`WorkloadConfig.for_device` (batch 128 on a GPU).
    device : str, optional
        Overrides the config's device.

    Returns
    -------
    dict
        As :func:`flop_counter_step`.
    """
    import torch
    config = config or WorkloadConfig.for_device()
    dev = resolve_device(device or config.device)
    model, opt = make_model(config, dev)
    x = torch.randn(config.batch_size, 3, config.image_size, config.image_size, device=dev)
    if config.channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, NUM_CLASSES, (config.batch_size,), device=dev)
    return flop_counter_step(model, opt, x, y)
