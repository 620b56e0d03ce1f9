"""Lesson 01's recording as a function (a small model profiled on the CPU in seconds), so the
exercises can rebuild it after a kernel restart and the tests can check it; public
``torch.profiler`` API only."""
from __future__ import annotations

import tempfile
from pathlib import Path

#: The schedule the lesson uses: 1 step skipped, 1 warm-up step, 3 recorded.
SCHEDULE = {"wait": 1, "warmup": 1, "active": 3}
#: Training steps the lesson runs under the profiler.
STEPS_RUN = 5
#: What the schedule did with the steps, printed by the lesson's read-back once the learner
#: has predicted how many steps the trace holds: kept here, so that the cell's visible code
#: does not say it before the prediction.
SCHEDULE_DID = ("what the schedule did: the wait step ran without recording; the warmup step recorded and "
                "threw the result away, so that the profiler's start-up cost lands in no step you read; only "
                "the active steps were kept, and handed to on_trace_ready together.")


def small_model(seed: int = 0):
    """``(model, optimizer, images, labels)``: Conv2d(3→16, 3×3) → BatchNorm2d → ReLU → pool →
    Linear(16→10), SGD with momentum, 32 random 3×64×64 images and labels (CPU)."""
    import torch
    import torch.nn as nn
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return model, opt, torch.randn(32, 3, 64, 64), torch.randint(0, 10, (32,))


def record_small_profile(out_dir=None) -> dict:
    """Record lesson 01's profile (:data:`STEPS_RUN` steps under :data:`SCHEDULE`) into ``out_dir``
    (default a new temporary folder): ``{trace, memory_timeline, key_averages}`` (two paths and the
    profiler's EventList)."""
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile, record_function, schedule
    out = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="kitlib-lesson01-"))
    out.mkdir(parents=True, exist_ok=True)
    model, opt, x, y = small_model()
    written = []

    def on_ready(prof):
        path = out / f"trace_step{prof.step_num}.json"
        prof.export_chrome_trace(str(path))
        written.append(path)

    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(**SCHEDULE), on_trace_ready=on_ready,
                 record_shapes=True, profile_memory=True, with_stack=True) as prof:
        for _ in range(STEPS_RUN):
            with record_function("forward"):
                loss = F.cross_entropy(model(x), y)
            with record_function("backward"):
                opt.zero_grad(set_to_none=True)
                loss.backward()
            with record_function("optimizer"):
                opt.step()
            prof.step()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)   # deprecated in favour of CUDA-only snapshots
        prof.export_memory_timeline(str(out / "memory_timeline.json"), device="cpu")
    return {"trace": written[0], "memory_timeline": out / "memory_timeline.json", "key_averages": prof.key_averages()}
