"""Course: the lessons' plumbing — the top layer of kitlib.

What belongs here: what a lesson needs and nothing else needs — live or replay
mode and the capture to look at (this module), the "your turn" exercises
(``kitlib.course.exercises``, one module per lesson), the figures quoted from the
course's source texts (``kitlib.course.sources``), and the interactive widgets
to come. May import every other layer; nothing in kitlib imports the course.

What a lesson needs to start: live or replay, and the capture to look at.

Every lesson runs in one of two modes:

* **live** — a CUDA GPU is present: the lesson records a fresh capture of the
  workload (with the same recipe as the recording it replaces) and analyses it;
* **replay** — no GPU (most laptops): the lesson opens the H200 reference
  recording shipped in ``data/reference/``.

The mode comes from the environment variable ``KITLIB_MODE`` (``live``,
``replay`` or ``auto``, the default: live when ``torch.cuda.is_available()``).
Both modes hand the lesson the same thing, a :class:`kitlib.readers.bundle.Capture`, so
the analysis code is identical.
"""
from __future__ import annotations

from pathlib import Path

from ..readers.bundle import (OPEN_LOG, Capture, find_recording, open_capture, opened_labels,  # noqa: F401
                              reference_dir, relabel_opened, software_provenance)
from ..errors import KitError
from ..settings import value as setting
# the memory check before a live run (the same figures for python -m kitlib profile)
from ..capture.gpu_memory import (FIXED_BYTES, MIN_LIVE_BATCH, REFERENCE_PEAK_ALLOCATED_BYTES,  # noqa: F401
                                  REFERENCE_PEAK_RESERVED_BYTES, live_memory_plan)

#: Which recipe re-creates each reference recording live.
LIVE_RECIPES = {"profiler_5step": "full", "fixed_batch": "full", "cold_start_8step": "cold_start"}


def _no_nvidia_driver() -> bool:
    """True where no NVIDIA driver can be present, so torch could not see a CUDA GPU:
    macOS (PyTorch has no CUDA build for it), or Linux with neither the driver's
    ``/proc/driver/nvidia`` nor ``/dev/nvidia0`` nor ``nvidia-smi`` on the PATH.
    Elsewhere (Windows, a driver present) only torch can tell."""
    import shutil
    import sys
    if sys.platform == "darwin":
        return True
    if sys.platform.startswith("linux"):
        return not (Path("/proc/driver/nvidia").exists() or Path("/dev/nvidia0").exists()
                    or shutil.which("nvidia-smi"))
    return False


def cuda_available() -> bool:
    """Whether torch sees a CUDA GPU (False when torch is not importable).

    Without an NVIDIA driver (:func:`_no_nvidia_driver`) the answer is False without
    importing torch, which takes a second or more: a replay lesson on a laptop starts faster.
    """
    import sys
    if "torch" not in sys.modules and _no_nvidia_driver():
        return False
    try:
        import torch
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def mode() -> str:
    """``"live"`` or ``"replay"``, from ``KITLIB_MODE`` (default ``auto``).

    Raises
    ------
    KitError
        ``KITLIB_MODE=live`` without a CUDA GPU, or an unknown value.
    """
    want = (setting("KITLIB_MODE") or "auto").lower()
    if want not in ("auto", "live", "replay"):
        raise KitError(f"KITLIB_MODE must be auto, live or replay, not {want!r}")
    if want == "replay":
        return "replay"
    has_gpu = cuda_available()
    if want == "live" and not has_gpu:
        raise KitError("KITLIB_MODE=live but torch sees no CUDA GPU; unset it to replay the recordings")
    return "live" if has_gpu else "replay"


