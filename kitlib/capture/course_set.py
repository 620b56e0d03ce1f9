"""Record, on one GPU, every bundle the lessons replay, under the names they expect.

``python -m kitlib record-course --out DIR`` writes one folder per recording the lessons
read: ``profiler_5step`` (recipe ``full`` and a 3-step ``memory_snapshot.pickle``),
``fixed_batch`` (``full`` with the loader, plus ``flop_counter_one_step.json``),
``cold_start_8step``, ``nsys_8step`` and ``nsys_emit_nvtx`` (need ``nsys``),
``ranks_balanced`` and ``ranks_straggler`` (torchrun, :func:`kitlib.capture.distributed.torchrun_plan`)
and ``ncu`` (needs ``ncu``). With ``KITLIB_REPLAY_DIR=DIR`` every lesson replays them
instead of the kit's (:func:`kitlib.readers.bundle.find_recording`); a step whose tool is
missing is skipped, and the lessons read the kit's recording of that name."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import KitError
from ..paths import make_folder

#: The ``ncu`` options of the reference ``ncu`` recording (its manifest's command).
NCU_OPTIONS = ["--clock-control", "none", "-k", "regex:conv", "--launch-count", "3",
               "--section", "SpeedOfLight", "--section", "LaunchStats", "--section", "Occupancy",
               "--csv", "--page", "details"]


@dataclass
class Step:
    """One bundle of the plan: its folder name, how it is made, the tool it needs, whether it runs here."""

    name: str
    how: str
    needs: str = "a CUDA GPU"
    runs: bool = True
    why_not: str = ""
    run: object = field(default=None, repr=False)


def plan(out, device: str = "cuda", nsys=None, ncu=None) -> list[Step]:
    """What ``record-course`` would do, in running order, without doing it (``device``:
    ``cuda``, or ``cpu`` for a tiny try-out; ``nsys``/``ncu``: the tools, else found)."""
    from . import experiments, recipes
    from .nsys_recipes import NsysNotFound, capture_nsys, find_nsys
    from .workload import WorkloadConfig
    out = Path(out)
    tiny = dict(batch_size=2, image_size=64, steps=1, synthetic_images=101, num_workers=0) if device == "cpu" else {}

    def cfg():
        return WorkloadConfig.for_device(device, **tiny)

    def profiler_5step():
        cap = recipes.capture(cfg(), "full", out / "profiler_5step", notes="record-course: profiler_5step")
        if device != "cpu":
            snap = recipes.memory_history(cfg(), steps=3, out_dir=out / ".memory_history")
            _adopt(cap.path, snap.path, "memory_snapshot.pickle")
        return cap

    def fixed_batch():
        cap = recipes.capture(cfg(), "full", out / "fixed_batch", notes="record-course: fixed_batch")
        counts = experiments.workload_step_flops(cfg())
        (cap.path / "flop_counter_one_step.json").write_text(json.dumps(counts, indent=1) + "\n")
        _add_files(cap.path, {"flop_counter_one_step.json": "torch.utils.flop_counter.FlopCounterMode "
                                                            "totals for one full training step"})
        return cap

    steps = [
        Step("profiler_5step", "torch.profiler recipe 'full' (5 active steps, loader) + memory snapshot "
                               "of 3 steps (memory_history)", run=profiler_5step),
        Step("fixed_batch", "torch.profiler recipe 'full' + FlopCounterMode count of one step",
             run=fixed_batch),
        Step("cold_start_8step", "torch.profiler recipe 'cold_start' (8 steps from a fresh loader)",
             run=lambda: recipes.capture(cfg(), "cold_start", out / "cold_start_8step",
                                         notes="record-course: cold_start_8step")),
    ]
    try:
        exe = str(find_nsys(nsys))
        nsys_why = ""
    except NsysNotFound as e:
        exe, nsys_why = None, str(e).split(". ")[0]
    for name, recipe in (("nsys_8step", "nsys_8step"), ("nsys_emit_nvtx", "emit_nvtx")):
        steps.append(Step(name, f"Nsight Systems recipe '{recipe}'", needs="nsys (Nsight Systems)",
                          runs=exe is not None, why_not=nsys_why,
                          run=lambda r=recipe, n=name: capture_nsys(r, out / n, nsys=exe,
                                                                    notes=f"record-course: {n}")))
    from .distributed import STRAGGLER_MS, run_torchrun, torchrun_plan
    ranks = torchrun_plan() if device != "cpu" else None
    for name, slow in (("ranks_balanced", False), ("ranks_straggler", True)):
        how = (f"torchrun, {ranks['nproc']} ranks ({ranks['backend']}), recipe 'light', 3 steps"
               + (f", rank 1 sleeping {STRAGGLER_MS:g} ms a step" if slow else "")) if ranks else "torchrun, two ranks"
        steps.append(Step(name, how, needs="torchrun (torch.distributed)",
                          run=lambda n=name, sl=slow: run_torchrun(out / n, sl)))
    ncu_exe = ncu or shutil.which("ncu")
    steps.append(Step("ncu", "Nsight Compute over one training step: " + " ".join(NCU_OPTIONS),
                      needs="ncu (Nsight Compute)", runs=ncu_exe is not None,
                      why_not="" if ncu_exe else "ncu is not on the PATH",
                      run=lambda: record_ncu(out / "ncu", ncu_exe, device)))
    if device == "cpu":
        for s in steps:
            if s.needs.startswith("torchrun"):
                s.runs, s.why_not = False, "two ranks of the full workload take minutes on a CPU; this is the CPU try-out"
            elif s.needs != "a CUDA GPU":
                s.runs, s.why_not = False, f"{s.needs} profiles a GPU; this is the CPU try-out"
    return steps


def plan_text(steps, out) -> str:
    """The plan as lines: each folder, how it is made, or why it is skipped."""
    lines = [f"record-course into {Path(out)}:"]
    for s in steps:
        state = "record" if s.runs else f"skip ({s.why_not})"
        lines.append(f"  {s.name:<17} {state}: {s.how}")
    return "\n".join(lines)


def record_course(out, device: str = "cuda", nsys=None, ncu=None, dry_run: bool = False,
                  echo=print) -> list[Step]:
    """Record every bundle of :func:`plan` into ``out`` (a new or empty folder), or with
    ``dry_run`` only print the plan. Returns the plan.

    Raises :class:`KitError`: ``cuda`` without a GPU, or without the free memory for the
    reference batch (a smaller one would not stand in for the references,
    :func:`kitlib.capture.gpu_memory.live_memory_plan`); ``out`` a file or not empty."""
    out = Path(out)
    steps = plan(out, device, nsys, ncu)
    echo(plan_text(steps, out))
    if dry_run:
        return steps
    if device == "cuda":
        import torch
        if not torch.cuda.is_available():
            raise KitError("record-course records the course GPU's bundles, and torch sees no CUDA GPU here "
                           "(--device cpu tries the command with a tiny workload)")
        # the bundles stand in for the references, so they need the reference batch: no smaller one
        from .gpu_memory import free_gpu_bytes, live_memory_plan
        mem = live_memory_plan(free_gpu_bytes())
        if mem["batch_size"] != 128:
            raise KitError(f"record-course records the reference workload (batch 128), and {mem['message']} "
                           "Free the GPU (nvidia-smi lists what holds it) or record on a larger one; until then "
                           "students replay the kit's recordings")
    make_folder(out, "record-course --out", empty=True)       # a file, a folder in use: refused in words
    for s in steps:
        if not s.runs:
            continue
        t0 = time.perf_counter()
        echo(f"-- {s.name} ...")
        s.run()
        echo(f"   {s.name} done in {time.perf_counter() - t0:,.0f} s")
    shutil.rmtree(out / ".memory_history", ignore_errors=True)
    echo(f"done. Students: set KITLIB_REPLAY_DIR={out.resolve()} (python -m kitlib info shows what is used)")
    return steps


def _add_files(folder: Path, files: dict) -> None:
    """Add files already in ``folder`` to its manifest, keeping everything else."""
    from ..readers.bundle import MANIFEST, write_bundle
    m = json.loads((folder / MANIFEST).read_text())
    listed = {k: v.get("what", "") for k, v in m["files"].items()}
    listed.update(files)
    keep = {k: v for k, v in m.items() if k not in ("format", "kind", "name", "origin", "created", "recipe",
                                                    "workload", "provenance", "notes", "files")}
    write_bundle(folder, kind=m["kind"], name=m["name"], files=listed, recipe=m.get("recipe"),
                 workload=m.get("workload"), provenance=m.get("provenance"), origin=m.get("origin", "live"),
                 notes=m.get("notes", ""), extra=keep)


def _adopt(folder: Path, other: Path, fname: str) -> None:
    shutil.move(str(other / fname), str(folder / fname))
    _add_files(folder, {fname: f"from a memory_history run right after (see {other.name}'s recipe)"})


def record_ncu(out: Path, ncu: str, device: str = "cuda") -> Path:
    """Run ``ncu`` (:data:`NCU_OPTIONS`) over one training step and write an ``ncu`` bundle with
    ``conv_kernels_speed_of_light.csv``. Raises :class:`KitError` when ncu fails (``ncu.log``)."""
    from ..readers.bundle import software_provenance, write_bundle
    out.mkdir(parents=True, exist_ok=False)
    csv = out / "conv_kernels_speed_of_light.csv"
    cmd = [ncu, *NCU_OPTIONS, sys.executable, "-m", "kitlib.capture.nsys_recipes", "run-workload",
           "--steps", "1", "--warmup-steps", "1", "--device", device]
    with open(csv, "w") as f, open(out / "ncu.log", "w") as log:
        rc = subprocess.run(cmd, stdout=f, stderr=log).returncode
    if rc != 0 or csv.stat().st_size == 0:
        raise KitError(f"{out / 'ncu.log'}: ncu exited with {rc}: " + " ".join(cmd))
    write_bundle(out, kind="ncu", name="ncu", files={"conv_kernels_speed_of_light.csv": "ncu --csv --page details",
                                                     "ncu.log": "ncu's messages"},
                 recipe={"command": " ".join(cmd)}, provenance=software_provenance(), origin="live",
                 notes="record-course: ncu")
    return out
