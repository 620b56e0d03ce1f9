"""Lesson 12's recordings: two-rank runs of the workload, live or replayed.

Replay reads the kit's own two-rank CPU recordings (``data/reference/ranks_balanced``
and ``ranks_straggler``: ``torchrun``, DDP, Gloo; see ``data/reference/PROVENANCE.md``)
and the two public NCCL ranks in ``data/public-traces`` (see ``SOURCES.md`` there).
Live (a CUDA GPU present) records the same two runs afresh with ``torchrun``:
NCCL with one GPU per rank when the machine has two or more GPUs, else Gloo on the
CPU — NCCL binds each rank's communicator to one device and refuses two ranks on
the same GPU.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from ..errors import KitError
from ..readers.bundle import reference_dir
from ..readers.ranks import RankTraces, load_traces
from . import mode, replay_capture

#: The reference recordings lesson 12 replays, by role.
REFERENCES = {"balanced": "ranks_balanced", "straggler": "ranks_straggler"}
#: The straggler the live recording injects: rank 1 sleeps this long per step (ms),
#: as in ``ranks_straggler``.
STRAGGLER_MS = 500.0


def public_nccl_dir() -> Path:
    """``data/public-traces``: the two public NCCL ranks (HTA's sampled A100 run)."""
    return reference_dir().parent / "public-traces"


def live_plan() -> dict:
    """What a live recording would run on this machine.

    Returns
    -------
    dict
        ``gpus`` (CUDA GPUs seen), ``nproc`` (ranks), ``device`` (``cuda`` or
        ``cpu``), ``backend`` (``nccl`` or ``gloo``) and ``why`` (one sentence).
    """
    try:
        import torch
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        gpus = 0
    if gpus >= 2:
        return {"gpus": gpus, "nproc": gpus, "device": "cuda", "backend": "nccl",
                "why": f"{gpus} GPUs: one rank per GPU, NCCL between them"}
    why = ("one GPU: NCCL needs one GPU per rank (each rank's communicator owns its device; two ranks "
           "on one GPU fail with 'Duplicate GPU detected'), so two ranks run on the CPU with Gloo"
           if gpus == 1 else "no GPU: two ranks on the CPU with Gloo")
    return {"gpus": gpus, "nproc": 2, "device": "cpu", "backend": "gloo", "why": why}


def torchrun_command(out_dir, straggler: bool, plan: dict | None = None) -> list:
    """The ``torchrun`` command line of one live recording (a list for ``subprocess``).

    ``python -m torch.distributed.run`` is ``torchrun`` (the same entry point), used
    so the command runs with this Python."""
    plan = plan or live_plan()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={plan['nproc']}",
           "-m", "kitlib", "profile", "--device", plan["device"], "--recipe", "light", "--steps", "3", "--no-progress",
           "--out", str(out_dir)]
    if plan["device"] == "cpu":
        cmd += ["--workers", "0"]
    if straggler:
        cmd += ["--straggler-rank", "1", "--straggler-ms", f"{STRAGGLER_MS:g}"]
    return cmd


def record_live(out_root=None, timeout_s: float = 900) -> dict:
    """Record the balanced and the straggler run with ``torchrun`` (live mode).

    Returns
    -------
    dict
        ``{"balanced": folder, "straggler": folder}`` (bundle folders).

    Raises
    ------
    KitError
        A ``torchrun`` run failed (its last output lines are in the message).
    """
    from ..capture.recipes import runs_dir
    root = Path(out_root) if out_root else runs_dir()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = {}
    for role in REFERENCES:
        folder = root / f"lesson_ranks_{role}_{stamp}"
        res = subprocess.run(torchrun_command(folder, role == "straggler"), capture_output=True, text=True,
                             timeout=timeout_s, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        if res.returncode != 0:
            tail = "\n".join((res.stdout + res.stderr).strip().splitlines()[-12:])
            raise KitError(f"torchrun for the {role} recording failed (exit {res.returncode}):\n{tail}")
        out[role] = folder
    return out


def recordings(live: bool | None = None) -> dict:
    """Lesson 12's runs, read with :func:`kitlib.load_traces`.

    Parameters
    ----------
    live : bool, optional
        Force a mode; by default :func:`kitlib.course.mode` decides.

    Returns
    -------
    dict
        ``balanced`` and ``straggler`` (:class:`RankTraces` of the kit's two-rank runs:
        the references in replay, or fresh ``torchrun`` recordings live), ``nccl``
        (the public NCCL pair) and ``origin`` (``"recorded"`` or ``"live"``).
    """
    live = (mode() == "live") if live is None else live
    if live:
        folders = record_live()
        origin = "live"
    else:
        folders = {role: replay_capture(name).path for role, name in REFERENCES.items()}
        origin = "recorded"
    out: dict = {role: load_traces(p) for role, p in folders.items()}
    out["nccl"] = load_traces(public_nccl_dir())
    out["origin"] = origin
    return out


def injected_delay(traces: RankTraces) -> dict | None:
    """The delay a kit recording injected (``{"rank", "ms", "how"}`` from its manifest's
    workload), or ``None`` (none, or not a kit bundle)."""
    if traces.source is None:
        return None
    from ..readers.bundle import open_capture
    try:
        return open_capture(traces.source).workload.get("straggler")
    except KitError:
        return None


__all__ = ["REFERENCES", "STRAGGLER_MS", "public_nccl_dir", "live_plan", "torchrun_command", "record_live",
           "recordings", "injected_delay"]