def lesson_capture(reference: str = "profiler_5step", live: bool | None = None, out_dir=None,
                   reuse_minutes: float = 60, progress: bool = True, free_bytes: int | None = None,
                   **workload_options) -> Capture:
    """The capture a lesson analyses: a fresh one (live) or the named recording (replay).

    Parameters
    ----------
    reference : str
        The recording the lesson is written around (see :func:`replay_capture`), e.g.
        ``"profiler_5step"``.
    live : bool, optional
        Force a mode; by default :func:`mode` decides. In replay, a bundle named
        ``reference`` inside the folder ``$KITLIB_REPLAY_DIR`` (your own captures,
        e.g. recorded earlier on a GPU) is used instead of the shipped one.
    out_dir : path, optional
        Where a live capture is written (default a new
        ``runs/lesson_<reference>_<time>_<random>``, unique even when two learners
        start in the same second).
    reuse_minutes : float
        In live mode, reuse this machine's newest live capture for the same reference
        if it is younger than this many minutes and ran with the same workload options
        (several lessons look at the same capture; 0 always records afresh).
    progress : bool
        Progress bars while capturing.
    free_bytes : int, optional
        Free GPU memory to plan for, in bytes (default: the GPU's). What a live path does
        with it, every live path alike: :func:`_memory_checked`.
    **workload_options
        Passed to :meth:`kitlib.capture.workload.WorkloadConfig.for_device` for a live capture
        (the reference settings on a GPU by default).

    Returns
    -------
    Capture
        ``capture.origin`` is ``"live"`` or ``"recorded"``; ``capture.label`` says whose.
        On a GPU with too little free memory for the reference batch, a live capture
        with a smaller batch, or (below :data:`MIN_LIVE_BATCH`) the recording, with a
        warning that says which and why.

    Raises
    ------
    BundleError
        The recording is missing from both ``$KITLIB_REPLAY_DIR`` and the kit.
    """
    live = (mode() == "live") if live is None else live
    if not live:
        return replay_capture(reference)
    from ..capture.workload import WorkloadConfig
    recipe = LIVE_RECIPES.get(reference, "full")
    opts = _memory_checked(workload_options, free_bytes, f"Using the recording {reference} instead.")
    if opts is None:
        return replay_capture(reference)
    device = opts.pop("device", "auto")
    cfg = WorkloadConfig.for_device(device, **opts)
    return _live_capture(f"lesson_{reference}", recipe, cfg, out_dir, reuse_minutes, progress,
                         f"live capture for the lessons built on {reference}; workload options "
                         f"{workload_options or 'default'}")


def live_recipe_captures(recipes, reuse_minutes: float = 60, progress: bool = True,
                         free_bytes: int | None = None, **workload_options) -> dict:
    """Live: one capture of the workload per torch.profiler recipe (lesson 06's cost of
    attribution), each reused when a matching one younger than ``reuse_minutes`` is
    in ``runs/`` (as :func:`lesson_capture` does: same workload, same GPU).

    Before anything runs, the memory check of every live path (:func:`_memory_checked`,
    as in :func:`lesson_capture`): with too little free GPU memory all the recipes run
    a smaller batch, with a warning; when not even :data:`MIN_LIVE_BATCH` fits, the
    recordings stand in (with a warning): the recipe ``full`` gets the recording
    ``profiler_5step`` (:data:`LIVE_RECIPES`), the others nothing.

    Parameters
    ----------
    recipes : sequence of str
        Names in :data:`kitlib.capture.recipes.RECIPES`.
    reuse_minutes : float
        0 always records afresh.
    progress : bool
    free_bytes : int, optional
        Free GPU memory to plan for (default: the GPU's; see :func:`lesson_capture`).
    **workload_options
        Passed to :meth:`kitlib.capture.workload.WorkloadConfig.for_device`.

    Returns
    -------
    dict of str -> Capture
        One capture per recipe; with nothing fitting, only the recipes a recording was
        made with (``capture.origin == "recorded"``).
    """
    from ..capture.workload import WorkloadConfig
    recorded = {}
    for ref, rec in LIVE_RECIPES.items():
        if rec in recipes and rec not in recorded:
            recorded[rec] = ref
    opts = _memory_checked(
        workload_options, free_bytes,
        "Using the recording " + (", ".join(f"{ref} for recipe {r}" for r, ref in recorded.items()) or "of none")
        + (f"; not measured: {', '.join(r for r in recipes if r not in recorded)}" if len(recorded) < len(recipes) else "")
        + ".")
    if opts is None:
        return {r: replay_capture(ref) for r, ref in recorded.items()}
    cfg = WorkloadConfig.for_device(opts.pop("device", "auto"), **opts)
    return {r: _live_capture(f"lesson_recipe-{r}", r, cfg, None, reuse_minutes, progress,
                             f"live capture with recipe {r} (lesson 06)") for r in recipes}


