"""The clinic (issue 30): training jobs with one planted cause each, recorded in pairs.

``python -m kitlib record-clinic --out DIR [--device cpu|cuda] [--cases a,b,...] [--smallest]``
records, for every case, two bundles with the kit's own workload harness
(:func:`kitlib.capture.recipes.capture`, or :func:`kitlib.capture.distributed.capture_ranks`
under ``torchrun`` for the two-rank case)::

    DIR/clinic.json            the cases' neutral names, symptoms and folders (what a lesson shows)
    DIR/baseline/              a healthy run of the same workload, for comparison
    DIR/baseline_deep/         a healthy run of the deep narrow model (the cases on it compare with
                               this one; clinic.json's ``baselines`` says which is whose)
    DIR/case_a/before/         the job as it was: trace.json.gz, key_averages.json, step_times.json
    DIR/case_a/after/          the same job with the fix applied
    ...

Each bundle holds a torch.profiler trace of 3 active steps (``record_shapes`` on, the
recipe ``shapes``), the profiler's ``key_averages()`` rows and at least 5 uninstrumented
step times (``step_times.json`` ``step_ms_uninstrumented``, timed before the profiler
starts, as lesson 10 measures), with what the process and the machine did meanwhile
(``process``: RSS after each step, load average, CPU and wall time,
:func:`kitlib.capture.workload.time_steps`). Two cases are not in the trace: memory kept
outside the tensors the profiler records (``case_k``, seen in the RSS) and a busy machine
(``case_l``: the same job twice, the first recorded beside busy loops, :func:`_busy`, and
not timed interleaved).

What a learner must not read off the folders
-------------------------------------------
Cases are named ``case_a`` … in an order unrelated to their causes. Every manifest is
rewritten after the recording (:func:`public_manifest`): it keeps the model, device,
batch, image size, dataset, schedule and provenance, and drops every setting that
reveals a cause (workers, layout, optimiser options, transform, straggler, profiler
attribution options, anomaly detection, ``.item()``, copies). Those settings and the
causes live only here, in :data:`CASES`, and are printed for instructors by
:func:`answer_key` (``python -m kitlib answers --clinic``); nothing in the recordings'
folders holds them. A learner who reads this module's source can of course read the
answers, as with every answer key of the kit: lessons never open it.

CPU and GPU
-----------
Every case whose cause shows on a CPU is recorded there (:attr:`ClinicCase.cpu`). Two
causes exist only with a GPU: the host waiting for the device every step (``.item()``
costs nothing on a CPU, where every operator has finished when it returns) and pageable,
blocking copies (there is no copy to a CPU). ``--device cuda`` records all cases with
ResNet-50 (the course's workload), the two-rank case with NCCL when two GPUs are there,
else with Gloo on the CPU.

On the CPU the recorder sets ``torch.set_num_threads(1)``: the intra-op threads of a
small model fight the DataLoader workers and other processes for few cores, which makes
step times noisy (the manifest's ``torch_num_threads`` says so).
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import KitError, KitFileError
from ..paths import make_folder

#: The format of ``clinic.json``.
FORMAT = "kitlib-clinic/1"

#: The recording of every bundle: recipe ``shapes`` (record_shapes; wait 1, warmup 1,
#: active 3), 4 unprofiled warm-up steps (the loader workers get ahead), then 30 uninstrumented timed steps.
ACTIVE_STEPS = 3
PRE_STEPS = 4
TIMING_STEPS = 30
#: ``--smallest`` (CI): 1 warm-up step, 5 timed steps (the least lesson 10's interval
#: takes), 2 active steps, 202 synthetic images.
SMALLEST = {"active": 2, "pre_steps": 1, "timing_steps": 5, "synthetic_images": 202}

#: The healthy workload on the CPU: small_cnn, batch 16, 64 px crops of 64 px JPEGs
#: (so that two loader workers keep up on a busy 2-core machine), channels-last model and
#: input, fused SGD, persistent workers (no restart at each epoch of 32 batches).
CPU_BASE = dict(model="small_cnn", batch_size=16, image_size=64, synthetic_images=512, synthetic_px=64,
                num_workers=2, persistent_workers=True, channels_last=True, fused=True)
#: The healthy workload on a GPU: ResNet-50 (the course's workload), batch 64, 224 px,
#: 8 workers, pinned memory and non-blocking copies, fused SGD.
CUDA_BASE = dict(model="resnet50", batch_size=64, image_size=224, synthetic_images=1792,
                 num_workers=8, persistent_workers=True, pin_memory=True, channels_last=True, fused=True)


@dataclass(frozen=True)
class ClinicCase:
    """One case: a job with one planted cause, its fix, and where the cause shows.

    Attributes
    ----------
    letter : str
        The neutral name's letter (``case_<letter>``).
    cause_id : str
        Short id of the cause (only in the answer key).
    cause, fix : str
        The cause and its fix, in words (the answer key).
    symptom : str
        What the team noticed, the only thing the lesson says about the case.
    evidence : str
        The figure that shows the cause, how to compute it, and where (tool and view).
    before, after : dict
        :class:`~kitlib.capture.workload.WorkloadConfig` settings over the base workload
        of the device (:data:`CPU_BASE` / :data:`CUDA_BASE`); the key ``recipe``, when
        present, names a different recipe, and ``active_steps`` another number of
        profiled steps (the profiling-overhead case: 5, so that its instrumented step
        times number 5 on each side); ``timing_steps`` another number of
        uninstrumented steps (the memory case: 200, so that the RSS series is long enough
        to grow beyond the allocator's reuse of freed memory); ``busy_procs`` busy loops
        run beside the job while it is recorded (the busy-machine case, :func:`_busy`).
    cpu : bool
        The cause shows on a CPU (so the CPU set records it); else GPU only, and
        ``cpu_note`` says why.
    ranks : bool
        Recorded as two ranks under ``torchrun`` (the straggler).
    cuda_before, cuda_after : dict
        Settings that replace ``before``/``after``'s on a GPU, where they differ.
    """

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
        """The neutral folder name, ``case_<letter>``."""
        return f"case_{self.letter}"

    def settings(self, side: str, device: str = "cpu") -> dict:
        """The settings over the base workload for ``side`` (``"before"``/``"after"``)."""
        d = dict(self.before if side == "before" else self.after)
        if device == "cuda":
            d.update(self.cuda_before if side == "before" else self.cuda_after)
        return d


#: The many-operator job of the optimiser and profiling-overhead cases on the CPU: the
#: deep narrow CNN (102 parameter tensors, ~25 layers) on 32 px crops, batch 8, where the
#: per-operator costs dominate; on a GPU those cases keep ResNet-50 (161 tensors).
DEEP_CPU = {"model": "deep_cnn", "image_size": 32, "batch_size": 8}
DEEP_CUDA = {"model": "resnet50", "image_size": 224, "batch_size": 64}

#: The layout case on the CPU: the deep narrow CNN on 64 px crops, batch 16, where each
#: block's activations (16 x 16 x 16 x 16 floats, 256 KiB) are large enough that copying
#: them between layouts twice per block costs a third of the step (measured with
#: ``time_interleaved`` on 2 December: 65 ms before, 42 ms after, 40 steps a side).
DEEP_LAYOUT_CPU = {"model": "deep_cnn", "image_size": 64, "batch_size": 16}

#: The straggler's delay per step on rank 1, in ms (an unlabelled ``time.sleep``).
STRAGGLER_MS = 40.0

#: The heavy profiler recipe of the profiling-overhead case: shapes, stacks and memory.
HEAVY = "heavy"
#: The memory case's recipe, both sides: shapes and torch.profiler's memory records.
MEMORY = "shapes_memory"

#: The busy-machine case: busy loops (``python -c "while True: pass"``) the recorder runs
#: beside its *before* job, started ``BUSY_WARM_S`` s before it so that the 1-minute load
#: average has risen, and stopped ``BUSY_SETTLE_S`` s before the next recording so that
#: it has fallen again (the 1-minute average decays with a time constant of a minute).
BUSY_WARM_S = 60
BUSY_SETTLE_S = 150

#: The cases, by letter (the letters' order is not the causes' order in issue 30).
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
    """The cases recorded on ``device`` (``"cpu"``: those with :attr:`ClinicCase.cpu`),
    optionally only ``letters``.

    Raises
    ------
    KitError
        A letter that names no case, or a GPU-only case asked for on the CPU (the message
        says why it shows only on a GPU).
    """
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


# --------------------------------------------------------------------------- plan
@dataclass
class Recording:
    """One bundle of the plan: its folder (relative to the output), the workload
    settings, the recipe, and (for two ranks) the torchrun command."""

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
    """The healthy workload's settings on ``device`` (:data:`CPU_BASE`, :data:`CUDA_BASE`),
    with the smallest dataset for ``smallest``."""
    base = dict(CUDA_BASE if device == "cuda" else CPU_BASE)
    if smallest:
        base["synthetic_images"] = SMALLEST["synthetic_images"]
    return base


def plan(device: str = "cpu", letters=None, smallest: bool = False, out=".") -> list:
    """What ``record-clinic`` records, in order, without running anything.

    Parameters
    ----------
    device : str
        ``"cpu"`` or ``"cuda"``.
    letters : iterable of str, optional
        Only these cases (``"a"`` or ``"case_a"``); default all the device can show.
    smallest : bool
        The CI settings (:data:`SMALLEST`).
    out : path
        The output folder (for the two-rank case's command line).

    Returns
    -------
    list of Recording
        ``baseline`` first, then ``case_x/before`` and ``case_x/after`` per case.

    Raises
    ------
    KitError
        As :func:`cases_for`; a device other than cpu or cuda.
    """
    if device not in ("cpu", "cuda"):
        raise KitError(f"record-clinic: device must be cpu or cuda, not {device!r}")
    base = base_settings(device, smallest)
    out = Path(out)
    recs = [Recording("baseline", dict(base), "shapes")]
    # each other job shape a case's fix runs gets a healthy run of its own to compare with
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
    """The command line (a list for ``subprocess``) of the two-rank recording: ``python -m
    torch.distributed.run --standalone --nproc_per_node=2 -m kitlib.capture.clinic --ranks
    JSON OUT`` (``torchrun`` itself, run with this Python). NCCL where ``device`` is
    ``cuda`` and two GPUs are seen, else Gloo on the CPU
    (:func:`kitlib.capture.distributed.torchrun_plan`).
    """
    dev = "cpu"
    if device == "cuda":
        from .distributed import torchrun_plan
        dev = torchrun_plan()["device"]
    job = {"settings": {**settings, "device": dev}, "recipe": recipe, "smallest": bool(smallest)}
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
            "-m", "kitlib.capture.clinic", "--ranks", json.dumps(job), str(out)]


# --------------------------------------------------------------------------- manifests
#: The workload keys a shipped manifest keeps: they describe the job, not its cause.
#: Not the batch: the tiny-batch case's cause would be one field away; the trace's Input
#: Dims say it, as the case's evidence does.
PUBLIC_WORKLOAD = ("model", "image_size", "device_resolved", "dataset", "dataset_kind",
                   "dataset_images", "labels", "loss", "torch_num_threads", "seed")
#: The recipe keys a shipped manifest keeps.
PUBLIC_RECIPE = ("kind", "schedule", "activities", "pre_steps", "timing_steps", "use_schedule")


def public_manifest(manifest: dict, name: str) -> dict:
    """A bundle's manifest as the clinic ships it: the settings that would reveal the
    planted cause removed (:data:`PUBLIC_WORKLOAD`, :data:`PUBLIC_RECIPE` are kept),
    ``name`` neutral, ``notes`` saying only which case and side it is.

    The model's description stays (the optimiser case's deep model is visible there);
    ``straggler``, workers, layout, optimiser, transform and profiler options go.
    """
    m = dict(manifest)
    m["name"] = name
    m["workload"] = {k: v for k, v in (manifest.get("workload") or {}).items() if k in PUBLIC_WORKLOAD}
    m["recipe"] = {k: v for k, v in (manifest.get("recipe") or {}).items() if k in PUBLIC_RECIPE}
    m["notes"] = f"clinic {name.replace('_', ' ')} (python -m kitlib record-clinic)"
    return m


def _publish(folder: Path, name: str) -> None:
    """Make a recorded bundle public: its manifest through :func:`public_manifest`, and
    ``key_averages.json`` without its ``batch_size`` (its sha256 follows in the manifest)."""
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


# --------------------------------------------------------------------------- recording
def _config(settings: dict, device: str):
    """The :class:`~kitlib.capture.workload.WorkloadConfig` of ``settings`` on ``device``.
    ``for_device`` ignores ``None`` overrides; here ``None`` means PyTorch's default
    (``fused=None``), so it is set after."""
    from .workload import WorkloadConfig
    s = {k: v for k, v in settings.items() if k != "device"}
    cfg = WorkloadConfig.for_device(device, **{k: v for k, v in s.items() if v is not None})
    for k, v in s.items():
        if v is None:
            setattr(cfg, k, None)
    return cfg.validate()


def record_one(rec: Recording, out: Path, device: str = "cpu", smallest: bool = False) -> Path:
    """Record one bundle of :func:`plan` into ``out / rec.folder`` and make its manifest
    public (:func:`public_manifest`).

    Raises
    ------
    KitError
        The recording failed (the two-rank one: torchrun's last lines are in the message).
    """
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
        # said in the file: a pair re-timed side by side gets the interleaved order instead (_retime)
        _update_step_times(target, {"uninstrumented_order": f"one run: {recipe.timing_steps} steps in a row after "
                                                            f"{recipe.pre_steps} untimed steps, not interleaved "
                                                            "with another job"})
    _publish(target, name)
    return target


@contextlib.contextmanager
def _busy(procs: int, warm_s: float, settle_s: float):
    """``procs`` busy loops beside the block (the busy-machine case): started ``warm_s``
    before it, killed after it, then ``settle_s`` of waiting (see :data:`BUSY_WARM_S`)."""
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


#: The interleaved re-timing of a case's two sides (:func:`time_interleaved`): blocks of
#: ``BLOCK_STEPS`` steps, alternating before/after in ABBA order, until each side has
#: ``INTERLEAVED_STEPS`` (the smallest settings: one block of ``timing_steps`` a side).
#: 200 a side: the smallest fixes save 5-15 % of a step, whose interquartile range on a
#: 2-core machine with two loader workers is up to 70 % of its median; at 60 a side the
#: 95 % interval of two of them (cases a and e, 2 December) still held 0.
BLOCK_STEPS = 10
INTERLEAVED_STEPS = 200


def time_interleaved(before: dict, after: dict, device: str = "cpu", steps: int = INTERLEAVED_STEPS,
                     block: int = BLOCK_STEPS, warmup: int = PRE_STEPS) -> dict:
    """Uninstrumented step times of a case's two jobs, taken in alternating blocks.

    A shared machine's speed moves by more than some fixes save: timed one after the
    other, two runs of the same job differed by a factor of three here within minutes.
    Timing both jobs in the same minutes, in blocks of ``block`` steps in ABBA order
    (before, after, after, before, ...), gives each side the same share of the
    machine's slow and fast moments, so the difference of their medians is the fix's,
    and their spread is the noise it must stand clear of (lesson 10). Each block is a
    fresh job (model, optimiser, DataLoader) warmed up by ``warmup`` untimed steps, and
    only one job is alive at a time: an idle job's loader workers, filling their
    prefetch queue, would otherwise slow the timed one.

    Parameters
    ----------
    before, after : dict
        The two jobs' settings over the base workload (:meth:`ClinicCase.settings`
        merged into :func:`base_settings`; no ``recipe``/``active_steps`` keys).
    device : str
    steps : int
        Steps timed per side.
    block : int
        Steps per block.
    warmup : int
        Untimed steps of each job first (loader workers, allocator).

    Returns
    -------
    dict
        ``{"before": [ms, ...], "after": [ms, ...], "order": "ABBA blocks of N", "process":
        {"before": {...}, "after": {...}}}``, wall clock per step (``perf_counter_ns``,
        :func:`kitlib.capture.workload.time_steps`), and per side what the process and the
        machine did in its blocks (``time_steps``' ``process``: the load average before and
        after each block, CPU and wall seconds summed).
    """
    from .workload import build_workload, time_steps
    configs = {"before": before, "after": after}
    out = {"before": [], "after": [], "process": {"before": {}, "after": {}}}
    for side, n in _blocks(steps, block):
        # one job alive at a time: an idle job's loader workers would take the cores from the
        # timed one while they fill their prefetch queue
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
    """Write the interleaved times into both bundles' ``step_times.json`` (and their sha256
    into the manifests), keeping the profiled steps as recorded."""
    for side in ("before", "after"):
        up = {"step_ms_uninstrumented": times[side], "uninstrumented_order": times["order"]}
        if "process" in times:          # the load during the interleaved blocks (the RSS stays the recording's)
            up["process_interleaved"] = {k: v for k, v in times["process"][side].items()
                                         if k != "rss_bytes_after_step"}
        _update_step_times(out / case_name / side, up)


def _update_step_times(folder: Path, updates: dict) -> None:
    """Set ``updates``' keys in a bundle's ``step_times.json`` and its sha256 and size in the
    manifest."""
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
    """One rank of the two-rank recording (run by :func:`torchrun_command`'s command)."""
    import torch
    import torch.distributed as dist
    from .distributed import capture_ranks
    job = json.loads(job_json)
    s = job["settings"]
    if s.get("device", "cpu") == "cpu":
        torch.set_num_threads(1)
    try:
        recipe = _recipe(job["recipe"], job["smallest"])
        cfg = _config(s, s.get("device", "cpu"))
        cfg.steps = recipe.active
        capture_ranks(cfg, recipe, out, progress=False)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


#: The settings that make a job's shape: a healthy run to compare a case with runs the
#: same model on the same images and batch as the case's fixed job.
SHAPE_KEYS = ("model", "image_size", "batch_size")


def _job_shape(settings: dict, device: str) -> tuple:
    base = base_settings(device)
    return tuple({**base, **settings}[k] for k in SHAPE_KEYS)


def _healthy_runs(device: str, letters=None) -> tuple:
    """The healthy runs to compare the cases with: ``(by_case, shapes)``, per case the
    folder of its healthy run, and per folder its model, image size and batch. A case's
    healthy run is the base job with the shape of the case's *after* job: ``baseline``
    when that is the base's, ``baseline_deep`` for the deep narrow model's usual shape
    (:data:`DEEP_CPU`, :data:`DEEP_CUDA`), else ``baseline_<model>_<size>px_b<batch>``.
    The *after* job, not the *before*: where the batch is the cause (tiny batches), the
    healthy run has the fixed batch."""
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


def _baselines(device: str, letters=None) -> dict:
    """The healthy run to compare each case with (:func:`_healthy_runs`)."""
    return _healthy_runs(device, letters)[0]


def clinic_index(device: str, letters=None, smallest: bool = False) -> dict:
    """``clinic.json``: what a lesson may show, and nothing that names a cause.

    Returns
    -------
    dict
        ``format``, ``device``, ``settings`` (``"smallest"`` or ``"full"``), ``baseline``
        (its folder) and ``cases``: per neutral name its ``symptom``, ``before`` and
        ``after`` folders and ``ranks`` (two-rank recordings, opened with
        :func:`kitlib.load_traces`).
    """
    return {"format": FORMAT, "device": device, "settings": "smallest" if smallest else "full",
            "baseline": "baseline",
            "baselines": _baselines(device, letters),
            "cases": {c.name: {"symptom": c.symptom, "before": f"{c.name}/before", "after": f"{c.name}/after",
                               "ranks": c.ranks} for c in cases_for(device, letters)}}


def record_clinic(out, device: str = "cpu", letters=None, smallest: bool = False, dry_run: bool = False,
                  echo=print) -> list:
    """Record the clinic's bundles into ``out`` (see the module docstring).

    Parameters
    ----------
    out : path
        A new or empty folder.
    device : str
        ``"cpu"`` (the cases a CPU can show) or ``"cuda"`` (all of them, ResNet-50).
    letters : iterable of str, optional
        Only these cases.
    smallest : bool
        The CI settings (:data:`SMALLEST`): a few seconds per bundle on a CPU.
    dry_run : bool
        Print the plan and stop.

    Returns
    -------
    list of Recording
        The plan, as run.

    Raises
    ------
    KitError
        ``out`` is a file, or not empty; ``cuda`` without a GPU; a recording failed.
    """
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
    # each case's two jobs timed again side by side (time_interleaved): the uninstrumented
    # steps of a bundle recorded minutes apart from its pair carry the machine's drift
    _interleave_pairs(recs, out, device, smallest, None, echo)
    return recs


def _interleave_pairs(recs: list, out: Path, device: str, smallest: bool, steps: int | None, echo) -> None:
    """Time each case's two jobs of ``recs`` side by side and write the times into both
    bundles (:func:`time_interleaved`, :func:`_retime`); cases whose jobs are the same
    (only the profiler's recipe or the machine's load differs) and the two-rank case are
    left as recorded: their two sides were timed one after the other, not interleaved."""
    pairs = {}
    for r in recs:
        if r.case and not r.command:
            pairs.setdefault(r.case, {})[r.side] = r.settings
    small = SMALLEST if smallest else {}
    for name, sides in pairs.items():
        if sides["before"] == sides["after"]:
            continue                  # the same job on both sides (only the profiler's recipe differs)
        t0 = time.perf_counter()
        times = time_interleaved(sides["before"], sides["after"], device,
                                 steps=steps or small.get("timing_steps", INTERLEAVED_STEPS),
                                 block=small.get("timing_steps", BLOCK_STEPS),
                                 warmup=small.get("pre_steps", PRE_STEPS))
        _retime(out, name, times)
        echo(f"  {name} before/after timed side by side in {time.perf_counter() - t0:,.1f} s")


def retime_clinic(folder, device: str = "cpu", letters=None, steps: int = INTERLEAVED_STEPS,
                  echo=print) -> list:
    """Time the cases of a recorded clinic again, side by side, without recording them again.

    Each case's two jobs (from :data:`CASES`, not from the public manifests, which no
    longer name the cause) are timed in ABBA blocks (:func:`time_interleaved`), and the
    times replace ``step_ms_uninstrumented`` in both bundles, with their sha256 in the
    manifests. The traces, ``key_averages`` and profiled step times stay as recorded. Use
    it when a machine was busy while the set was recorded, or to time more steps.

    Parameters
    ----------
    folder : path
        A folder written by :func:`record_clinic` (it holds ``clinic.json``).
    device : str
        The device the set was recorded on (``clinic.json``'s ``device``).
    letters : iterable of str, optional
        Only these cases.
    steps : int
        Steps timed per side.

    Returns
    -------
    list of str
        The cases re-timed.

    Raises
    ------
    KitError
        ``folder`` holds no ``clinic.json``, one that is not a clinic index (invalid JSON,
        nested too deep, not an object: :class:`~kitlib.errors.KitFileError`), or one of
        another device; a case asked for is missing from it.
    """
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
    """The clinic's answer key, as Markdown, for instructors: per case its cause, fix,
    evidence, and the settings of both runs over the base workload.
    """
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
