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

import os
from pathlib import Path

from ..readers.bundle import Capture, open_capture, reference_dir, software_provenance
from ..errors import KitError

#: Which recipe re-creates each reference recording live.
LIVE_RECIPES = {"profiler_5step": "full", "fixed_batch": "full", "cold_start_8step": "cold_start"}


def cuda_available() -> bool:
    """Whether torch sees a CUDA GPU (False when torch is not importable)."""
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
    want = os.environ.get("KITLIB_MODE", "auto").strip().lower()
    if want not in ("auto", "live", "replay"):
        raise KitError(f"KITLIB_MODE must be auto, live or replay, not {want!r}")
    if want == "replay":
        return "replay"
    has_gpu = cuda_available()
    if want == "live" and not has_gpu:
        raise KitError("KITLIB_MODE=live but torch sees no CUDA GPU; unset it to replay the recordings")
    return "live" if has_gpu else "replay"


def lesson_capture(reference: str = "profiler_5step", live: bool | None = None, out_dir=None,
                   reuse_minutes: float = 60, progress: bool = True, **workload_options) -> Capture:
    """The capture a lesson analyses: a fresh one (live) or the named reference (replay).

    Parameters
    ----------
    reference : str
        The reference recording the lesson is written around (a folder of
        ``data/reference``), e.g. ``"profiler_5step"``.
    live : bool, optional
        Force a mode; by default :func:`mode` decides. In replay, a bundle named
        ``reference`` inside the folder ``$KITLIB_REPLAY_DIR`` (your own captures,
        e.g. recorded earlier on a GPU) is used instead of the shipped one.
    out_dir : path, optional
        Where a live capture is written (default ``runs/lesson_<reference>_<time>``).
    reuse_minutes : float
        In live mode, reuse this machine's newest live capture for the same reference
        if it is younger than this many minutes and ran with the same workload options
        (several lessons look at the same capture; 0 always records afresh).
    progress : bool
        Progress bars while capturing.
    **workload_options
        Passed to :meth:`kitlib.capture.workload.WorkloadConfig.for_device` for a live capture
        (the reference settings on a GPU by default).

    Returns
    -------
    Capture
        ``capture.origin`` is ``"live"`` or ``"recorded"``.

    Raises
    ------
    BundleError
        The reference recording is missing from ``data/reference``.
    """
    live = (mode() == "live") if live is None else live
    if not live:
        return replay_capture(reference)
    from ..capture import recipes as cap_mod
    from ..capture.workload import WorkloadConfig
    recipe = LIVE_RECIPES.get(reference, "full")
    opts = dict(workload_options)
    cfg = WorkloadConfig.for_device(opts.pop("device", "auto"), **opts)
    if reuse_minutes > 0:
        found = _recent_live(reference, cfg.to_dict(), reuse_minutes)
        if found is not None:
            return found
    if out_dir is None:
        import time
        out_dir = cap_mod.runs_dir() / f"lesson_{reference}_{time.strftime('%Y%m%d-%H%M%S')}"
    return cap_mod.capture(cfg, recipe, out_dir, progress=progress,
                           notes=f"live capture for the lessons built on {reference}; workload options "
                                 f"{workload_options or 'default'}")


def replay_capture(reference: str) -> Capture:
    """The recorded capture named ``reference``: from ``$KITLIB_REPLAY_DIR`` (your own
    bundles, named like the references they replace) when it holds one, else from the
    kit's ``data/reference``.

    Raises
    ------
    BundleError
        Neither place holds it.
    """
    own = os.environ.get("KITLIB_REPLAY_DIR")
    if own and (Path(own) / reference / "manifest.json").is_file():
        return open_capture(Path(own) / reference)
    return open_capture(reference_dir() / reference)


def _recent_live(reference: str, workload: dict, minutes: float):
    """The newest ``runs/lesson_<reference>_*`` bundle younger than ``minutes`` with this workload."""
    import time
    from ..capture import recipes as cap_mod
    root = cap_mod.runs_dir()
    if not root.exists():
        return None
    for d in sorted(root.glob(f"lesson_{reference}_*"), reverse=True):
        if not (d / "manifest.json").is_file() or time.time() - d.stat().st_mtime > minutes * 60:
            continue
        try:
            cap = open_capture(d)
        except KitError:
            continue
        w = cap.workload
        same = all(w.get(k) == v for k, v in workload.items()
                   if v is not None and k in w and k not in ("pin_memory", "device"))
        if cap.origin == "live" and same and cap.provenance.get("gpu") == software_provenance().get("gpu"):
            return cap
    return None


def this_machine() -> dict:
    """What this machine runs (see :func:`kitlib.readers.bundle.software_provenance`),
    without importing torch when the lesson has not (a replay lesson never needs it:
    the versions come from the installed packages, the GPU from ``nvidia-smi``)."""
    return software_provenance(import_torch=False)


def perfetto_instructions(path) -> str:
    """How to open a trace file in the Perfetto UI (https://ui.perfetto.dev)."""
    p = Path(path)
    size_mb = p.stat().st_size / 1e6 if p.exists() else float("nan")
    return (f"Open https://ui.perfetto.dev in a browser, choose 'Open trace file' and pick\n"
            f"  {p.resolve()}\n"
            f"({size_mb:.1f} MB; .json.gz opens as it is. Traces of several hundred MB can exceed the "
            f"browser's memory: record fewer steps or less attribution.) chrome://tracing reads the same file.")


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
def lesson_nsys_capture(reference: str = "nsys_8step", live: bool | None = None, recipe=None, **kw):
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
    if not live:
        return replay_capture(reference)
    recipe = recipe or {"nsys_emit_nvtx": "emit_nvtx"}.get(reference, reference)
    return capture_nsys(recipe, **kw)


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
    return open_capture("fixed_batch").read_json("flop_counter_one_step.json")