def measured(experiment: str, reuse_minutes: float = 60, free_bytes: int | None = None, **kwargs) -> dict:
    """Live: run one of :mod:`kitlib.capture.experiments`' step-time measurements, or
    reuse its result from a matching run younger than ``reuse_minutes``.

    The result is kept as a ``timing`` bundle (``runs/lesson_<experiment>_<time>_<random>/``
    with ``step_times.json``), so it travels like any capture and a second run of the
    lesson on the same GPU, with the same arguments, within the hour reads it back
    instead of measuring again.

    Parameters
    ----------
    experiment : str
        ``"measure_loader_settings"`` (lesson 04) or ``"overhead_series"`` (lesson 10).
    reuse_minutes : float
        0 always measures afresh.
    free_bytes : int, optional
        As :func:`lesson_capture` (:func:`_memory_checked`, for the experiment's workload;
        a smaller batch is kept in the bundle and compared on reuse). Where nothing fits,
        the recorded step times of ``profiler_5step`` are returned instead.
    **kwargs
        The experiment's arguments (JSON values: they are compared on reuse).

    Returns
    -------
    dict
        The experiment's result: ``{series: [step ms, ...]}``.

    Raises
    ------
    KitError
        An unknown experiment.
    """
    import json

    from ..capture import experiments
    from ..capture.recipes import runs_dir
    from ..capture.workload import WorkloadConfig
    from ..readers.bundle import write_bundle
    if experiment not in ("measure_loader_settings", "overhead_series"):
        raise KitError(f"no experiment {experiment!r}: measure_loader_settings or overhead_series")
    opts = _memory_checked({}, free_bytes, "Using the recorded step times of profiler_5step instead.")
    if opts is None:
        return replay_capture("profiler_5step").step_times()
    batch = opts.get("batch_size")     # None: the experiment's own default batch
    if batch is not None:
        kwargs = {**kwargs, ("base" if experiment == "measure_loader_settings" else "config"):
                  WorkloadConfig.for_device(batch_size=batch)}
    args = json.loads(json.dumps({k: v for k, v in kwargs.items() if k not in ("base", "config")}, sort_keys=True))
    gpu = software_provenance().get("gpu")
    if reuse_minutes > 0:
        found = _recent_bundle(f"lesson_{experiment}", reuse_minutes,
                               lambda c: c.recipe.get("arguments") == args and c.provenance.get("gpu") == gpu
                               and c.recipe.get("batch_size") == batch)
        if found is not None:
            print(f"reusing {found.path} ({found.label}); pass reuse_minutes=0 to measure again")
            return found.step_times()
    result = getattr(experiments, experiment)(**kwargs)
    out = unique_run_dir(runs_dir(), f"lesson_{experiment}")
    (out / "step_times.json").write_text(json.dumps(result, indent=1) + "\n")
    write_bundle(out, kind="timing", name=out.name, origin="live",
                 files={"step_times.json": f"kitlib.capture.experiments.{experiment} result: step times in ms"},
                 recipe={"name": experiment, "kind": "timing", "arguments": args, "batch_size": batch},
                 notes=f"live measurement for the lessons: experiments.{experiment}(**arguments)"
                       + (f", batch {batch} (the memory check's)" if batch is not None else ""))
    return result


