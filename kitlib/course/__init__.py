"""Course: the lessons' plumbing, the top layer of kitlib. May import every other layer;
nothing in kitlib imports the course.

Every lesson runs *live* (a CUDA GPU: a fresh capture with the recording's recipe) or
*replay* (the H200 recordings in ``data/reference/``), chosen by ``KITLIB_MODE``
(``live``, ``replay`` or ``auto``, the default). Both hand the lesson a
:class:`kitlib.readers.bundle.Capture`, so the analysis code is the same."""
from __future__ import annotations

from pathlib import Path

from ..readers.bundle import Capture, find_recording, open_capture, relabel_opened, software_provenance
from ..errors import KitError
from ..settings import value as setting
# the memory check before a live run, as for python -m kitlib profile (the peaks: for the lessons)
from ..capture.gpu_memory import (MIN_LIVE_BATCH, REFERENCE_PEAK_ALLOCATED_BYTES,  # noqa: F401
                                  REFERENCE_PEAK_RESERVED_BYTES, live_memory_plan)

#: Which recipe re-creates each reference recording live.
LIVE_RECIPES = {"profiler_5step": "full", "fixed_batch": "full", "cold_start_8step": "cold_start"}


def _no_nvidia_driver() -> bool:
    """True where torch cannot see a CUDA GPU: macOS, or Linux with no ``/proc/driver/nvidia``,
    ``/dev/nvidia0`` nor ``nvidia-smi``."""
    import shutil
    import sys
    if sys.platform == "darwin":
        return True
    if sys.platform.startswith("linux"):
        return not (Path("/proc/driver/nvidia").exists() or Path("/dev/nvidia0").exists()
                    or shutil.which("nvidia-smi"))
    return False


def cuda_available() -> bool:
    """Whether torch sees a CUDA GPU; without a driver, False without importing torch (slow)."""
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

    Raises KitError: ``KITLIB_MODE=live`` without a CUDA GPU, or an unknown value."""
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
    """The capture a lesson analyses: a fresh one (live) or the recording ``reference`` (replay).

    ``live`` forces a mode (default :func:`mode`). Replay prefers ``$KITLIB_REPLAY_DIR/<reference>``.
    Live writes to ``out_dir`` (default a new ``runs/lesson_<reference>_<time>_<random>``),
    reuses a capture younger than ``reuse_minutes`` with the same workload on this GPU, and
    checks ``free_bytes`` (default the GPU's) with :func:`_memory_checked`: a smaller batch, or
    the recording, with a warning. ``workload_options`` go to ``WorkloadConfig.for_device``.

    Raises BundleError: the recording is in neither ``$KITLIB_REPLAY_DIR`` nor the kit."""
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
    """Live: ``{recipe: Capture}``, one capture per torch.profiler recipe (lesson 06), reused as
    in :func:`lesson_capture`. Where not even :data:`MIN_LIVE_BATCH` fits, only the recipes a
    recording was made with (:data:`LIVE_RECIPES`), from the recordings, with a warning."""
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
    """Live: ``{series: [step ms, ...]}`` of ``experiment`` (``"measure_loader_settings"``, lesson 04,
    or ``"overhead_series"``, lesson 10) run with ``kwargs`` (JSON values), kept as a ``timing``
    bundle in ``runs/`` and reused within ``reuse_minutes`` on the same GPU and arguments.
    Where no batch fits ``free_bytes``, the recorded step times of ``profiler_5step``.

    Raises KitError: an unknown experiment."""
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
    """A new folder ``root/<prefix>_<UTC time>_<6 random hex>`` (created when ``create``),
    unique even when two learners start in the same second.

    Raises KitError: ``root`` cannot be created or written."""
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
    """The memory check of every live path before it runs the workload (:func:`live_memory_plan`).

    Returns ``workload_options`` unchanged when the batch fits (or on the CPU, or a model other
    than ResNet-50), with a smaller ``batch_size`` (and a warning) when only that fits, or None
    (with a warning ending in ``instead``) when not even :data:`MIN_LIVE_BATCH` fits.
    ``free_bytes`` None: ask the GPU."""
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
    """The recording ``reference``, from ``$KITLIB_REPLAY_DIR`` else the kit's
    (:func:`kitlib.readers.bundle.find_recording`); ``capture.label`` says which.

    Raises BundleError: neither place holds it."""
    path, where = find_recording(reference)
    cap = open_capture(path)
    cap.found_in = where
    relabel_opened(cap)
    return cap


def _recent_bundle(prefix: str, minutes: float, accept):
    """The newest live ``runs/<prefix>_*`` bundle younger than ``minutes`` that ``accept`` takes."""
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
    """This machine's software and GPU (:func:`software_provenance`), without importing torch."""
    return software_provenance(import_torch=False)


def perfetto_instructions(path) -> str:
    """How to open a trace file in the Perfetto UI, wrapped to a notebook's width."""
    from ..units import wrapped
    p = Path(path)
    size_mb = p.stat().st_size / 1e6 if p.exists() else float("nan")
    return wrapped(f"Open https://ui.perfetto.dev in a browser, choose 'Open trace file' and pick\n"
            f"  {p.resolve()}\n"
            f"({size_mb:.1f} MB; .json.gz opens as it is. Traces of several hundred MB can exceed the "
            f"browser's memory: record fewer steps or less attribution.) chrome://tracing reads the same file.", indent="")


def compare_machines(capture: Capture):
    """This machine, the capture's and the source texts' (B300), side by side: a DataFrame
    indexed by gpu, driver, cuda, cudnn, torch, torchvision, python, os, cpu_count, date."""
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
    """Lesson 02's figures for one convolution (:func:`kitlib.analyses.chain.op_summary`), in µs,
    beside the source texts' B300 figures: columns ``label`` and ``source texts (B300)``."""
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


def lesson_nsys_capture(reference: str = "nsys_8step", live: bool | None = None, recipe=None,
                        reuse_minutes: float = 60, free_bytes: int | None = None, **kw):
    """The Nsight Systems capture a lesson reads: a fresh one (live, with ``nsys`` found) or the
    recording ``reference`` (replay, or live without ``nsys``, with a warning).

    ``recipe`` defaults to the one named like ``reference``; ``reuse_minutes`` and ``free_bytes``
    as :func:`lesson_capture` (the batch of ``workload_args`` checked); ``kw`` go to
    :func:`kitlib.capture.nsys_recipes.capture_nsys`."""
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
    """The value after the last ``flag`` in a command line (None when absent)."""
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
    """``capture`` when it is an Nsight Compute bundle, else the recording ``ncu``."""
    return capture if capture.kind == "ncu" else replay_capture("ncu")


def step_flop_counts(capture) -> dict:
    """FlopCounterMode counts of one training step (``total``, ``by_op``, in FLOPs): the capture's
    ``flop_counter_one_step.json``; for a live capture without one, counted now on its workload;
    else the ``fixed_batch`` recording's."""
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


def _install_labels():
    """Under IPython, label every table and figure with its recordings (:mod:`kitlib.course.labels`)."""
    try:
        from .labels import install
        install()
    except Exception:  # never let a display nicety stop a lesson
        pass


_install_labels()
