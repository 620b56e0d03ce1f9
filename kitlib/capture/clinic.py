"""The clinic (issue 30): training jobs with one planted cause each, recorded in pairs.

``python -m kitlib record-clinic --out DIR [--device cpu|cuda] [--cases a,b,...] [--smallest]``
writes ``DIR/clinic.json`` (neutral case names, symptoms, folders), ``DIR/baseline/`` (and
``baseline_deep/`` ..., the healthy runs the cases compare with) and per case
``case_x/before/`` and ``case_x/after/``: a ``shapes`` trace of 3 active steps,
``key_averages.json`` and ``step_times.json`` (uninstrumented steps and the process's RSS
and load, :func:`kitlib.capture.workload.time_steps`). Manifests are stripped of every
setting that names the cause (:func:`public_manifest`); the causes live only in
:data:`CASES` and :func:`answer_key`. GPU-only cases are skipped on the CPU, where the
recorder sets ``torch.set_num_threads(1)``.

Sources: docs/SOURCES.md#clinic-design"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import KitError, KitFileError
from ..paths import make_folder

FORMAT = "kitlib-clinic/1"

#: Every bundle: recipe ``shapes``, 3 active steps after 4 warm-up and 30 uninstrumented timed steps.
ACTIVE_STEPS = 3
PRE_STEPS = 4
TIMING_STEPS = 30
#: ``--smallest`` (CI); 5 timed steps are the least lesson 10's interval takes.
SMALLEST = {"active": 2, "pre_steps": 1, "timing_steps": 5, "synthetic_images": 202}

#: The healthy workloads (CPU: small enough that two loader workers keep up on 2 cores).
CPU_BASE = dict(model="small_cnn", batch_size=16, image_size=64, synthetic_images=512, synthetic_px=64,
                num_workers=2, persistent_workers=True, channels_last=True, fused=True)
CUDA_BASE = dict(model="resnet50", batch_size=64, image_size=224, synthetic_images=1792,
                 num_workers=8, persistent_workers=True, pin_memory=True, channels_last=True, fused=True)


@dataclass(frozen=True)
class ClinicCase:
    """One case: a job with one planted cause, its fix, and where the cause shows.

    ``letter`` names it (``case_<letter>``); ``cause_id``, ``cause``, ``fix`` and ``evidence``
    are the answer key's; ``symptom`` is all a lesson says. ``before``/``after`` are
    :class:`~kitlib.capture.workload.WorkloadConfig` settings over the device's base
    (:data:`CPU_BASE`, :data:`CUDA_BASE`), plus optional ``recipe``, ``active_steps``,
    ``timing_steps`` and ``busy_procs`` (busy loops beside the job, :func:`_busy`);
    ``cuda_before``/``cuda_after`` replace them on a GPU. ``cpu``: the cause shows on a CPU
    (else ``cpu_note`` says why not); ``ranks``: recorded as two torchrun ranks."""

    letter: str
    cause_id: str
    cause: str
    fix: str
    symptom: str
    evidence: str
    before: dict
    after: dict
    cpu: bool = True
    cpu_note: str = ""
    ranks: bool = False
    cuda_before: dict = field(default_factory=dict)
    cuda_after: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        """``case_<letter>``."""
        return f"case_{self.letter}"

    def settings(self, side: str, device: str = "cpu") -> dict:
        """The settings over the base workload for ``side`` on ``device``."""
        d = dict(self.before if side == "before" else self.after)
        if device == "cuda":
            d.update(self.cuda_before if side == "before" else self.cuda_after)
        return d


#: The many-operator job of the optimiser and overhead cases (per-operator costs dominate).
DEEP_CPU = {"model": "deep_cnn", "image_size": 32, "batch_size": 8}
DEEP_CUDA = {"model": "resnet50", "image_size": 224, "batch_size": 64}

#: The layout case on the CPU: activations large enough that the layout copies cost a third
#: of the step (65 ms before, 42 ms after, 2 December).
DEEP_LAYOUT_CPU = {"model": "deep_cnn", "image_size": 64, "batch_size": 16}

#: Rank 1's unlabelled sleep per step, ms.
STRAGGLER_MS = 40.0

#: The recipes of the profiling-overhead case and of the memory case (:func:`_recipe`).
HEAVY = "heavy"
MEMORY = "shapes_memory"

#: The busy-machine case's loops start this long (s) before its job, so the 1-minute load has
#: risen, and stop this long before the next recording, so it has fallen.
BUSY_WARM_S = 60
BUSY_SETTLE_S = 150

#: The cases, by letter (not in issue 30's order).
CASES: dict = {c.letter: c for c in [
    ClinicCase(
        "a", "channels_first_blocks", "every block of the channels-last model ends with x.contiguous() (written "
        "'to be safe before a view'): contiguous() means channels-first, so each block hands the next a "
        "channels-first copy that the next convolution converts back, in forward and again in backward",
        "drop the call, or keep the layout: x.contiguous(memory_format=torch.channels_last)",
        "Since a colleague tidied up the model's code, each step takes markedly longer; the layers and "
        "their sizes are the same.",
        "torch.profiler trace / key_averages by name: aten::contiguous (each with aten::clone and aten::copy_ "
        "under it) about twice per block inside the forward range, every step, and more in backward; the "
        "healthy run has none inside forward. On a GPU: layout-conversion kernels around every block.",
        before={**DEEP_LAYOUT_CPU, "contiguous_blocks": True}, after=DEEP_LAYOUT_CPU,
        cuda_before=DEEP_CUDA, cuda_after=DEEP_CUDA),
    ClinicCase(
        "b", "straggler_rank", f"rank 1 does {STRAGGLER_MS:g} ms of unlabelled extra host work at the start "
        "of every step, so rank 0 waits for it at its next collective (the gloo broadcast that opens "
        "forward, then the gradient all-reduces)",
        "remove (or move off the step, or spread over all ranks) rank 1's extra work",
        "Two-rank data-parallel training takes longer per step than one rank did on half the data.",
        "the two rank traces (kitlib.load_traces, lesson 12): rank 0 waits in gloo's collectives about "
        f"{STRAGGLER_MS:g} ms per step, mostly in the broadcast inside forward, and rank 1 arrives last at almost every collective "
        "(collectives.straggler_summary); rank 1's steps open with an unlabelled gap before data_load",
        before={"straggler_rank": 1, "straggler_ms": STRAGGLER_MS, "straggler_label": False}, after={},
        ranks=True),
    ClinicCase(
        "c", "loader_in_main_process", "the DataLoader has num_workers=0: every batch is decoded and "
        "transformed in the training process, inside data_load, while the model waits",
        "num_workers > 0 (2 on this CPU, 8 on the course GPU), persistent_workers=True",
        "Steps take about twice as long as the team expected from the model's size.",
        "torch.profiler trace: the data_load range's share of the step (most of it), with the transform's "
        "operators (aten::div_, aten::sub_, aten::to from ToTensor/Normalize) inside it and "
        "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__; the healthy run's data_load is a "
        "short wait with no operators",
        before={"num_workers": 0, "persistent_workers": False, "synthetic_px": 256},
        after={"synthetic_px": 256}, cuda_before={"synthetic_px": 512}, cuda_after={"synthetic_px": 512}),
    ClinicCase(
        "d", "profiler_overhead", "nothing is wrong with the job: the profile was recorded with shapes, "
        "Python stacks and memory on, and the profiler's own overhead was taken for slowness",
        "judge speed on uninstrumented step times; profile with the lightest recipe that answers the "
        "question (record_shapes only, or none)",
        "Under the profiler every step takes far longer than the team's own timing loop says.",
        "step_times.json: step_ms_profiled median over step_ms_uninstrumented median (the instrumented "
        "step is much slower, the uninstrumented one is as fast as the baseline's); the trace holds "
        "python_function events and [memory] records, which the other recordings do not",
        before={"recipe": HEAVY, "active_steps": 5, **DEEP_CPU}, after={"active_steps": 5, **DEEP_CPU},
        cuda_before=DEEP_CUDA, cuda_after=DEEP_CUDA),
    ClinicCase(
        "e", "optimizer_per_tensor", "SGD runs its per-parameter loop (foreach and fused off): 8 small "
        "operators per parameter tensor (102 tensors) every step, 4 called by the loop and 4 beneath them",
        "torch.optim.SGD(..., fused=True) (on a GPU foreach=True, PyTorch's default there, or fused=True)",
        "A deep but narrow model spends more time per step than its arithmetic explains.",
        "key_averages by name / the optimizer range in the trace: several hundred aten::add_/mul_ calls "
        "per step inside optimizer (816: 8 per parameter tensor) and the optimizer's share of the step; "
        "with the fix: one aten::_fused_sgd_ call",
        before={**DEEP_CPU, "fused": None, "foreach": False}, after=DEEP_CPU,
        cuda_before=DEEP_CUDA, cuda_after=DEEP_CUDA),
    ClinicCase(
        "f", "anomaly_detection", "torch.autograd.set_detect_anomaly(True) was left on from debugging: "
        "every backward node's outputs are checked for NaN (and on a GPU read back to the host)",
        "turn anomaly detection off outside debugging",
        "Training became slower last week; the team says the model and the data did not change.",
        "key_averages by name: aten::isnan, aten::any and aten::item (aten::_local_scalar_dense) once per "
        "backward node, dozens per step; none in the healthy run",
        before={"detect_anomaly": True}, after={}),
    ClinicCase(
        "g", "tiny_batches", "batches of 2 images: the step is a few hundred short operators whose fixed "
        "per-call cost outweighs the arithmetic (on a GPU: launch-bound, idle between short kernels)",
        "a larger batch (16 here; as large as memory and the optimisation allow), or fewer, larger "
        "operators (torch.compile, CUDA graphs)",
        "Throughput (images per second) is a fraction of what the team measured on a colleague's run.",
        "trace: the convolutions' Input Dims show 2 images per step, and forward+backward costs several "
        "times the healthy run's per image; key_averages: the same operators and counts per step as the "
        "healthy run, each call shorter",
        before={"batch_size": 2}, after={}, cuda_before={"batch_size": 4}),
    ClinicCase(
        "h", "slow_transform", "the transform upscales every image to 512 px (Resize(512)) before "
        "cropping 64 px: the workers cannot keep up, so the training process waits in data_load",
        "remove the upscaling (crop from the stored image); if a transform must stay costly, more workers",
        "The steps are much slower than the baseline run's, on the same model and batch.",
        "torch.profiler trace: data_load is most of the step although it holds no operators (the "
        "workers do the work; _MultiProcessingDataLoaderIter.__next__ waits); the healthy run's "
        "data_load is short",
        before={"pre_resize_px": 512}, after={}, cuda_before={"pre_resize_px": 1024}),
    ClinicCase(
        "i", "sync_every_step", "loss.item() after every step: the host waits for the GPU to finish the "
        "step before it can queue the next one, so the GPU idles while the host prepares",
        "read the loss every N steps, or accumulate it on the GPU and read it once",
        "GPU utilisation is about 60 % although the loader is fast.",
        "trace: one cudaStreamSynchronize (or a blocking cudaMemcpyAsync DtoH from aten::item) per step "
        "and a GPU idle gap at every step boundary",
        before={"sync_every_step": True}, after={}, cpu=False,
        cpu_note="on a CPU every operator has finished when it returns, so loss.item() waits for nothing"),
    ClinicCase(
        "j", "pageable_blocking_copies", "pin_memory=False and non_blocking=False: each batch is copied "
        "from pageable memory through a staging buffer and the host waits for the copy",
        "pin_memory=True in the DataLoader and .to(device, non_blocking=True)",
        "The host-to-device copies take far longer than the link's bandwidth allows.",
        "trace: Memcpy HtoD (Pageable) instead of (Pinned), its bandwidth in GB/s far below the pinned "
        "run's, and the host blocked in cudaMemcpyAsync for the copy's duration",
        before={"pin_memory": False, "non_blocking": False}, after={}, cpu=False,
        cpu_note="on a CPU there is no host-to-device copy"),
    ClinicCase(
        "k", "loss_kept_as_tensor", "the loop keeps a running loss as a tensor (total += loss, not "
        "loss.item()): the total carries the autograd history of every step's loss, so every step's graph "
        "stays alive and the process's memory grows every step; the tensors torch.profiler records are freed "
        "as usual, so its memory records net to zero in every step after the first active one",
        "accumulate a number: total += loss.item() (or loss.detach())",
        "The job's memory grows step after step until the machine stops it after some hours; the "
        "profiler's memory view shows no tensor left allocated at the end of a step.",
        "step_times.json's process.rss_bytes_after_step: the process's RSS grows by about 100 kB every "
        "timed step (last minus first over the steps between), the fixed job's by little; the trace's "
        "[memory] records (profile_memory on, both sides) net to 0 bytes in every active step after the "
        "first, as the fixed job's do",
        before={**DEEP_CPU, "keep_loss_tensor": True, "recipe": MEMORY, "timing_steps": 200},
        after={**DEEP_CPU, "recipe": MEMORY, "timing_steps": 200}, cuda_before=DEEP_CUDA, cuda_after=DEEP_CUDA),
    ClinicCase(
        "l", "busy_machine", "nothing in the job: the same job, code and settings as the healthy run, timed "
        "while other processes (busy loops started beside it by the recorder) shared the machine's cores; "
        "the same operators, counts per step and shapes, only slower",
        "no code change: time both runs interleaved (ABBA blocks) on the same machine, at a known, quiet load",
        "Timed a quarter of an hour after an earlier run on the team's shared machine, this run's steps are "
        "markedly slower; the team is sure a code change did it.",
        "key_averages by name and by input shape: the same operators, counts per step and shapes as the "
        "healthy run; step_times.json's process: the 1-minute load average around the timed steps well "
        "above the cores, and the process's CPU time a fraction of the wall time",
        before={"busy_procs": 4}, after={}),
]}


def cases_for(device: str = "cpu", letters=None) -> list:
    """The cases recorded on ``device`` (the CPU: only those with ``cpu``), optionally only
    ``letters``. Raises :class:`KitError` for an unknown letter or a GPU-only case asked for on
    the CPU."""
    wanted = list(CASES) if not letters else [str(x).strip().lower().removeprefix("case_") for x in letters]
    out = []
    for x in wanted:
        if x not in CASES:
            raise KitError(f"no clinic case {x!r}; cases: {', '.join('case_' + k for k in CASES)}")
        c = CASES[x]
        if device == "cpu" and not c.cpu:
            if letters:
                raise KitError(f"{c.name} shows only on a GPU ({c.cpu_note}); record it with --device cuda")
            continue
        out.append(c)
    return out


@dataclass
class Recording:
    """One bundle of the plan: its folder, settings and recipe, and for two ranks the torchrun command."""

    folder: str
    settings: dict
    recipe: str
    case: str | None = None
    side: str | None = None
    command: list | None = None
    active: int | None = None
    timing: int | None = None
    busy: int = 0


def base_settings(device: str = "cpu", smallest: bool = False) -> dict:
    """The healthy workload on ``device`` (:data:`CPU_BASE`, :data:`CUDA_BASE`)."""
    base = dict(CUDA_BASE if device == "cuda" else CPU_BASE)
    if smallest:
        base["synthetic_images"] = SMALLEST["synthetic_images"]
    return base


def plan(device: str = "cpu", letters=None, smallest: bool = False, out=".") -> list:
    """What ``record-clinic`` records, in order, without running anything: ``baseline`` and the
    other healthy runs, then ``case_x/before`` and ``case_x/after`` per case (``out`` goes into
    the two-rank case's command). Raises :class:`KitError` as :func:`cases_for`, or for a device
    other than cpu or cuda."""
    if device not in ("cpu", "cuda"):
        raise KitError(f"record-clinic: device must be cpu or cuda, not {device!r}")
    base = base_settings(device, smallest)
    out = Path(out)
    recs = [Recording("baseline", dict(base), "shapes")]
    for name, shape in _healthy_runs(device, letters)[1].items():
        if name != "baseline":
            recs.append(Recording(name, {**base, **shape}, "shapes"))
    for c in cases_for(device, letters):
        for side in ("before", "after"):
            s = {**base, **c.settings(side, device)}
            recipe = s.pop("recipe", "shapes")
            active = s.pop("active_steps", None)
            timing, busy = s.pop("timing_steps", None), s.pop("busy_procs", 0)
            folder = f"{c.name}/{side}"
            cmd = torchrun_command(s, recipe, out / folder, device, smallest) if c.ranks else None
            recs.append(Recording(folder, s, recipe, c.name, side, cmd, active,
                                  None if smallest else timing, busy))
    return recs


def _recipe(name: str, smallest: bool):
    from .recipes import Recipe, get_recipe
    if name == HEAVY:
        rec = Recipe(HEAVY, record_shapes=True, profile_memory=True, with_stack=True,
                     description="wait=1 warmup=1 active=N with shapes, Python stacks and memory")
    elif name == MEMORY:
        rec = Recipe(MEMORY, record_shapes=True, profile_memory=True,
                     description="wait=1 warmup=1 active=N with shapes and memory records")
    else:
        rec = get_recipe(name)
    small = SMALLEST if smallest else {}
    return rec.replace(active=small.get("active", ACTIVE_STEPS), pre_steps=small.get("pre_steps", PRE_STEPS),
                       timing_steps=small.get("timing_steps", TIMING_STEPS))


def torchrun_command(settings: dict, recipe: str, out, device: str = "cpu", smallest: bool = False) -> list:
    """The two-rank recording's command: ``python -m torch.distributed.run --standalone
    --nproc_per_node=2 -m kitlib.capture.clinic --ranks JOB_JSON OUT``; NCCL where ``cuda`` has
    two GPUs, else Gloo (:func:`kitlib.capture.distributed.torchrun_plan`)."""
    dev = "cpu"
    if device == "cuda":
        from .distributed import torchrun_plan
        dev = torchrun_plan()["device"]
    job = {"settings": {**settings, "device": dev}, "recipe": recipe, "smallest": bool(smallest)}
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
            "-m", "kitlib.capture.clinic", "--ranks", json.dumps(job), str(out)]


#: The keys a shipped manifest keeps: the job, not its cause (not the batch: the tiny-batch
#: case's cause would be one field away).
PUBLIC_WORKLOAD = ("model", "image_size", "device_resolved", "dataset", "dataset_kind",
                   "dataset_images", "labels", "loss", "torch_num_threads", "seed")
PUBLIC_RECIPE = ("kind", "schedule", "activities", "pre_steps", "timing_steps", "use_schedule")


def public_manifest(manifest: dict, name: str) -> dict:
    """A manifest as the clinic ships it: only :data:`PUBLIC_WORKLOAD` and :data:`PUBLIC_RECIPE`
    keys, ``name`` neutral, ``notes`` naming only the case and side."""
    m = dict(manifest)
    m["name"] = name
    m["workload"] = {k: v for k, v in (manifest.get("workload") or {}).items() if k in PUBLIC_WORKLOAD}
    m["recipe"] = {k: v for k, v in (manifest.get("recipe") or {}).items() if k in PUBLIC_RECIPE}
    m["notes"] = f"clinic {name.replace('_', ' ')} (python -m kitlib record-clinic)"
    return m


def _publish(folder: Path, name: str) -> None:
    """Publish a bundle: :func:`public_manifest`, and ``key_averages.json`` without ``batch_size``."""
    from ..readers.bundle import MANIFEST
    from ..readers.files import sha256_of
    p = folder / MANIFEST
    m = public_manifest(json.loads(p.read_text()), name)
    ka_path = folder / "key_averages.json"
    if ka_path.is_file():
        ka = json.loads(ka_path.read_text())
        if "batch_size" in ka:
            del ka["batch_size"]
            ka_path.write_text(json.dumps(ka) + "\n")
        entry = (m.get("files") or {}).get("key_averages.json")
        if entry is not None:
            entry["sha256"], entry["bytes"] = sha256_of(ka_path), ka_path.stat().st_size
    p.write_text(json.dumps(m, indent=1) + "\n")


def _config(settings: dict, device: str):
    """The ``WorkloadConfig`` of ``settings``; a ``None`` value means PyTorch's default, set after
    ``for_device`` (which ignores ``None``)."""
    from .workload import WorkloadConfig
    s = {k: v for k, v in settings.items() if k != "device"}
    cfg = WorkloadConfig.for_device(device, **{k: v for k, v in s.items() if v is not None})
    for k, v in s.items():
        if v is None:
            setattr(cfg, k, None)
    return cfg.validate()


def record_one(rec: Recording, out: Path, device: str = "cpu", smallest: bool = False) -> Path:
    """Record one bundle of :func:`plan` into ``out / rec.folder`` and publish it. Raises
    :class:`KitError` when it fails (torchrun's last lines in the message)."""
    target = out / rec.folder
    name = rec.folder.replace("/", "_")
    if rec.command:
        res = subprocess.run(rec.command, capture_output=True, text=True, timeout=900,
                             env={**os.environ, "PYTHONUNBUFFERED": "1", "KINETO_LOG_LEVEL": "6",
                                  "TORCH_CPP_LOG_LEVEL": "ERROR"})
        if res.returncode != 0:
            tail = "\n".join((res.stdout + res.stderr).strip().splitlines()[-12:])
            raise KitError(f"torchrun for {rec.folder} failed (exit {res.returncode}):\n{tail}")
    else:
        from .recipes import capture
        recipe = _recipe(rec.recipe, smallest)
        if rec.active:
            recipe = recipe.replace(active=rec.active)
        if rec.timing:
            recipe = recipe.replace(timing_steps=rec.timing)
        cfg = _config(rec.settings, device)
        cfg.steps = recipe.active            # the CPU defaults' steps=3 would replace the recipe's
        with _busy(rec.busy, 0 if smallest else BUSY_WARM_S, 0 if smallest else BUSY_SETTLE_S):
            capture(cfg, recipe, target, progress=False)
        _update_step_times(target, {"uninstrumented_order": f"one run: {recipe.timing_steps} steps in a row after "
                                                            f"{recipe.pre_steps} untimed steps, not interleaved "
                                                            "with another job"})
    _publish(target, name)
    return target


@contextlib.contextmanager
def _busy(procs: int, warm_s: float, settle_s: float):
    """``procs`` busy loops started ``warm_s`` before the block, killed after it, then ``settle_s``
    of waiting."""
    if not procs:
        yield
        return
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(procs)]
    try:
        time.sleep(warm_s)
        yield
    finally:
        for p in loops:
            p.kill()
            p.wait()
    time.sleep(settle_s)


#: :func:`time_interleaved`'s blocks and steps a side (Sources: docs/SOURCES.md#clinic-interleaved).
BLOCK_STEPS = 10
INTERLEAVED_STEPS = 200


def time_interleaved(before: dict, after: dict, device: str = "cpu", steps: int = INTERLEAVED_STEPS,
                     block: int = BLOCK_STEPS, warmup: int = PRE_STEPS) -> dict:
    """Uninstrumented step times of a case's two jobs, timed in alternating ABBA blocks of
    ``block`` steps until each side has ``steps``; each block a fresh job after ``warmup``
    untimed steps, one job alive at a time.

    Returns ``{"before": [ms], "after": [ms], "order": str, "process": {"before": {...},
    "after": {...}}}`` (``process`` as :func:`kitlib.capture.workload.time_steps` fills it).

    Sources: docs/SOURCES.md#clinic-interleaved"""
    from .workload import build_workload, time_steps
    configs = {"before": before, "after": after}
    out = {"before": [], "after": [], "process": {"before": {}, "after": {}}}
    for side, n in _blocks(steps, block):
        with build_workload(_config(configs[side], device), progress=False) as wl:
            out[side] += time_steps(wl, n, warmup=warmup, process=out["process"][side])
    out["order"] = (f"interleaved with the other side: ABBA blocks of {block} steps, each block a fresh "
                    f"job after {warmup} untimed steps")
    return out


def _blocks(steps: int, block: int) -> list:
    """(side, steps) blocks in ABBA order until each side has ``steps``."""
    out, done, i = [], 0, 0
    while done < steps:
        n = min(block, steps - done)
        pair = [("before", n), ("after", n)] if i % 2 == 0 else [("after", n), ("before", n)]
        out += pair
        done += n
        i += 1
    return out


def _retime(out: Path, case_name: str, times: dict) -> None:
    """Write the interleaved times into both bundles' ``step_times.json``."""
    for side in ("before", "after"):
        up = {"step_ms_uninstrumented": times[side], "uninstrumented_order": times["order"]}
        if "process" in times:          # the load during the interleaved blocks (the RSS stays the recording's)
            up["process_interleaved"] = {k: v for k, v in times["process"][side].items()
                                         if k != "rss_bytes_after_step"}
        _update_step_times(out / case_name / side, up)


def _update_step_times(folder: Path, updates: dict) -> None:
    """Set ``updates`` in a bundle's ``step_times.json`` and its sha256 and size in the manifest."""
    from ..readers.bundle import MANIFEST
    from ..readers.files import sha256_of
    st_path = folder / "step_times.json"
    st = json.loads(st_path.read_text())
    st.update(updates)
    st_path.write_text(json.dumps(st, indent=1) + "\n")
    m_path = folder / MANIFEST
    m = json.loads(m_path.read_text())
    entry = m["files"]["step_times.json"]
    entry["sha256"], entry["bytes"] = sha256_of(st_path), st_path.stat().st_size
    m_path.write_text(json.dumps(m, indent=1) + "\n")


def _rank_main(job_json: str, out: str) -> int:
    """One rank of the two-rank recording (:func:`torchrun_command`)."""
    import torch
    from .distributed import capture_ranks, exit_rank, leave_together
    job = json.loads(job_json)
    s = job["settings"]
    if s.get("device", "cpu") == "cpu":
        torch.set_num_threads(1)
    with leave_together():
        recipe = _recipe(job["recipe"], job["smallest"])
        cfg = _config(s, s.get("device", "cpu"))
        cfg.steps = recipe.active
        capture_ranks(cfg, recipe, out, progress=False)
    exit_rank(0)


#: The settings a case's healthy run shares with its fixed job.
SHAPE_KEYS = ("model", "image_size", "batch_size")


def _job_shape(settings: dict, device: str) -> tuple:
    base = base_settings(device)
    return tuple({**base, **settings}[k] for k in SHAPE_KEYS)


def _healthy_runs(device: str, letters=None) -> tuple:
    """``(by_case, shapes)``: per case the folder of its healthy run (the base job with the shape
    of the case's *after* job: ``baseline``, ``baseline_deep`` or
    ``baseline_<model>_<px>px_b<batch>``), and per folder its shape."""
    base = _job_shape({}, device)
    deep = _job_shape(DEEP_CPU if device == "cpu" else DEEP_CUDA, device)
    by_case, shapes = {}, {}
    for c in cases_for(device, letters):
        shape = _job_shape({k: v for k, v in c.settings("after", device).items() if k in SHAPE_KEYS}, device)
        name = ("baseline" if shape == base else "baseline_deep" if shape == deep
                else "baseline_{}_{}px_b{}".format(*shape).replace("_cnn_", "_"))
        by_case[c.name] = name
        shapes.setdefault(name, dict(zip(SHAPE_KEYS, shape)))
    return by_case, shapes


def clinic_index(device: str, letters=None, smallest: bool = False) -> dict:
    """``clinic.json``: ``format``, ``device``, ``settings`` (smallest/full), ``baseline``,
    ``baselines`` and per case its ``symptom``, ``before``/``after`` folders and ``ranks``;
    nothing that names a cause."""
    return {"format": FORMAT, "device": device, "settings": "smallest" if smallest else "full",
            "baseline": "baseline",
            "baselines": _healthy_runs(device, letters)[0],
            "cases": {c.name: {"symptom": c.symptom, "before": f"{c.name}/before", "after": f"{c.name}/after",
                               "ranks": c.ranks} for c in cases_for(device, letters)}}


def record_clinic(out, device: str = "cpu", letters=None, smallest: bool = False, dry_run: bool = False,
                  echo=print) -> list:
    """Record the clinic into ``out`` (a new or empty folder; module docstring); ``smallest``: the
    CI settings (:data:`SMALLEST`); ``dry_run``: print the plan and stop. Returns the plan.

    Raises :class:`KitError`: ``out`` a file or not empty, ``cuda`` without a GPU, a failed
    recording."""
    out = Path(out)
    recs = plan(device, letters, smallest, out)
    echo(f"record-clinic into {out} on {device}" + (" (smallest settings)" if smallest else "") + ":")
    for r in recs:
        echo(f"  {r.folder:<15} " + ("torchrun, 2 ranks" if r.command else f"recipe {r.recipe}"))
    if dry_run:
        return recs
    import torch
    if device == "cuda" and not torch.cuda.is_available():
        raise KitError("record-clinic --device cuda: torch sees no CUDA GPU here (record the CPU set with "
                       "--device cpu)")
    make_folder(out, "record-clinic --out", empty=True)       # a file, a folder in use: refused in words
    if device == "cpu":
        torch.set_num_threads(1)
    (out / "clinic.json").write_text(json.dumps(clinic_index(device, letters, smallest), indent=1) + "\n")
    for r in recs:
        t0 = time.perf_counter()
        record_one(r, out, device, smallest)
        echo(f"  {r.folder} done in {time.perf_counter() - t0:,.1f} s")
    _interleave_pairs(recs, out, device, smallest, None, echo)
    return recs


def _interleave_pairs(recs: list, out: Path, device: str, smallest: bool, steps: int | None, echo) -> None:
    """Time each case's two jobs side by side (:func:`time_interleaved`) and write the times into
    both bundles; cases whose two jobs are the same, and the two-rank case, stay as recorded."""
    pairs = {}
    for r in recs:
        if r.case and not r.command:
            pairs.setdefault(r.case, {})[r.side] = r.settings
    small = SMALLEST if smallest else {}
    for name, sides in pairs.items():
        if sides["before"] == sides["after"]:
            continue
        t0 = time.perf_counter()
        times = time_interleaved(sides["before"], sides["after"], device,
                                 steps=steps or small.get("timing_steps", INTERLEAVED_STEPS),
                                 block=small.get("timing_steps", BLOCK_STEPS),
                                 warmup=small.get("pre_steps", PRE_STEPS))
        _retime(out, name, times)
        echo(f"  {name} before/after timed side by side in {time.perf_counter() - t0:,.1f} s")


def retime_clinic(folder, device: str = "cpu", letters=None, steps: int = INTERLEAVED_STEPS,
                  echo=print) -> list:
    """Time a recorded clinic's cases again, side by side (:func:`time_interleaved`, the jobs from
    :data:`CASES`), replacing only ``step_ms_uninstrumented``; returns the cases re-timed.

    Raises :class:`KitError`: no ``clinic.json`` in ``folder``, one that is not a clinic index
    (:class:`~kitlib.errors.KitFileError`), another device's, or a case asked for missing from it."""
    out = Path(folder)
    index_path = out / "clinic.json"
    if not index_path.is_file():
        raise KitError(f"{index_path}: not found; retime a folder written by record-clinic")
    from ..readers.files import read_json_file
    index = read_json_file(index_path)             # invalid or too deep JSON: a KitFileError, in words
    if not isinstance(index, dict) or not isinstance(index.get("cases", {}), dict):
        raise KitFileError(index_path, "not a clinic index: record-clinic writes a JSON object whose "
                                       "'cases' maps each case to its bundles")
    if index.get("device", "cpu") != device:
        raise KitError(f"{index_path}: recorded on {index.get('device')!r}, not {device!r}")
    recs = [r for r in plan(device, letters, False, out) if r.case]
    missing = sorted({r.case for r in recs} - set(index.get("cases", {})))
    if missing:
        raise KitError(f"{index_path}: no {', '.join(missing)} in this clinic; cases: "
                       + ", ".join(index.get("cases", {})))
    import torch
    if device == "cpu":
        torch.set_num_threads(1)
    _interleave_pairs(recs, out, device, False, steps, echo)
    return sorted({r.case for r in recs})


# --------------------------------------------------------------------------- answers
def answer_key(device: str = "cpu") -> str:
    """The answer key, as Markdown, for instructors: per case its cause, fix, evidence and both
    runs' settings."""
    base = base_settings(device)
    lines = ["# Clinic answer key", "", f"Base workload ({device}): "
             + ", ".join(f"{k}={v}" for k, v in base.items()), ""]
    for c in CASES.values():
        where = "" if c.cpu else f" (GPU only: {c.cpu_note})"
        lines += [f"## {c.name}: {c.cause_id}{where}", "", f"- symptom: {c.symptom}", f"- cause: {c.cause}",
                  f"- fix: {c.fix}", f"- evidence: {c.evidence}",
                  f"- before: {c.settings('before', device) or 'the base'}",
                  f"- after: {c.settings('after', device) or 'the base'}", ""]
    return "\n".join(lines)


def _main(argv) -> int:
    if len(argv) == 3 and argv[0] == "--ranks":
        return _rank_main(argv[1], argv[2])
    print("usage: python -m kitlib.capture.clinic --ranks JOB_JSON OUT  (one rank of a clinic recording; "
          "use python -m kitlib record-clinic)", file=sys.stderr)
    return 2


__all__ = ["CASES", "ClinicCase", "answer_key", "cases_for", "clinic_index", "plan", "public_manifest",
           "record_clinic", "torchrun_command"]

if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
