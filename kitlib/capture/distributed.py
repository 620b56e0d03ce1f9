"""Profile data-parallel training under ``torchrun``: one bundle, one trace per rank.

Each rank joins the process group (:func:`kitlib.capture.workload.init_distributed`), trains
the DDP workload on its ``DistributedSampler`` shard and records it under torch.profiler;
:func:`capture_ranks` writes ``<out>/manifest.json`` (kind :data:`KIND`, with
``distributed``: world size, backend, hosts, per rank its host, pid, device and files) and
``<out>/rank<r>/trace.json.gz`` and ``step_times.json`` (ms). Rank 0 claims the folder and
writes the manifest once every rank has written, hashing every file, so all ranks must
share one filesystem. A run that fails removes what it wrote."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import time
from pathlib import Path

from ..errors import KitError
from ..readers.bundle import Capture, open_capture, software_provenance, write_bundle
from .recipes import claim_out, get_recipe, profiler_activities, run_profiler, step_loop
from .workload import WorkloadConfig, build_workload, init_distributed, time_steps, torchrun_env

#: The manifest ``kind`` of a multi-rank bundle.
KIND = "torch_profiler_ranks"


def capture_ranks(config: WorkloadConfig | None = None, recipe="light", out_dir=None,
                  progress: bool = True, *, notes: str = "") -> Capture | None:
    """Record every rank of a torchrun launch into one bundle (call it on every rank): join the
    group, build the DDP workload, then the recipe's ``pre_steps``, ``timing_steps`` and
    profiled schedule (default ``light``; ``config.steps`` replaces ``active``).

    Returns the opened bundle on rank 0 (kind :data:`KIND`), ``None`` elsewhere.

    Raises :class:`KitError` (on every rank): not under torchrun; a recipe without a profiler
    schedule; NCCL with fewer GPUs than ranks; a straggler rank outside the run; an output
    folder that is not new or empty."""
    import torch.distributed as dist
    if torchrun_env() is None:
        raise KitError("capture_ranks runs under torchrun (RANK and WORLD_SIZE are not set): "
                       "torchrun --nproc_per_node=2 -m kitlib profile --device cpu")
    rec = get_recipe(recipe)
    if rec.kind != "torch_profiler" or not rec.use_schedule:
        raise KitError(f"recipe {rec.name!r}: a multi-rank capture records torch.profiler traces under a "
                       "schedule; use light, full, shapes, stack, memory or flops")
    config = (config or WorkloadConfig.for_device()).validate()
    if config.steps is not None:
        rec = rec.replace(active=config.steps)
    device, backend = init_distributed(config.device)
    rank, world = dist.get_rank(), dist.get_world_size()
    box = [None, None]
    claim = None
    if rank == 0:
        try:
            claim = claim_out(out_dir, f"{rec.name}_{world}ranks")
            box[0] = str(claim.path)
        except KitError as e:
            box[1] = str(e)
            dist.broadcast_object_list(box, src=0)
            raise
    dist.broadcast_object_list(box, src=0)
    if box[1]:
        raise KitError(f"rank 0 could not claim the output folder: {box[1]}")
    out = Path(box[0])
    mine = out / f"rank{rank}"
    t_start = time.perf_counter()
    try:
        mine.mkdir()
        show = progress and rank == 0
        with build_workload(config, progress=show) as wl:
            if rec.pre_steps:
                step_loop(wl, rec.pre_steps, "warm-up", show)
            step_times = {}
            if rec.timing_steps:
                step_times["step_ms_uninstrumented"] = time_steps(wl, rec.timing_steps, progress=show)
            _, traces, profiled_ms, _, _, _ = run_profiler(wl, rec, device, mine, show)
            if profiled_ms:
                step_times["step_ms_profiled"] = profiled_ms
            desc = wl.describe()
        (mine / "step_times.json").write_text(json.dumps(step_times, indent=1) + "\n")
        me = {"rank": rank, "host": socket.gethostname(), "pid": os.getpid(), "device": str(device),
              "trace": f"rank{rank}/{traces[0]}" if traces else None,
              "files": [f"rank{rank}/{n}" for n in traces] + [f"rank{rank}/step_times.json"],
              "failed": None if traces else "torch.profiler wrote no trace"}
    except BaseException:              # torchrun stops the other ranks when this one exits
        shutil.rmtree(mine, ignore_errors=True)
        if rank == 0 and claim is not None:
            _abandon(claim, out)
        raise
    everyone = [None] * world
    dist.all_gather_object(everyone, me)
    failed = [e for e in everyone if e.get("failed")]
    if failed:
        shutil.rmtree(mine, ignore_errors=True)
        if rank == 0:
            _abandon(claim, out)
        raise KitError("; ".join(f"rank {e['rank']} failed: {e['failed']}" for e in failed))
    if rank != 0:
        dist.barrier()                 # wait for rank 0's manifest
        return None
    try:
        files = {}
        for e in everyone:
            files[e["trace"]] = (f"rank {e['rank']}'s torch.profiler Chrome trace (export_chrome_trace, with "
                                 f"distributedInfo): {rec.active} active steps of batch {config.batch_size} "
                                 f"on {e['device']}, host {e['host']}")
            files[f"rank{e['rank']}/step_times.json"] = (
                f"rank {e['rank']}'s wall-clock step times in ms (perf_counter_ns"
                + (" + cuda.synchronize" if backend == "nccl" else "") + "): step_ms_uninstrumented "
                "(no profiler), step_ms_profiled (every step under the profiler's schedule)")
        rd = rec.to_dict()
        rd["activities"] = [a.name for a in profiler_activities(device)]
        hosts = sorted({e["host"] for e in everyone})
        desc["device_resolved"] = f"{backend}: " + ", ".join(e["device"] for e in everyone)
        desc["straggler"] = ({"rank": config.straggler_rank, "ms": config.straggler_ms,
                              "how": "time.sleep at the start of every step, in a straggler_delay range"}
                             if config.straggler_rank is not None and config.straggler_ms else None)
        distributed = {
            "world_size": world, "backend": backend, "launcher": "torchrun", "hosts": hosts,
            "clock": ("one host: every rank's trace times come from the same clock" if len(hosts) == 1 else
                      "several hosts: each trace is on its own host's clock, not aligned"),
            "ranks": [{k: e[k] for k in ("rank", "host", "pid", "device", "trace")} for e in everyone]}
        write_bundle(out, kind=KIND, name=out.name, files=files, recipe=rd, workload=desc,
                     provenance=software_provenance(), origin="live", notes=notes,
                     extra={"distributed": distributed,
                            "steps": {"pre_steps": rec.pre_steps, "uninstrumented_steps": rec.timing_steps,
                                      "profiled": rec.profiled_steps, "active": rec.active * rec.repeat,
                                      "schedule_actions": rec.schedule_actions()},
                            "elapsed_s": round(time.perf_counter() - t_start, 3)})
    except BaseException:
        _abandon(claim, out)
        dist.barrier()
        raise
    claim.done()
    dist.barrier()
    return open_capture(out)


@contextlib.contextmanager
def leave_together():
    """Around a rank's work under torchrun: every rank leaves the group together (a barrier
    once the work is done), then the group is destroyed, also on an error. A rank that tore
    Gloo down while rank 0 still summarised sometimes aborted at exit ("terminate called
    without an active exception", tests/analyses/test_distributed.py in CI)."""
    import torch.distributed as dist
    try:
        yield
        dist.barrier()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def exit_rank(code: int = 0):
    """End a torchrun rank's process with ``code`` once its output is flushed and its trace-cache
    writes are done, without C++'s destructors at exit: a thread of Gloo's or of the profiler's
    still joinable there made a rank abort ("terminate called without an active exception") after
    its work had succeeded, also after the barrier of :func:`leave_together` (CI, 7 December)."""
    import sys
    from ..readers import trace_cache
    trace_cache.wait()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _abandon(claim, out: Path) -> None:
    """Remove the rank folders' files this run wrote, then :meth:`OutFolder.abandon`."""
    for d in out.glob("rank*"):
        if d.is_dir():
            for f in d.iterdir():
                if f.name == "step_times.json" or (f.name.startswith("trace") and f.name.endswith(".json.gz")):
                    with contextlib.suppress(OSError):
                        f.unlink()
            with contextlib.suppress(OSError):
                d.rmdir()
    claim.abandon()


def summarize_ranks(path) -> str:
    """A few lines on a multi-rank bundle: ranks, backend, hosts; per rank the step time and the
    ms in collectives, waiting and transferring
    (:func:`kitlib.analyses.collectives.rank_summary`); the straggler."""
    from ..analyses.collectives import rank_summary, straggler_summary
    from ..readers.ranks import load_traces
    rt = load_traces(path)
    summ = rank_summary(rt)
    m = rt.manifest
    lines = [f"{Path(rt.source).name}: {len(rt.ranks)} ranks of world size {rt.world_size}, backend "
             f"{rt.backend}, hosts {', '.join(m.get('hosts', [])) or '?'}",
             f"{'rank':>4}  {'step ms':>9}  {'in collectives ms/step':>22}  {'waiting':>9}  {'transfer':>9}"]
    for r, row in summ.iterrows():
        lines.append(f"{r:>4}  {row.step_ms:>9.1f}  {row.in_collectives_ms:>22.1f}  {row.wait_ms:>9.1f}  "
                     f"{row.transfer_ms:>9.1f}")
    if len(rt.ranks) > 1:
        s = straggler_summary(rt)
        lines.append(f"the others waited longest for rank {s['rank']} in {s['steps_last']} of {s['steps']} steps, "
                     f"{s['late_by_ms_median']:.1f} ms per step (median; an estimate from start times); it "
                     f"arrived last at {s['last_share']:.0%} of {s['calls']} collectives")
    lines.append(f"read it: kitlib.load_traces({str(rt.source)!r})")
    return "\n".join(lines)


__all__ = ["KIND", "capture_ranks", "leave_together", "summarize_ranks"]


#: Rank 1's sleep per step (ms) in the kit's straggler recording (``ranks_straggler``).
STRAGGLER_MS = 500.0


def torchrun_plan(import_torch: bool = True) -> dict:
    """How a two-rank (or more) recording runs here: ``gpus``, ``nproc``, ``device``
    (``cuda``/``cpu``), ``backend`` (``nccl``/``gloo``) and ``why``. NCCL needs one GPU per
    rank, so fewer than two GPUs means two Gloo ranks on the CPU. ``import_torch=False``
    counts GPUs with ``nvidia-smi`` unless torch is already imported.

    Sources: docs/SOURCES.md#nccl-one-gpu-per-rank"""
    import sys
    if import_torch or "torch" in sys.modules:
        try:
            import torch
            gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        except Exception:
            gpus = 0
    else:
        from ..readers.bundle import nvidia_smi_query
        gpus = len(nvidia_smi_query("name"))
    if gpus >= 2:
        return {"gpus": gpus, "nproc": gpus, "device": "cuda", "backend": "nccl",
                "why": f"{gpus} GPUs: one rank per GPU, NCCL between them"}
    why = ("one GPU: NCCL needs one GPU per rank (each rank's communicator owns its device; two ranks "
           "on one GPU fail with 'Duplicate GPU detected'), so two ranks run on the CPU with Gloo"
           if gpus == 1 else "no GPU: two ranks on the CPU with Gloo")
    return {"gpus": gpus, "nproc": 2, "device": "cpu", "backend": "gloo", "why": why}


def torchrun_command(out_dir, straggler: bool, plan: dict | None = None, batch_size: int | None = None) -> list:
    """The ``python -m torch.distributed.run`` (torchrun) command of one of the kit's two-rank
    recordings: recipe ``light``, 3 active steps, rank 1 sleeping :data:`STRAGGLER_MS` per step
    when ``straggler``, ``--batch-size`` per rank when given."""
    import sys
    plan = plan or torchrun_plan()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={plan['nproc']}",
           "-m", "kitlib", "profile", "--device", plan["device"], "--recipe", "light", "--steps", "3", "--no-progress",
           "--out", str(out_dir)]
    if plan["device"] == "cpu":
        cmd += ["--workers", "0"]
    if batch_size is not None:
        cmd += ["--batch-size", str(int(batch_size))]
    if straggler:
        cmd += ["--straggler-rank", "1", "--straggler-ms", f"{STRAGGLER_MS:g}"]
    return cmd


def run_torchrun(out_dir, straggler: bool, timeout_s: float = 900, plan: dict | None = None,
                 batch_size: int | None = None) -> Path:
    """Record one two-rank bundle into ``out_dir`` (:func:`torchrun_command`). Raises
    :class:`KitError` when torchrun fails (its last lines in the message)."""
    import subprocess
    res = subprocess.run(torchrun_command(out_dir, straggler, plan, batch_size), capture_output=True, text=True,
                         timeout=timeout_s, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if res.returncode != 0:
        tail = "\n".join((res.stdout + res.stderr).strip().splitlines()[-12:])
        role = "straggler" if straggler else "balanced"
        raise KitError(f"torchrun for the {role} recording failed (exit {res.returncode}):\n{tail}")
    return Path(out_dir)
