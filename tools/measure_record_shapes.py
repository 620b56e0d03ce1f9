"""What does ``record_shapes=True`` cost? A small CPU measurement for lesson 05.

    python tools/measure_record_shapes.py [--repeats 4] [--out data/reference/record_shapes_cpu/result.json]

torch.profiler's documentation warns: "When record_shapes=True is specified, profiler will
temporarily hold references to the tensors; that may further prevent certain optimizations
that depend on the reference count and introduce extra tensor copies." This script measures
what that costs on a small CPU training loop, with everything else equal:

- the workload: torchvision ResNet-18 (10 classes, ``weights=None``), channels-last, SGD with
  momentum, one fixed batch of 8 random 3×64×64 images (the oracle-cpu recording's workload);
- two profiler settings, ``record_shapes=False`` and ``record_shapes=True``, both with
  ``activities=[CPU]``, ``profile_memory=True`` (so the allocator's own records say how
  much memory each operator held), no stacks, no FLOPs; ``schedule(wait=0, warmup=1,
  active=STEPS, repeat=1)``;
- each run in a fresh Python process (so the peak resident memory is that run's own), the
  two settings alternating, ``--repeats`` times each, ``OMP_NUM_THREADS=1``.

Per run it writes: each active step's wall time (``perf_counter_ns`` around the step, in
ns), the process's peak resident set size so far (``ru_maxrss``, KiB on Linux) after the
warm-up (``before_profiler``), at the last recorded step (``recording``), after the profiler
stopped (``after_stop``: it has turned its records into events) and after
``export_chrome_trace`` (``after_export``), the peak of the
allocator's ``Total Allocated`` over the trace's ``[memory]`` records (bytes), the trace's
event count and compact-JSON size, and the number of ``aten::copy_``/``aten::clone`` events
(the "extra copies" the note warns about would show there).

The result JSON (``runs``: one object per run; ``settings``; ``machine``) is small and
committed beside its provenance; lesson 05 reads it.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

STEPS = 8


def one_run(record_shapes: bool) -> dict:
    """Run the workload once under the profiler and return the run's figures (in-process)."""
    import resource
    import tempfile

    import torch
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None, num_classes=10).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(8, 3, 64, 64).to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (8,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    def peak_kib():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    for _ in range(3):                       # warm-up outside the profiler
        step()
    rss_before = peak_kib()
    times = []
    sched = torch.profiler.schedule(wait=0, warmup=1, active=STEPS, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched,
                                record_shapes=record_shapes, profile_memory=True) as p:
        for i in range(1 + STEPS):
            t0 = time.perf_counter_ns()
            step()
            t1 = time.perf_counter_ns()
            if i >= 1:
                times.append(t1 - t0)
            p.step()
        rss = {"recording": peak_kib()}
    rss["after_stop"] = peak_kib()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "trace.json"
        p.export_chrome_trace(str(path))
        rss["after_export"] = peak_kib()
        raw = path.read_bytes()
    events = json.loads(raw)["traceEvents"]
    mem = [e["args"]["Total Allocated"] for e in events if e.get("name") == "[memory]"]
    compact = json.dumps(events, separators=(",", ":")).encode()
    return {
        "record_shapes": record_shapes,
        "step_ns": times,
        "peak_rss_kib": {"before_profiler": rss_before, **rss},
        "peak_allocated_bytes": max(mem) if mem else None,
        "events": len(events),
        "json_bytes": len(compact),
        "copy_events": sum(e.get("name") in ("aten::copy_", "aten::clone") for e in events
                           if e.get("cat") == "cpu_op"),
        "events_with_input_dims": sum("Input Dims" in e.get("args", {}) for e in events),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--out", default="data/reference/record_shapes_cpu/result.json")
    ap.add_argument("--one", choices=["on", "off"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one_run(a.one == "on")))
        return
    env = dict(os.environ, OMP_NUM_THREADS="1")
    runs = []
    for r in range(a.repeats):
        for setting in ("off", "on") if r % 2 == 0 else ("on", "off"):
            out = subprocess.run([sys.executable, __file__, "--one", setting], env=env, check=True,
                                 capture_output=True, text=True).stdout
            runs.append(dict(json.loads(out.strip().splitlines()[-1]), repeat=r))
            print(setting, r, sorted(runs[-1]["step_ns"])[STEPS // 2] / 1e6, "ms", file=sys.stderr)
    import torch
    import torchvision
    result = {
        "what": "record_shapes off vs on, ResNet-18 CPU training steps under torch.profiler (tools/measure_record_shapes.py)",
        "settings": {"model": "torchvision resnet18, 10 classes, channels_last, SGD momentum 0.9",
                     "batch": [8, 3, 64, 64], "active_steps": STEPS, "warmup_steps": 1, "repeats": a.repeats,
                     "activities": ["CPU"], "profile_memory": True, "with_stack": False, "with_flops": False,
                     "OMP_NUM_THREADS": 1, "order": "off/on alternating, a fresh process per run"},
        "machine": {"torch": torch.__version__, "torchvision": torchvision.__version__,
                    "python": platform.python_version(), "platform": platform.platform(),
                    "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d", time.gmtime())},
        "runs": runs,
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    print(a.out)


if __name__ == "__main__":
    main()