def unique_run_dir(root, prefix: str, create: bool = True) -> Path:
    """A new folder name ``root/<prefix>_<UTC time>_<6 random hex>`` (created when ``create``).

    The random part (and, with ``create``, the exclusive ``mkdir``) makes the name
    unique even when two learners sharing a ``runs/`` folder start in the same second;
    a capture given an uncreated name claims it itself (with its lock file).

    Raises
    ------
    KitError
        ``root`` cannot be created or written.
    """
    import secrets
    import time
    root = Path(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
        for _ in range(20):
            d = root / f"{prefix}_{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}_{secrets.token_hex(3)}"
            if not create and not d.exists():
                return d
            try:
                if create:
                    d.mkdir()
                    return d
            except FileExistsError:
                continue
    except OSError as e:
        raise KitError(f"{root}: cannot create a run folder there ({e.strerror or e}); set KITLIB_RUNS "
                       "to a writable folder") from None
    raise KitError(f"{root}: no free run folder name after 20 tries")


def _live_capture(prefix, recipe, cfg, out_dir, reuse_minutes, progress, notes) -> Capture:
    from ..capture import recipes as cap_mod
    if reuse_minutes > 0:
        found = _recent_live(prefix, cfg.to_dict(), reuse_minutes)
        if found is not None:
            return found
    if out_dir is None:
        out_dir = unique_run_dir(cap_mod.runs_dir(), prefix, create=False)
    return cap_mod.capture(cfg, recipe, out_dir, progress=progress, notes=notes)


def _memory_checked(workload_options: dict, free_bytes, instead: str):
    """The memory check every live path of the lessons makes before it runs the workload.

    One rule for :func:`lesson_capture`, :func:`measured`, :func:`live_recipe_captures`,
    :func:`lesson_nsys_capture` and lesson 12's NCCL ranks: each path checks the free GPU
    memory of the moment with :func:`live_memory_plan` (no state is carried from lesson to
    lesson; on an unchanged GPU they all choose the same batch), for the workload it is
    about to run (``workload_options`` as :meth:`WorkloadConfig.for_device` takes them,
    ``device`` included).

    Parameters
    ----------
    workload_options : dict
    free_bytes : int or None
        Free GPU memory to plan for (a figure, to see what a smaller GPU would do);
        ``None``: ask the GPU, and check only when one is there and the device is not the CPU.
    instead : str
        The sentence that ends the warning when nothing fits (what the path does instead).

    Returns
    -------
    dict or None
        The options to run: unchanged when the batch fits (or nothing was checked: the
        CPU, ``small_cnn``); with a smaller ``batch_size`` when only that fits (with a
        warning); ``None`` when not even :data:`MIN_LIVE_BATCH` fits (with a warning
        ending in ``instead``).
    """
    import warnings

    from ..capture.workload import WorkloadConfig
    opts = dict(workload_options)
    device = opts.get("device", "auto")
    if free_bytes is None and (device == "cpu" or not cuda_available()):
        return opts
    cfg = WorkloadConfig.for_device(device, **{k: v for k, v in opts.items() if k != "device"})
    if cfg.model != "resnet50":        # the estimate is ResNet-50's
        return opts
    plan = live_memory_plan(free_bytes=free_bytes, batch_size=cfg.batch_size, image_size=cfg.image_size)
    if plan["batch_size"] is None:
        warnings.warn(f"{plan['message']} {instead}", stacklevel=3)
        return None
    if plan["batch_size"] != cfg.batch_size:
        warnings.warn(plan["message"], stacklevel=3)
        opts["batch_size"] = plan["batch_size"]
    return opts


def replay_capture(reference: str) -> Capture:
    """The recorded capture named ``reference``: from ``$KITLIB_REPLAY_DIR`` (your own
    bundles, named like the references they replace) when it holds one, else from the
    kit's reference recordings — the one lookup rule,
    :func:`kitlib.readers.bundle.find_recording` (the working directory is never
    searched). ``capture.label`` says which it was.

    Raises
    ------
    BundleError
        Neither place holds it.
    """
    path, where = find_recording(reference)
    cap = open_capture(path)
    cap.found_in = where
    relabel_opened(cap)
    return cap


def _recent_bundle(prefix: str, minutes: float, accept):
    """The newest ``runs/<prefix>_*`` live bundle younger than ``minutes`` that ``accept(capture)`` takes."""
    import time
    from ..capture import recipes as cap_mod
    root = cap_mod.runs_dir()
    if not root.exists():
        return None
    for d in sorted(root.glob(f"{prefix}_*"), reverse=True):
        if not (d / "manifest.json").is_file() or time.time() - d.stat().st_mtime > minutes * 60:
            continue
        try:
            cap = open_capture(d)
        except KitError:
            continue
        if cap.origin == "live" and accept(cap):
            return cap
    return None


def _recent_live(prefix: str, workload: dict, minutes: float):
    """The newest ``runs/<prefix>_*`` bundle younger than ``minutes`` with this workload, on this GPU."""
    gpu = software_provenance().get("gpu")

    def same(cap):
        w = cap.workload
        return cap.provenance.get("gpu") == gpu and all(
            w.get(k) == v for k, v in workload.items()
            if v is not None and k in w and k not in ("pin_memory", "device"))
    return _recent_bundle(prefix, minutes, same)


def this_machine() -> dict:
    """What this machine runs (see :func:`kitlib.readers.bundle.software_provenance`),
    without importing torch when the lesson has not (a replay lesson never needs it:
    the versions come from the installed packages, the GPU from ``nvidia-smi``)."""
    return software_provenance(import_torch=False)


def perfetto_instructions(path) -> str:
    """How to open a trace file in the Perfetto UI (https://ui.perfetto.dev), its lines wrapped
    to a notebook's width (:func:`kitlib.units.wrapped`)."""
    from ..units import wrapped
    p = Path(path)
    size_mb = p.stat().st_size / 1e6 if p.exists() else float("nan")
    return wrapped(f"Open https://ui.perfetto.dev in a browser, choose 'Open trace file' and pick\n"
            f"  {p.resolve()}\n"
            f"({size_mb:.1f} MB; .json.gz opens as it is. Traces of several hundred MB can exceed the "
            f"browser's memory: record fewer steps or less attribution.) chrome://tracing reads the same file.", indent="")


def compare_machines(capture: Capture):
    """This machine, the capture's machine and the source texts' machine, side by side.

    Returns
    -------
    DataFrame
        Index: gpu, driver, cuda, cudnn, torch, torchvision, python, os, cpu_count, date;
        columns ``this machine``, ``capture (<origin>)`` and ``source texts (B300)``
        (the source's software versions were not fully recorded: shown as "not recorded").
    """
    import pandas as pd
    keys = ["gpu", "driver", "cuda", "cudnn", "torch", "torchvision", "python", "os", "cpu_count", "date"]
    here = this_machine()
    cap = capture.provenance
    src = {k: "not recorded" for k in keys}
    src["gpu"] = "NVIDIA B300"
    return pd.DataFrame({
        "this machine": [here.get(k) if here.get(k) is not None else "—" for k in keys],
        f"capture ({capture.origin})": [cap.get(k) if cap.get(k) is not None else "—" for k in keys],
        "source texts (B300)": [src[k] for k in keys],
    }, index=keys).astype(str)


def workload_table(capture: Capture):
    """The capture's workload settings as a two-column table (setting, value)."""
    import pandas as pd
    w = capture.workload
    return pd.DataFrame({"value": [str(v) for v in w.values()]}, index=list(w)).rename_axis("setting")


def chain_beside_source(summary: dict, label: str = "this capture"):
    """Lesson 02's figures for one convolution beside the source texts' B300 figures.

    Parameters
    ----------
    summary : dict
        From :func:`kitlib.analyses.chain.op_summary`.

    Returns
    -------
    DataFrame
        Rows: operator host interval (µs), launch that produced the main kernel (µs,
        host), that kernel on the GPU (µs, device), which launch it was; columns
        ``label`` and ``source texts (B300)``.
    """
    import pandas as pd
    from .sources import B300
    rows = {
        "operator host interval (µs)": (round(summary["op_host_us"], 3), B300["conv_op_us"]),
        "launch of the main kernel, host (µs)": (round(summary["longest_kernel_launch_us"], 3), B300["conv_launch_us"]),
        "main kernel on the GPU, device (µs)": (round(summary["longest_kernel_us"], 3), B300["conv_kernel_us"]),
        "which launch / of how many": (f"{summary['longest_kernel_launch_index']} of {summary['launch_count']}",
                                       f"{B300['conv_launch_index']} of {B300['conv_launch_count']}"),
    }
    return pd.DataFrame(rows, index=[label, "source texts (B300)"]).T


# --------------------------------------------------------------------------- which data a lesson shows
def lesson_nsys_capture(reference: str = "nsys_8step", live: bool | None = None, recipe=None,
                        reuse_minutes: float = 60, free_bytes: int | None = None, **kw):
    """The Nsight Systems capture a lesson reads: a fresh one (live, when a GPU and
    ``nsys`` are both there) or the named reference bundle (replay).

    Parameters
    ----------
    reference : str
        Reference bundle (``"nsys_8step"``, ``"nsys_emit_nvtx"``), from ``$KITLIB_REPLAY_DIR``
        or ``data/reference`` (see :func:`kitlib.course.replay_capture`).
    live : bool, optional
        Force a mode; by default :func:`kitlib.course.mode` decides, and a live
        machine without ``nsys`` falls back to the reference (with a warning).
    recipe : str or NsysRecipe, optional
        Live recipe; default the one named like ``reference`` (``emit_nvtx`` for
        ``nsys_emit_nvtx``).
    reuse_minutes : float
        As :func:`lesson_capture` (the same recipe, batch and image size).
    free_bytes : int, optional
        As :func:`lesson_capture` (:func:`_memory_checked`, for the workload ``nsys`` runs,
        ``--batch-size``/``--image-size`` of ``workload_args`` included). Where nothing
        fits, the recording is used.
    **kw
        Passed to :func:`kitlib.capture.nsys_recipes.capture_nsys`.

    Returns
    -------
    kitlib.readers.bundle.Capture
    """
    import warnings

    from ..capture.nsys_recipes import NsysNotFound, capture_nsys, find_nsys
    live = (mode() == "live") if live is None else live
    if live:
        try:
            find_nsys(kw.get("nsys"))
        except NsysNotFound as e:
            warnings.warn(f"{e} Using the recorded {reference}.")
            live = False
    if live:
        args = [str(a) for a in kw.get("workload_args", ())]
        given = {k: _option(args, f"--{k.replace('_', '-')}") for k in ("device", "batch_size", "image_size")}
        want = {k: (v if k == "device" else int(v)) for k, v in given.items() if v is not None}
        opts = _memory_checked(want, free_bytes, f"Using the recording {reference} instead.")
        if opts is None:
            live = False
        elif opts.get("batch_size") != want.get("batch_size"):
            kw["workload_args"] = _without_option(args, "--batch-size") + ["--batch-size", str(opts["batch_size"])]
    if not live:
        return replay_capture(reference)
    from ..capture.recipes import runs_dir
    from ..capture.workload import WorkloadConfig
    recipe = recipe or {"nsys_emit_nvtx": "emit_nvtx"}.get(reference, reference)
    name = recipe if isinstance(recipe, str) else recipe.name
    if reuse_minutes > 0:
        gpu = software_provenance().get("gpu")
        planned = WorkloadConfig.for_device(opts.get("device", "auto"),
                                            **{k: v for k, v in opts.items() if k != "device"})
        found = _recent_bundle(f"lesson_{reference}", reuse_minutes,
                               lambda c: c.kind == "nsys" and c.recipe.get("name") == name
                               and c.provenance.get("gpu") == gpu
                               and c.workload.get("batch_size") == planned.batch_size
                               and c.workload.get("image_size") == planned.image_size)
        if found is not None:
            return found
    kw.setdefault("out_dir", unique_run_dir(runs_dir(), f"lesson_{reference}", create=False))
    return capture_nsys(recipe, **kw)


def _option(args: list, flag: str):
    """The value after the last ``flag`` in a command line (``None`` when absent)."""
    value = None
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith(flag + "="):
            value = a.split("=", 1)[1]
    return value


def _without_option(args: list, flag: str) -> list:
    """``args`` without ``flag`` and its value."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == flag:
            skip = True
        elif not a.startswith(flag + "="):
            out.append(a)
    return out


def ncu_capture(capture):
    """The Nsight Compute bundle to read for a lesson.

    Parameters
    ----------
    capture : kitlib.readers.bundle.Capture

    Returns
    -------
    Capture
        ``capture`` itself when it is an Nsight Compute bundle (``kind == "ncu"``),
        otherwise the recording ``ncu`` (:func:`replay_capture`).
    """
    return capture if capture.kind == "ncu" else replay_capture("ncu")


def step_flop_counts(capture) -> dict:
    """FlopCounterMode counts of one training step, for a capture.

    Parameters
    ----------
    capture : kitlib.readers.bundle.Capture

    Returns
    -------
    dict
        As :func:`kitlib.capture.experiments.flop_counter_step` (``total`` and ``by_op``, in FLOPs): the capture's
        own ``flop_counter_one_step.json``; for a live capture without one, counted now
        on the workload's model (:func:`kitlib.capture.experiments.workload_step_flops`, the capture's batch size
        and image size); otherwise the reference ``fixed_batch`` recording's count.
    """
    if capture.has("flop_counter_one_step.json"):
        return capture.read_json("flop_counter_one_step.json")
    if capture.origin == "live":
        from ..capture.experiments import workload_step_flops
        from ..capture.workload import WorkloadConfig
        w = capture.workload
        cfg = WorkloadConfig.for_device(batch_size=int(w.get("batch_size", 128)),
                                        image_size=int(w.get("image_size", 224)))
        return workload_step_flops(cfg)
    return replay_capture("fixed_batch").read_json("flop_counter_one_step.json")


# --------------------------------------------------------------------------- labels in Jupyter
def _install_labels():
    """Under IPython, note under every table and figure which recordings it draws on
    (:mod:`kitlib.course.labels`); nothing elsewhere."""
    try:
        from .labels import install
        install()
    except Exception:  # never let a display nicety stop a lesson
        pass


_install_labels()
